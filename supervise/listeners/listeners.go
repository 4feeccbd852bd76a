package listeners

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// The names of the inherited descriptors: systemd's FileDescriptorName= or the handover's.
const (
	fdAdmin   = "admin"          // the admin listener (listen)
	fdCrawler = "crawler"        // the crawler listener (serve.listen)
	fdReady   = "handover-ready" // the handover's pipe: the new supervisor writes one byte to take over
)

// The handover's environment: the parent's pid (the descriptors are for its child only, as
// LISTEN_PID makes systemd's for one process) and the names of descriptors 3 and on.
const (
	envHandoverPID = "FRESHQ_HANDOVER_PID"
	envHandoverFDs = "FRESHQ_HANDOVER_FDNAMES"
)

// ErrHandoverUnderSystemd refuses a handover under systemd, whose service would end with its
// main process: there, the socket units keep the sockets and `systemctl restart` upgrades.
var ErrHandoverUnderSystemd = errors.New("running under systemd (NOTIFY_SOCKET is set): restart the unit instead, its sockets (freshq-admin.socket, freshq-crawler.socket) queue the connections meanwhile")

// Inherited are the sockets this supervisor was given, by name, and from whom.
type Inherited struct {
	files map[string]*os.File // fdAdmin, fdCrawler
	From  string              // "systemd" or "handover"; "" when nothing was inherited
	ready *os.File            // a handover's pipe (fdReady), nil otherwise
}

// Inherit takes the descriptors passed by systemd or by a handover, and clears their
// environment so that no worker inherits it. A name it does not know, or one given twice, is
// refused: a socket nobody would ever accept on would queue its connections for nothing.
func Inherit() (Inherited, error) {
	in := Inherited{files: map[string]*os.File{}}
	var files []*os.File
	switch {
	case os.Getenv("LISTEN_PID") != "":
		files = activation.Files(true) // none unless LISTEN_PID is this process; clears LISTEN_*
		in.From = "systemd"
	case os.Getenv(envHandoverPID) != "":
		parent := os.Getenv(envHandoverPID)
		names := strings.Split(os.Getenv(envHandoverFDs), ":")
		os.Unsetenv(envHandoverPID)
		os.Unsetenv(envHandoverFDs)
		if parent != strconv.Itoa(os.Getppid()) {
			return in, nil // meant for another process: this one inherited only the environment
		}
		in.From = "handover"
		for i, name := range names {
			fd := 3 + i
			syscall.CloseOnExec(fd) // a worker must not inherit them
			files = append(files, os.NewFile(uintptr(fd), name))
		}
	}
	for _, f := range files {
		name := f.Name()
		switch {
		case name == fdReady && in.From == "handover":
			in.ready = f
			continue
		case name != fdAdmin && name != fdCrawler:
			return in, fmt.Errorf("an inherited socket is named %q; name them %q and %q (FileDescriptorName=)", name, fdAdmin, fdCrawler)
		case in.files[name] != nil:
			return in, fmt.Errorf("two inherited sockets are named %q", name)
		}
		in.files[name] = f
	}
	if len(files) == 0 {
		in.From = ""
	}
	return in, nil
}

// Check refuses sockets the configuration does not match: the crawler socket without
// serve.listen (crawler empty), or a socket on another address than its key names (listen:
// admin, serve.listen: crawler).
func (in Inherited) Check(admin, crawler string) error {
	if in.files[fdCrawler] != nil && crawler == "" {
		return fmt.Errorf("a %q socket was inherited but serve.listen is not set", fdCrawler)
	}
	for name, key := range map[string]string{fdAdmin: admin, fdCrawler: crawler} {
		f := in.files[name]
		if f == nil {
			continue
		}
		sa, err := syscall.Getsockname(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("the inherited %q socket: %w", name, err)
		}
		if err := sameAddress(key, sa); err != nil {
			return fmt.Errorf("the inherited %q socket: %w", name, err)
		}
	}
	return nil
}

// sameAddress reports whether the socket address sa is the one the configured host:port names:
// the same port, and the same address, or any address for an unspecified host (0.0.0.0, ::,
// empty), or one of the addresses a host name resolves to.
func sameAddress(want string, sa syscall.Sockaddr) error {
	var ip net.IP
	var port int
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		ip, port = net.IP(a.Addr[:]), a.Port
	case *syscall.SockaddrInet6:
		ip, port = net.IP(a.Addr[:]), a.Port
	default:
		return fmt.Errorf("is not a TCP socket; want one on %s", want)
	}
	got := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	host, p, err := net.SplitHostPort(want)
	if err != nil {
		return fmt.Errorf("listens on %s; the configuration's %q is no host:port", got, want)
	}
	if wp, err := net.LookupPort("tcp", p); err != nil || wp != port {
		return fmt.Errorf("listens on %s, not on %s as the configuration says", got, want)
	}
	wantIPs := []net.IP{net.ParseIP(host)}
	if host == "" {
		wantIPs = []net.IP{net.IPv4zero}
	} else if wantIPs[0] == nil {
		wantIPs, _ = net.LookupIP(host)
	}
	for _, w := range wantIPs {
		if w.Equal(ip) || w.IsUnspecified() && ip.IsUnspecified() {
			return nil
		}
	}
	return fmt.Errorf("listens on %s, not on %s as the configuration says", got, want)
}

