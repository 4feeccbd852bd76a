package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
)

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
