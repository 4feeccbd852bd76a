package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/freshq/freshq/shm"
)

func TestLockIsExclusiveAndNamesItsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "supervisor.lock")
	l, err := AcquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(path)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrInUse naming pid %d", err, os.Getpid())
	}
	l.Release()
	l2, err := AcquireLock(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}

// A lock file may sit in a directory others can write (shm.path in /dev/shm, say): a name
// planted there before the supervisor starts — a symlink to a file of ours, a hard link to one,
// something not a regular file, or a file of another user — is refused, never followed,
// truncated or written.
func TestLockRefusesAPlantedFile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	plant := map[string]func(path string) error{
		"symlink":   func(path string) error { return os.Symlink(victim, path) },
		"hard link": func(path string) error { return os.Link(victim, path) },
		"directory": func(path string) error { return os.Mkdir(path, 0o700) },
		"dangling symlink": func(path string) error {
			return os.Symlink(filepath.Join(dir, "created-through-the-link"), path)
		},
	}
	if os.Geteuid() == 0 { // only root can make a file another user owns
		plant["another user's file"] = func(path string) error {
			if err := os.WriteFile(path, nil, 0o666); err != nil {
				return err
			}
			return os.Chown(path, 65534, 65534)
		}
	}
	for name, mk := range plant {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".lock")
		if err := mk(path); err != nil {
			t.Fatal(err)
		}
		if l, err := AcquireLock(path); err == nil {
			l.Release()
			t.Errorf("a planted %s was taken as the lock", name)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v does not name the file", name, err)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Fatalf("the file a planted link pointed at was changed: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "created-through-the-link")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created through a dangling symlink: %v", err)
	}
}

func TestRuntimeDirMustBePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt")
	if err := EnsurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("created %v %v, want mode 0700", st.Mode(), err)
	}
	os.Chmod(dir, 0o755)
	if err := EnsurePrivateDir(dir); err == nil || !strings.Contains(err.Error(), "private") {
		t.Fatalf("a 0755 runtime directory: %v, want a refusal", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	if err := EnsurePrivateDir(link); err == nil {
		t.Fatal("a symlink accepted as the runtime directory")
	}
	t.Setenv("RUNTIME_DIRECTORY", "/run/freshq:/run/other")
	if got := Dir(); got != "/run/freshq" {
		t.Fatalf("Dir under systemd: %s", got)
	}
}

// The socket and segment of the default runtime directory stay within a unix socket address.
func TestDefaultPathsFit(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "")
	dataDir, seg, err := ResolvePaths("/var/lib/freshq/"+strings.Repeat("x", 200), "", Dir())
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(Dir(), PoolName(dataDir)+".sock")
	if len(sock) > MaxSocketPath || filepath.Dir(seg) != Dir() {
		t.Fatalf("socket %s (%d bytes), segment %s", sock, len(sock), seg)
	}
}

func TestRemoveIfSameLeavesAReplacedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	os.WriteFile(path, []byte("mine"), 0o600)
	id, err := StatID(path)
	if err != nil {
		t.Fatal(err)
	}
	// Another process renames its file over ours, as shm.Create does; ours stays alive (the
	// supervisor keeps it mapped), so its inode cannot be reused meanwhile.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.WriteFile(path+".new", []byte("theirs"), 0o600)
	os.Rename(path+".new", path)
	if RemoveIfSame(path, id) {
		t.Fatal("removed a file that replaced ours")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// A segment larger than the free space of its filesystem is refused before it is created.
func TestSegmentLargerThanFreeSpaceIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.seg")
	err := CheckSegmentSpace(path, shm.Options{ReadyCapacity: 16777216, KeyCapacity: 32768, LeaseCapacity: 4096, Workers: 4})
	var ns *NoSpaceError
	if !errors.As(err, &ns) || ns.Size <= ns.Free || ns.Dir != filepath.Dir(path) {
		t.Fatalf("got %v, want a NoSpaceError for %s", err, filepath.Dir(path))
	}
	if err := CheckSegmentSpace(path, shm.Options{Workers: 3}); err != nil {
		t.Fatalf("the default segment: %v", err)
	}
}
