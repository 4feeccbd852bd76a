package admin

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/wire"
)

// fixture is an admin surface under cfg, its worker 0 on socket ("": none there), the pool's
// stop a flag the test sets.
type fixture struct {
	*Server
	stopping atomic.Bool
}

func newFixture(t *testing.T, cfg *config.Config, socket string) *fixture {
	t.Helper()
	if socket == "" {
		socket = filepath.Join(t.TempDir(), "w0.sock")
	}
	c, err := console.New(console.Options{Token: func() string { return cfg.Token }})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.Server, err = New(Options{
		Settings: func() Settings { return settingsOf(cfg) },
		Socket:   socket,
		Status:   func(context.Context) (wire.Status, error) { return wire.Status{}, errors.New("no worker 0") },
		Stopping: f.stopping.Load,
		Console:  c,
		Series:   func(w http.ResponseWriter, _ *http.Request) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// settingsOf is cfg's admin settings, as the supervisor narrows them.
func settingsOf(c *config.Config) Settings {
	h := c.HTTP
	return Settings{Listen: c.Listen, Token: c.Token, Hosts: h.Hosts, MaxConns: h.MaxConns, MaxUnauthenticated: h.MaxUnauthenticated,
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(), ReadTimeout: h.ReadTimeout.D(), WriteTimeout: h.WriteTimeout.D(),
		IdleTimeout: h.IdleTimeout.D(), BulkTimeout: h.BulkTimeout.D(), PageMaxWait: c.Page.MaxWait.D()}
}
