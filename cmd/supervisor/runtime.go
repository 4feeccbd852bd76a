package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
)

// One pool per data directory and per segment: the supervisor holds an exclusive flock on a lock
// file in data_dir and on one next to the segment for its whole life, so a second supervisor on
// either refuses to start (naming the holder's pid) before it touches anything. The segment and
// worker 0's socket live in a private runtime directory (mode 0700, owned by this user, created
// before anything listens), so no other user can squat their names or connect to the socket.

// maxSocketPath is the longest path a unix socket address holds (sun_path, less its NUL).
const maxSocketPath = 107

// errInUse is returned when another supervisor holds a lock.
var errInUse = errors.New("in use by another freshq supervisor")

// runtimeDir is systemd's RuntimeDirectory= when there is one, else /dev/shm/freshq-<uid>.
func runtimeDir() string {
	if d := os.Getenv("RUNTIME_DIRECTORY"); d != "" {
		first, _, _ := strings.Cut(d, ":") // several RuntimeDirectory= entries are colon-separated
		return first
	}
	return filepath.Join("/dev/shm", "freshq-"+strconv.Itoa(os.Getuid()))
}

// ensurePrivateDir creates dir mode 0700 if it is missing, and refuses one that is not a
// directory, is a symlink, belongs to another user or is open to group or others.
func ensurePrivateDir(dir string) error {
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

// poolName names a data directory's segment, socket and worker configuration in the runtime
// directory: two pools of one user on two data directories do not meet there.
func poolName(absDataDir string) string {
	h := fnv.New64a()
	h.Write([]byte(absDataDir))
	return fmt.Sprintf("freshq-%016x", h.Sum64())
}

// resolvePaths makes data_dir absolute and puts a defaulted segment in the runtime directory.
// It is deterministic, so a reload of the same file resolves to the same paths.
func resolvePaths(c *config.Config, rt string) error {
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	c.DataDir = abs
	if c.SHM.Path == "" {
		c.SHM.Path = filepath.Join(rt, poolName(abs)+".seg")
	}
	return nil
}

// lock is an exclusive flock on a file that holds its owner's pid.
type lock struct {
	f    *os.File
	path string
}

// acquireLock takes the flock on path (created if missing) without waiting. A file another
// supervisor holds yields an error wrapping errInUse that names its pid. The file is removed on
// release; a lock taken on a file that was removed and re-created meanwhile is dropped and
// taken again on the new one, so two supervisors never hold locks on two files of one name.
//
// The segment's lock sits next to the segment, which shm.path may put in a directory others
// can write (/dev/shm): a name planted there is refused, never followed or written. The open
// does not follow a symlink (O_NOFOLLOW), and what it opened must be a regular file of this
// user with one link (ownFile), so a planted link to one of our files is not truncated.
func acquireLock(path string) (*lock, error) {
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
					return nil, fmt.Errorf("%s is %w (pid %s)", path, errInUse, pid)
				}
				return nil, fmt.Errorf("%s is %w", path, errInUse)
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
		return &lock{f: f, path: path}, nil
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

// release removes the file, if it is still the one locked, and drops the lock, in that order:
// whoever opens the name next creates a new file.
func (l *lock) release() {
	var held, now unix.Stat_t
	if unix.Fstat(int(l.f.Fd()), &held) == nil && unix.Lstat(l.path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
		os.Remove(l.path)
	}
	l.f.Close()
}

// fileID is a file's identity: a segment is removed only if it is still the one we created.
type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// removeIfSame removes path only if it is still the file id names.
func removeIfSame(path string, id fileID) bool {
	now, err := statID(path)
	if err != nil || now != id {
		return false
	}
	return os.Remove(path) == nil
}

// checkSegmentSpace refuses a segment larger than the free space of the filesystem that will
// hold it: a tmpfs file is sparse, so creating it succeeds and the first touch of a page that
// does not fit kills a worker with SIGBUS. data is the configuration file, for the line.
func checkSegmentSpace(c *config.Config, opts shm.Options, data []byte) error {
	size, err := shm.SizeFor(opts)
	if err != nil {
		return err
	}
	dir := filepath.Dir(c.SHM.Path)
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("shm.path: %s: %w", dir, err)
	}
	if free := fs.Bavail * uint64(fs.Bsize); size > free {
		return &config.FieldError{Path: "queue.ready.capacity", Line: config.LineOf(data, "queue.ready.capacity"),
			Msg: fmt.Sprintf("the segment it sizes (with queue.ready.key_capacity, queue.max_leases and workers) is %d bytes, more than the %d bytes free in %s", size, free, dir)}
	}
	return nil
}
