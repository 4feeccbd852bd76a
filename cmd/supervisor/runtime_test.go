package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
)

func TestLockIsExclusiveAndNamesItsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "supervisor.lock")
	l, err := acquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquireLock(path)
	if !errors.Is(err, errInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want errInUse naming pid %d", err, os.Getpid())
	}
	l.release()
	l2, err := acquireLock(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.release()
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
		if l, err := acquireLock(path); err == nil {
			l.release()
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
	if err := ensurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("created %v %v, want mode 0700", st.Mode(), err)
	}
	os.Chmod(dir, 0o755)
	if err := ensurePrivateDir(dir); err == nil || !strings.Contains(err.Error(), "private") {
		t.Fatalf("a 0755 runtime directory: %v, want a refusal", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	if err := ensurePrivateDir(link); err == nil {
		t.Fatal("a symlink accepted as the runtime directory")
	}
	t.Setenv("RUNTIME_DIRECTORY", "/run/freshq:/run/other")
	if got := runtimeDir(); got != "/run/freshq" {
		t.Fatalf("runtimeDir under systemd: %s", got)
	}
}

// The socket and segment of the default runtime directory stay within a unix socket address.
func TestDefaultPathsFit(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "")
	c := config.Default()
	c.DataDir = "/var/lib/freshq/" + strings.Repeat("x", 200)
	if err := resolvePaths(c, runtimeDir()); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(runtimeDir(), poolName(c.DataDir)+".sock")
	if len(sock) > maxSocketPath || filepath.Dir(c.SHM.Path) != runtimeDir() {
		t.Fatalf("socket %s (%d bytes), segment %s", sock, len(sock), c.SHM.Path)
	}
}

func TestRemoveIfSameLeavesAReplacedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	os.WriteFile(path, []byte("mine"), 0o600)
	id, err := statID(path)
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
	if removeIfSame(path, id) {
		t.Fatal("removed a file that replaced ours")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// A segment larger than the free space of its filesystem is refused at start, naming the line
// of the key that sizes it.
func TestSegmentLargerThanFreeSpaceIsRefused(t *testing.T) {
	data := []byte("queue:\n  ready:\n    capacity: 16777216\n    key_capacity: 32768\n    sweep_cap: 16777216\n")
	c, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	c.SHM.Path = filepath.Join(t.TempDir(), "x.seg")
	opts := shm.Options{ReadyCapacity: c.Queue.Ready.Capacity, KeyCapacity: c.Queue.Ready.KeyCapacity, LeaseCapacity: c.Queue.MaxLeases, Workers: c.Workers}
	err = checkSegmentSpace(c, opts, data)
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "line 3: queue.ready.capacity") {
		t.Fatalf("got %v, want a refusal at line 3", err)
	}
	small := config.Default()
	small.SHM.Path = c.SHM.Path
	if err := checkSegmentSpace(small, shm.Options{Workers: 3}, nil); err != nil {
		t.Fatalf("the default segment: %v", err)
	}
}

// The start-up token check runs on every reload: a reload that drops the token while the
// listener reaches beyond loopback is refused, and the token in force stays.
func TestReloadDroppingTheTokenIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "freshq.yaml")
	t.Setenv("FRESHQ_TOKEN", "")
	write := func(s string) {
		if err := os.WriteFile(path, []byte("data_dir: "+dir+"\nlisten: 0.0.0.0:8420\n"+s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("token: s3cret\n")
	l := loader{path: path, rt: dir}
	cfg, _, err := l.load()
	if err != nil {
		t.Fatal(err)
	}
	seg, err := shm.Create(filepath.Join(dir, "seg"), shm.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	s := &supervisor{log: zerolog.Nop(), seg: seg, workerConfig: filepath.Join(dir, "workers.yaml")}
	s.cfg.Store(cfg)
	write("")
	s.reload(l.load)
	if s.cfg.Load().Token != "s3cret" {
		t.Fatal("a reload without a token was applied to a listener beyond loopback")
	}
	if _, err := os.Stat(s.workerConfig); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused file reached the workers' copy: %v", err)
	}
	if _, _, err := l.load(); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("load: %v, want the token named", err)
	}
	write("token: n3w\n")
	s.reload(l.load)
	if s.cfg.Load().Token != "n3w" {
		t.Fatal("a good reload was refused")
	}
}
