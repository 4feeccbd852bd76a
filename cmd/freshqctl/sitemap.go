package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/wire"
)

// sitemapFinished reports whether a run's status is final.
func sitemapFinished(r *wire.SitemapRun) bool {
	switch strings.ToLower(r.Status) {
	case "running", "queued", "pending", "":
		return false
	}
	return true
}

// sitemapCounts is "3 files, 1200 urls: 1100 added, 90 updated, 10 filtered, 0 failed".
func sitemapCounts(r *wire.SitemapRun) string {
	return fmt.Sprintf("%s, %s: %d added, %d updated, %d filtered, %d failed", plural(r.Files, "file"), plural(r.URLs, "url"),
		r.Added.Count, r.Updated.Count, r.Filtered.Count, r.Failed.Count)
}

func parseSitemapRun(raw []byte) (wire.SitemapRun, error) {
	var r wire.SitemapRun
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("the answer is not a sitemap run: %v", err)
	}
	return r, nil
}

func runSitemap(a *app, args []string) error {
	fs := a.newFlags("sitemap")
	runID := fs.String("run", "", "follow an existing run `ID` instead of starting one")
	device := fs.String("device", "", "`device` of the targets (default desktop)")
	detach := fs.Bool("detach", false, "start the run, print its id and return")
	poll := fs.Duration("poll", 500*time.Millisecond, "how often to ask for progress")
	maxArgs := 1
	pos, err := a.parse(fs, args, 0, maxArgs)
	if err != nil {
		return err
	}
	if (*runID == "") == (len(pos) == 0) {
		return usagef("give a sitemap URL (or FILE, or - for stdin), or --run ID")
	}
	if *poll <= 0 {
		return usagef("--poll must be positive")
	}
	id := *runID
	if id == "" {
		req := request{method: http.MethodPost, path: "/v1/sitemaps"}
		src := pos[0]
		if u, err := url.Parse(src); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			req.body, _ = json.Marshal(map[string]string{"url": src, "device": *device})
			req.contentType = "application/json"
		} else {
			var body []byte
			if src == "-" {
				body, err = io.ReadAll(a.stdin)
			} else {
				body, err = os.ReadFile(src)
			}
			if err != nil {
				return err
			}
			req.body, req.contentType = body, "application/xml"
			if bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
				req.contentType = "application/gzip"
			}
			if *device != "" {
				req.query = url.Values{"device": {*device}}
			}
		}
		_, raw, err := a.call(req)
		if err != nil {
			if errors.Is(err, errNotAvailable) {
				return fmt.Errorf("sitemap ingestion is not available on %s: %w", a.server, err)
			}
			return err
		}
		run, err := parseSitemapRun(raw)
		if err != nil {
			return fmt.Errorf("POST /v1/sitemaps: %v", err)
		}
		if run.ID == "" {
			return errors.New("POST /v1/sitemaps: the answer has no run id")
		}
		id = run.ID
		if *detach {
			if a.json {
				a.printJSON(raw)
			} else {
				fmt.Fprintf(a.stdout, "sitemap run %s started (%s); follow it with: freshqctl sitemap --run %s\n", id, run.Status, id)
			}
			return nil
		}
	}
	return a.followSitemap(id, *poll)
}

// followSitemap polls a run until it finishes, with a live line on a terminal.
func (a *app) followSitemap(id string, poll time.Duration) error {
	path := "/v1/sitemaps/" + url.PathEscape(id)
	start := a.now()
	live := a.tty && !a.json
	width := 0
	clear := func() {
		if width > 0 {
			fmt.Fprintf(a.stderr, "\r%s\r", strings.Repeat(" ", width))
			width = 0
		}
	}
	for {
		raw, err := a.getJSON(path, nil, nil)
		if err != nil {
			clear()
			if errors.Is(err, errInterrupted) {
				return fmt.Errorf("stopped following sitemap run %s; it goes on (freshqctl sitemap --run %s)", id, id)
			}
			if errors.Is(err, errNotAvailable) {
				return fmt.Errorf("sitemap ingestion is not available on %s: %w", a.server, err)
			}
			return err
		}
		run, err := parseSitemapRun(raw)
		if err != nil {
			clear()
			return fmt.Errorf("GET %s: %v", path, err)
		}
		if sitemapFinished(&run) {
			clear()
			return a.sitemapDone(id, &run, raw, a.now().Sub(start))
		}
		if live {
			line := clitext.Truncate(fmt.Sprintf("sitemap run %s: %s  %s  %s", id, run.Status, sitemapCounts(&run),
				clitext.Duration(a.now().Sub(start).Round(time.Second))), 79)
			pad := ""
			if n := len([]rune(line)); n < width {
				pad = strings.Repeat(" ", width-n)
			}
			width = len([]rune(line))
			fmt.Fprintf(a.stderr, "\r%s%s", line, pad)
		}
		select {
		case <-a.ctx.Done():
			clear()
			return fmt.Errorf("stopped following sitemap run %s; it goes on (freshqctl sitemap --run %s)", id, id)
		case <-time.After(poll):
		}
	}
}

func (a *app) sitemapDone(id string, run *wire.SitemapRun, raw []byte, took time.Duration) error {
	failed := strings.ToLower(run.Status) != "done"
	if a.json {
		a.printJSON(raw)
	} else {
		fmt.Fprintf(a.stdout, "sitemap run %s %s in %s\n  %s\n", id, run.Status, clitext.Duration(took.Round(time.Second)), sitemapCounts(run))
		sample := func(what string, list []string) {
			if len(list) == 0 {
				return
			}
			fmt.Fprintf(a.stdout, "  %s, e.g.:\n", what)
			for i, s := range list {
				if i == 5 {
					break
				}
				fmt.Fprintf(a.stdout, "    %s\n", clitext.Truncate(s, 74))
			}
		}
		var fails []string
		for _, f := range run.Failed.Sample {
			fails = append(fails, f.URL+": "+f.Reason)
		}
		sample("failed", fails)
		sample("filtered (outside render.domains)", run.Filtered.Sample)
	}
	if failed {
		msg := fmt.Sprintf("sitemap run %s %s", id, run.Status)
		if run.Error != "" {
			msg += ": " + run.Error
		}
		return errors.New(msg)
	}
	return nil
}
