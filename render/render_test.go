package render

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
)

// testConfig is the renderers' options with the default configuration's values and the given
// renderer.
func testConfig(renderer string) Options {
	d := config.Default().Render
	return Options{Renderer: renderer, Concurrency: d.Concurrency, Timeout: d.Timeout.D(), Domains: d.Domains,
		UserAgent: d.UserAgent, UserAgents: d.UserAgents, MaxBody: int64(d.MaxBody), MaxRedirects: d.MaxRedirects}
}

func TestNewPicksTheRenderer(t *testing.T) {
	for name, want := range map[string]any{"": &HTTP{}, "http": &HTTP{}, "sim": &Sim{}, "exec": &Exec{}} {
		cfg := testConfig(name)
		cfg.ExecCommand = []string{"true"}
		r, err := New(cfg, WithStream(3))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if got, want := typeName(r), typeName(want); got != want {
			t.Errorf("%q: got %s, want %s", name, got, want)
		}
	}
	bad := map[string]func(*Options){
		"unknown renderer":   func(c *Options) { c.Renderer = "chrome" },
		"exec, no command":   func(c *Options) { c.Renderer, c.ExecCommand = "exec", nil },
		"exec, no program":   func(c *Options) { c.Renderer, c.ExecCommand = "exec", []string{"/nonexistent/freshq-browser"} },
		"zero timeout":       func(c *Options) { c.Timeout = 0 },
		"zero max_body":      func(c *Options) { c.MaxBody = 0 },
		"negative redirects": func(c *Options) { c.MaxRedirects = -1 },
		"sim rates over 1":   func(c *Options) { c.Renderer, c.Sim.GoneRate, c.Sim.NoindexRate = "sim", 0.6, 0.6 },
		"sim rate negative":  func(c *Options) { c.Renderer, c.Sim.TransientRate = "sim", -0.1 },
	}
	for name, mutate := range bad {
		cfg := testConfig("http")
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if s, err := NewSim(testConfig("sim"), 7); err != nil || s == nil {
		t.Fatal(err)
	}
	if r, _ := New(testConfig("sim"), WithStream(7)); r.(*Sim).drawKey != mustSim(t, testConfig("sim"), 7).drawKey {
		t.Error("WithStream did not reach the sim renderer")
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *HTTP:
		return "http"
	case *Sim:
		return "sim"
	case *Exec:
		return "exec"
	}
	return "?"
}

func TestReadLimited(t *testing.T) {
	page := bytes.Repeat([]byte("x"), 1000)
	for _, tc := range []struct {
		name        string
		r           io.Reader
		limit, hint int64
		wantLen     int
		wantErr     error
	}{
		{"under the limit", bytes.NewReader(page), 2000, 0, 1000, nil},
		{"exactly the limit", bytes.NewReader(page), 1000, 0, 1000, nil},
		{"exactly the limit, with the hint", bytes.NewReader(page), 1000, 1000, 1000, nil},
		{"one byte over", bytes.NewReader(page), 999, 0, 0, errTooLarge},
		{"one byte at a time", iotest.OneByteReader(bytes.NewReader(page)), 1000, 0, 1000, nil},
		{"a lying hint", bytes.NewReader(page), 5000, 10, 1000, nil},
		{"empty", bytes.NewReader(nil), 10, 0, 0, nil},
		{"a read error", iotest.TimeoutReader(bytes.NewReader(page)), 5000, 0, -1, iotest.ErrTimeout},
	} {
		got, err := readLimited(tc.r, tc.limit, tc.hint)
		if !errors.Is(err, tc.wantErr) || (tc.wantLen >= 0 && len(got) != tc.wantLen) {
			t.Errorf("%s: got %d bytes, %v; want %d, %v", tc.name, len(got), err, tc.wantLen, tc.wantErr)
		}
		if int64(cap(got)) > tc.limit+1 {
			t.Errorf("%s: buffer grew to %d bytes, past limit+1 = %d", tc.name, cap(got), tc.limit+1)
		}
	}
}

func TestKeepHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "text/html")
	h.Set("ETag", `"v1"`)
	h.Add("Cache-Control", "max-age=60")
	h.Add("Cache-Control", "public")
	h.Set("Set-Cookie", "session=secret")
	h.Set("Retry-After", "120")
	got := keepHeaders(h)
	want := map[string]string{"content-type": "text/html", "etag": `"v1"`, "cache-control": "max-age=60, public", "retry-after": "120"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if keepHeaders(http.Header{"X-Other": {"1"}}) != nil {
		t.Error("no kept header should give a nil map")
	}
}

func TestRecoveredTurnsAPanicIntoFailed(t *testing.T) {
	res := func() (res Result) {
		defer recovered(&res, time.Now())
		res.Stage = StageBody
		panic("tokenizer exploded")
	}()
	if res.Outcome != outcome.Failed || res.Stage != StageBody || !strings.Contains(res.Err, "tokenizer exploded") {
		t.Fatalf("got %+v", res)
	}
}

func TestCtxErrSaysWhy(t *testing.T) {
	ctx, cancel := withTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if got := ctxErr(ctx, time.Nanosecond, StageBody); !strings.Contains(got, "render.timeout") {
		t.Errorf("own deadline: %q", got)
	}
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel = withTimeout(parent, time.Hour)
	defer cancel()
	cancelParent()
	if got := ctxErr(ctx, time.Hour, StageDial); !strings.Contains(got, "canceled") || !strings.Contains(got, "dial") {
		t.Errorf("caller cancelled: %q", got)
	}
	parent, cancelParent = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelParent()
	ctx, cancel = withTimeout(parent, time.Hour)
	defer cancel()
	<-ctx.Done()
	if got := ctxErr(ctx, time.Hour, StageHeaders); !strings.Contains(got, "caller's deadline") {
		t.Errorf("caller's deadline: %q", got)
	}
}
