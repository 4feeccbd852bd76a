package node

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// A render worker whose PATH has no nice program, with render.chrome.nice set, logs one warning
// with stable fields however many renderers it builds (a reload's too); render.chrome.nice 0
// asks for nothing, so nothing is missing; with nice in PATH there is nothing to say.
func TestNoNiceProgramWarnsOnce(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	if _, err := exec.LookPath("nice"); err == nil {
		warnNoNice(log, &sync.Once{}, 10)
		if buf.Len() != 0 {
			t.Fatalf("warned with nice in PATH: %s", buf.String())
		}
	}
	t.Setenv("PATH", t.TempDir()) // no nice in it
	var zero sync.Once
	warnNoNice(log, &zero, 0)
	if buf.Len() != 0 {
		t.Fatalf("render.chrome.nice 0 warned: %s", buf.String())
	}
	var once sync.Once
	warnNoNice(log, &once, 10)
	warnNoNice(log, &once, 10)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want one warning: %q", len(lines), buf.String())
	}
	var got struct {
		Level, Message, Error string
		Nice                  *int `json:"render_chrome_nice"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Level != "warn" || got.Nice == nil || *got.Nice != 10 || got.Error == "" ||
		got.Message != "chrome renderer: no nice program; the browsers run at the worker's priority" {
		t.Fatalf("warning %s", lines[0])
	}
}
