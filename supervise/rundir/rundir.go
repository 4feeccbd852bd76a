package rundir

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/freshq/freshq/shm"
)

// MaxSocketPath is the longest path a unix socket address holds (sun_path, less its NUL).
const MaxSocketPath = 107

// ErrInUse is returned when another supervisor holds a lock.
var ErrInUse = errors.New("in use by another freshq supervisor")

// Dir is systemd's RuntimeDirectory= when there is one, else /dev/shm/freshq-<uid>.
func Dir() string {
	if d := os.Getenv("RUNTIME_DIRECTORY"); d != "" {
		first, _, _ := strings.Cut(d, ":") // several RuntimeDirectory= entries are colon-separated
		return first
	}
	return filepath.Join("/dev/shm", "freshq-"+strconv.Itoa(os.Getuid()))
}

// EnsurePrivateDir creates dir mode 0700 if it is missing, and refuses one that is not a
// directory, is a symlink, belongs to another user or is open to group or others.
func EnsurePrivateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("runtime directory %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("runtime directory %s: %w", dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("runtime directory %s is not a directory", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("runtime directory %s belongs to uid %d, not to this user (%d)", dir, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return fmt.Errorf("runtime directory %s has mode %04o; it must be private (0700)", dir, st.Mode&0o777)
	}
	return nil
}

// PoolName names a data directory's segment, socket and worker configuration in the runtime
// directory: two pools of one user on two data directories do not meet there.
func PoolName(absDataDir string) string {
	h := fnv.New64a()
	h.Write([]byte(absDataDir))
	return fmt.Sprintf("freshq-%016x", h.Sum64())
}

// ResolvePaths makes dataDir absolute and puts a defaulted segment (segment "") in the
// runtime directory rt. It is deterministic, so a reload of the same file resolves to the same
// paths.
func ResolvePaths(dataDir, segment, rt string) (absDataDir, segmentPath string, err error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", "", fmt.Errorf("data_dir: %w", err)
	}
	if segment == "" {
		segment = filepath.Join(rt, PoolName(abs)+".seg")
	}
	return abs, segment, nil
}

// Lock is an exclusive flock on a file that holds its owner's pid.
type Lock struct {
	f    *os.File
	path string
}

// AcquireLock takes the flock on path (created if missing) without waiting. A file another
// supervisor holds yields an error wrapping ErrInUse that names its pid. The file is removed on
// release; a lock taken on a file that was removed and re-created meanwhile is dropped and
// taken again on the new one, so two supervisors never hold locks on two files of one name.
//
// The segment's lock sits next to the segment, which shm.path may put in a directory others
// can write (/dev/shm): a name planted there is refused, never followed or written. The open
// does not follow a symlink (O_NOFOLLOW), and what it opened must be a regular file of this
// user with one link (ownFile), so a planted link to one of our files is not truncated.
func AcquireLock(path string) (*Lock, error) {
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock %s is a symbolic link; refusing to follow it (remove it, or keep shm.path in a private directory)", path)
		}
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := ownFile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w (remove it, or keep shm.path in a private directory)", path, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				if pid := strings.TrimSpace(string(b[:n])); pid != "" {
					return nil, fmt.Errorf("%s is %w (pid %s)", path, ErrInUse, pid)
				}
				return nil, fmt.Errorf("%s is %w", path, ErrInUse)
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(path, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
			f.Close() // its holder removed it as we took it: lock the new file instead
			continue
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return &Lock{f: f, path: path}, nil
	}
	return nil, fmt.Errorf("lock %s: the file keeps changing under us", path)
}

// ownFile refuses an open lock file that is not a regular file of this user with one link.
func ownFile(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("is not a regular file")
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("belongs to uid %d, not to this user (%d)", st.Uid, os.Geteuid())
	case st.Nlink != 1:
		return fmt.Errorf("has %d links; a hard link may name another file", st.Nlink)
	}
	return nil
}

// Release removes the file, if it is still the one locked, and drops the lock, in that order:
// whoever opens the name next creates a new file.
func (l *Lock) Release() {
	var held, now unix.Stat_t
	if unix.Fstat(int(l.f.Fd()), &held) == nil && unix.Lstat(l.path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
		os.Remove(l.path)
	}
	l.f.Close()
}

// FileID is a file's identity: a segment is removed only if it is still the one we created.
type FileID struct{ dev, ino uint64 }

// StatID is the identity of the file at path.
func StatID(path string) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FileID{}, err
	}
	return FileID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// RemoveIfSame removes path only if it is still the file id names.
func RemoveIfSame(path string, id FileID) bool {
	now, err := StatID(path)
	if err != nil || now != id {
		return false
	}
	return os.Remove(path) == nil
}

// NoSpaceError is CheckSegmentSpace's refusal: the segment is Size bytes, more than the Free
// bytes free in Dir.
type NoSpaceError struct {
	Size, Free uint64
	Dir        string
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("the segment is %d bytes, more than the %d bytes free in %s", e.Size, e.Free, e.Dir)
}

// CheckSegmentSpace refuses (*NoSpaceError) a segment at path larger than the free space of the
// filesystem that will hold it: a tmpfs file is sparse, so creating it succeeds and the first
// touch of a page that does not fit kills a worker with SIGBUS.
func CheckSegmentSpace(path string, opts shm.Options) error {
	size, err := shm.SizeFor(opts)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("shm.path: %s: %w", dir, err)
	}
	if free := fs.Bavail * uint64(fs.Bsize); size > free {
		return &NoSpaceError{Size: size, Free: free, Dir: dir}
	}
	return nil
}

// AcquireLockWaiting is AcquireLock, waiting up to wait while another supervisor holds the
// lock: a supervisor that took over waits for the one it replaces to finish its stop.
func AcquireLockWaiting(path string, wait time.Duration) (*Lock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := AcquireLock(path)
		if err == nil || !errors.Is(err, ErrInUse) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