// ListenAdmin is the admin listener: the inherited socket, or one bound on addr. file is a
// descriptor of the socket, kept for a handover.
func (in Inherited) ListenAdmin(addr string) (ln net.Listener, file *os.File, err error) {
	if f := in.files[fdAdmin]; f != nil {
		ln, err = net.FileListener(f)
		return ln, f, err
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, nil, err
	}
	if file, err = socketFile(ln, fdAdmin); err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, file, nil
}

// ListenCrawler is the crawler listener's socket, for worker 0: the inherited one, or one
// bound on addr.
func (in Inherited) ListenCrawler(addr string) (*os.File, net.Addr, error) {
	f := in.files[fdCrawler]
	if f == nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		defer ln.Close() // the file holds the socket
		f, err = socketFile(ln, fdCrawler)
		return f, ln.Addr(), err
	}
	ln, err := net.FileListener(f) // for its address only
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	return f, ln.Addr(), nil
}

// socketFile is a descriptor of ln's socket to hand to another process, duplicated without
// touching the socket's mode. (*net.TCPListener).File's descriptor would do, but exec puts that
// one in blocking mode (os.File.Fd), and the mode belongs to the socket, shared by every process
// that holds it: a listener still accepting here or in worker 0 would then block a thread in
// accept(2), past its own close, and take a connection that no one answers.
func socketFile(ln net.Listener, name string) (*os.File, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%s: not a socket", name)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var fd int
	var dupErr error
	if err := rc.Control(func(s uintptr) { fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("%s: %w", name, dupErr)
	}
	return os.NewFile(uintptr(fd), name), nil // os.NewFile's Fd leaves the mode as it is
}

// Confirm tells the supervisor that handed over that this one takes over: from now on it
// stops, and this one waits for its locks.
func (in Inherited) Confirm() {
	if in.ready == nil {
		return
	}
	in.ready.Write([]byte{1})
	in.ready.Close()
}

// handoverConfirmTimeout bounds how long the old supervisor waits for the new one to confirm:
// it reads and checks its configuration, nothing more, before it does.
const handoverConfirmTimeout = 30 * time.Second

// HandOver starts the binary now at this process's path, with its arguments and the listening
// sockets (admin, and crawler unless it is nil), and returns its pid once it confirmed that it
// takes over. Any error leaves this supervisor serving as it was: a bad binary or a bad
// configuration file stops only the new process (which then says why on the same stderr).
func HandOver(admin, crawler *os.File) (int, error) {
	if os.Getenv("NOTIFY_SOCKET") != "" {
		return 0, ErrHandoverUnderSystemd
	}
	exe, err := os.Executable() // the path, also when the running file was replaced
	if err != nil {
		return 0, fmt.Errorf("locating the new binary: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("handover pipe: %w", err)
	}
	defer r.Close()
	files, names := []*os.File{admin}, []string{fdAdmin}
	if crawler != nil {
		files, names = append(files, crawler), append(names, fdCrawler)
	}
	files, names = append(files, w), append(names, fdReady)
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(withoutEnv(os.Environ(), "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", envHandoverPID, envHandoverFDs),
		envHandoverPID+"="+strconv.Itoa(os.Getpid()), envHandoverFDs+"="+strings.Join(names, ":"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = files
	err = cmd.Start()
	w.Close() // the child's copy is the one left: EOF when it exits without confirming
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", exe, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	r.SetReadDeadline(time.Now().Add(handoverConfirmTimeout))
	b := make([]byte, 1)
	if n, err := r.Read(b); n != 1 {
		cmd.Process.Kill()
		<-exited
		why := "it exited before it confirmed (its own log lines say why)"
		if err != nil && !errors.Is(err, io.EOF) {
			why = err.Error()
		}
		return 0, fmt.Errorf("the new supervisor (%s, pid %d) did not take over: %s", exe, cmd.Process.Pid, why)
	}
	return cmd.Process.Pid, nil
}

// withoutEnv is env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
outer:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}
