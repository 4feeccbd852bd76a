package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The store section: badger by default; postgres needs a DSN, from the file or FRESHQ_PG_DSN,
// which replaces the file's; a bad backend or shard count is named with its line.
func TestStoreBackend(t *testing.T) {
	t.Setenv(PostgresDSNEnv, "")
	c, err := Parse([]byte("workers: 2\n"))
	if err != nil || c.Store.Backend != StoreBackendBadger || c.Store.Postgres.Shards != PostgresShardsDefault {
		t.Fatalf("default store: %+v %v", c.Store, err)
	}
	_, err = Parse([]byte("store:\n  backend: mysql\n  postgres:\n    shards: 0\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: store.backend") {
		t.Fatalf("an unknown backend: %v", err)
	}
	_, err = Parse([]byte("store:\n  backend: postgres\n  postgres:\n    shards: 100000\n"))
	for _, want := range []string{"store.postgres.dsn", "line 4: store.postgres.shards"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("postgres without a DSN and with too many shards: %v, want %q", err, want)
		}
	}

	path := filepath.Join(t.TempDir(), "freshq.yaml")
	if err := os.WriteFile(path, []byte("store:\n  backend: postgres\n  postgres:\n    dsn: host=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(path)
	if err != nil || c.Store.Postgres.DSN != "host=file" {
		t.Fatalf("the file's DSN: %+v %v", c.Store.Postgres, err)
	}
	t.Setenv(PostgresDSNEnv, "host=env")
	c, err = Load(path)
	if err != nil || c.Store.Postgres.DSN != "host=env" {
		t.Fatalf("FRESHQ_PG_DSN replaces the file's DSN: %+v %v", c.Store.Postgres, err)
	}
	if _, err := Parse([]byte("store:\n  backend: postgres\n")); err != nil {
		t.Fatalf("postgres with the DSN in the environment: %v", err)
	}
}

// store.read_cache: the default when absent, a size as written, 0 kept (no cache), and a
// negative size refused with its line and column (by the size's own parser, as every size's).
func TestStoreReadCache(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want ByteSize
	}{
		{"store: {backend: badger}\n", ReadCacheDefault},
		{"store:\n  read_cache: 16MiB\n", 16 << 20},
		{"store:\n  read_cache: 0\n", 0},
	} {
		cfg, err := Parse([]byte(c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if cfg.Store.ReadCache != c.want {
			t.Errorf("%q: read_cache %d, want %d", c.yaml, cfg.Store.ReadCache, c.want)
		}
	}
	checkRefusals(t, []refusal{{"store:\n  read_cache: -1\n", `[2:15] invalid size "-1"`}})
}
