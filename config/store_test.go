package config

import "testing"

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
