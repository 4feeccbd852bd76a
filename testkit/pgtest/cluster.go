package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The cluster's layout under its temporary directory dir:
//
//	dir/              socket directory (.s.PGSQL.5432), mode 0755, owned by the server's user
//	dir/data/         the cluster (initdb), mode 0700
//	dir/log           the server's output
//	dir/owner         the pid of the test binary that started it, for the next binary's reaping
//
// scripts/pg-test.sh starts the same kind of cluster, with the same settings, for a whole
// `make test`; keep the two in step.
const (
	dirPattern   = "freshq-pg-"
	clusterPort  = "5432" // only names the socket file; nothing listens on TCP
	superuser    = "postgres"
	startTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
)

// serverSettings are the postgres -c settings of a throwaway cluster (see the package doc).
var serverSettings = []string{
	"listen_addresses=",
	"fsync=off",
	"full_page_writes=off",
	"max_connections=200",
}

// cluster is a running postgres this binary started.
type cluster struct {
	dir    string
	proc   *os.Process
	exited chan struct{} // closed when the postmaster has exited
}

func (c *cluster) dsn() string {
	return fmt.Sprintf("host=%s port=%s user=%s dbname=postgres sslmode=disable", c.dir, clusterPort, superuser)
}

// findBinDir returns the directory holding initdb and postgres.
func findBinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		if err := hasServer(d); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinDir, d, err)
		}
		return d, nil
	}
	var tried []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if hasServer(d) == nil {
			return d, nil
		}
		tried = append(tried, d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Highest major version first: "9.6" < "15" compares numerically.
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if hasServer(d) == nil {
			return d, nil
		}
		tried = append(tried, d)
	}
	return "", fmt.Errorf("no initdb and postgres found (pg_config --bindir, /usr/lib/postgresql/*/bin; tried %v)", tried)
}

func hasServer(dir string) error {
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("no %s in %s: %w", b, dir, err)
		}
	}
	return nil
}

// versionOf reads the major version out of /usr/lib/postgresql/<major>/bin, 0 if none.
func versionOf(binDir string) int {
	v, _, _ := strings.Cut(filepath.Base(filepath.Dir(binDir)), ".")
	n, _ := strconv.Atoi(v)
	return n
}

// serverCredential is the user to run the server as: nil (this process's own) unless this
// process is root, which PostgreSQL refuses; then nobody.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no user nobody to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// startCluster initialises and starts a cluster in a fresh temporary directory and waits until
// it accepts connections.
func startCluster() (*cluster, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	reapLeftovers()
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, err
	}
	c, err := initAndStart(bin, dir, cred)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func initAndStart(bin, dir string, cred *syscall.Credential) (*cluster, error) {
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("giving %s to the server's user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser, "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb in %s: %w\n%s", data, err, out)
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{"-D", data, "-k", dir, "-p", clusterPort}
	for _, s := range serverSettings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	// SIGQUIT is postgres's immediate shutdown: the postmaster stops its backends and exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	c := &cluster{dir: dir, exited: make(chan struct{})}
	if err := startLocked(cmd, c); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	if err := c.waitReady(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// startLocked starts cmd from a goroutine locked to its OS thread that lives as long as the
// process. Pdeathsig fires when the thread that forked the child exits, not the process; a Go
// runtime may end an idle thread, which would take a healthy server down with it.
func startLocked(cmd *exec.Cmd, c *cluster) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer close(c.exited)
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		c.proc = cmd.Process
		errc <- nil
		cmd.Wait()
		// Returning while locked ends the thread; the child is already gone.
	}()
	return <-errc
}

// waitReady polls until the server accepts a connection, it exits, or startTimeout passes.
func (c *cluster) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.dsn())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start:\n%s", c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %v: %w\n%s", startTimeout, err, c.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop asks for a fast shutdown (SIGINT: roll back sessions, checkpoint, exit), kills the
// server if it has not exited within stopTimeout, and removes the directory.
func (c *cluster) stop() error {
	var err error
	if c.proc != nil {
		c.proc.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(stopTimeout):
			syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
			<-c.exited
			err = fmt.Errorf("postgres in %s did not stop within %v; killed", c.dir, stopTimeout)
		}
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

// reapLeftovers removes the directories of clusters whose test binary has died (killed before
// Main could stop its cluster) and whose server has exited, which Pdeathsig sees to.
func reapLeftovers() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	for _, d := range dirs {
		if pidAlive(filepath.Join(d, "owner")) || pidAlive(filepath.Join(d, "data", "postmaster.pid")) {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "owner")); err == nil {
			os.RemoveAll(d)
		}
	}
}

// pidAlive reports whether the file exists and its first line is the pid of a live process.
func pidAlive(file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
