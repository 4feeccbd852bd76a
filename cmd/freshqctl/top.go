package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/cmd/freshqctl/top"
	"github.com/freshq/freshq/wire"
)

// scrapeMetrics reads and parses /metrics once.
func (a *app) scrapeMetrics() (*top.Scrape, error) {
	_, body, err := a.call(request{method: http.MethodGet, path: "/metrics", idempotent: true})
	if err != nil {
		return nil, err
	}
	samples, err := top.ParseMetrics(strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	return top.NewScrape(samples, a.now()), nil
}

// runTop is freshqctl top: a frame (package top) from /metrics and /v1/queue every interval.
func runTop(a *app, args []string) error {
	fs := a.newFlags("top")
	every := fs.Duration("interval", 2*time.Second, "refresh `interval`")
	once := fs.Bool("once", false, "print one frame and exit")
	clusterTable := fs.Bool("cluster", false, "add the farm's capacity: each node's figures, their sum and its projection")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *every < 100*time.Millisecond {
		return usagef("--interval must be at least 100ms")
	}
	live := !*once && a.ttyOut && !a.json
	var prev *top.Scrape
	for {
		cur, err := a.scrapeMetrics()
		switch {
		case errors.Is(err, errInterrupted):
			return nil
		case err != nil && prev == nil:
			return err
		case err != nil:
			if live {
				fmt.Fprint(a.stdout, "\x1b[H\x1b[2J")
			}
			fmt.Fprintf(a.stdout, "freshq top  %s: %s (retrying every %s)\n", a.server, oneLine(err.Error()), clitext.Duration(*every))
		default:
			f := top.MakeFrame(cur, prev)
			if q := a.readQueue(); q != nil {
				f.Capacity, f.Freshness = q.Capacity, q.Freshness
				f.Hosts, f.HostsHeld = top.HeldBack(q.Hosts)
				if q.Cluster != nil {
					f.Farm = q.Cluster.Farm
				}
				if *clusterTable {
					if q.Cluster == nil {
						f.NoCluster = true
					} else {
						f.FarmCapacity = q.Cluster.Capacity
					}
				}
			}
			prev = cur
			switch {
			case a.json:
				a.encodeJSON(f)
			case live:
				var b strings.Builder
				top.Print(&b, a.server, f, *every, true)
				fmt.Fprint(a.stdout, "\x1b[H\x1b[2J"+b.String())
			default:
				top.Print(a.stdout, a.server, f, *every, false)
			}
		}
		if *once {
			return nil
		}
		if !a.json && !live {
			fmt.Fprintln(a.stdout)
		}
		select {
		case <-a.ctx.Done():
			return nil
		case <-time.After(*every):
		}
	}
}

// readQueue reads /v1/queue, for its capacity and hosts sections, once (no retry: a Frame
// without them is still a Frame); nil when it cannot.
func (a *app) readQueue() *wire.QueueView {
	status, body, err := a.send(request{method: http.MethodGet, path: "/v1/queue"})
	if err != nil || status != http.StatusOK {
		return nil
	}
	var v wire.QueueView
	if err := json.Unmarshal(body, &v); err != nil {
		return nil
	}
	return &v
}
