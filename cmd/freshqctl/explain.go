package main

import (
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/wire"
)

// targetQuery parses the arguments of a command about one target, `URL [--device D]`, into
// the query that names it (?url=&device=).
func targetQuery(a *app, name string, args []string) (url.Values, error) {
	fs := a.newFlags(name)
	device := fs.String("device", "", "`device` (default desktop)")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return nil, err
	}
	q := url.Values{"url": {pos[0]}}
	if *device != "" {
		q.Set("device", *device)
	}
	return q, nil
}

func runExplain(a *app, args []string) error {
	q, err := targetQuery(a, "explain", args)
	if err != nil {
		return err
	}
	var ex wire.Explanation
	raw, err := a.getJSON("/v1/targets", q, &ex)
	if err != nil {
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	a.printExplanation(&ex)
	return nil
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (a *app) printExplanation(ex *wire.Explanation) {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, v...)) }
	row("target", "%s", ex.URL)
	row("device", "%s (source %s)", ex.Device, ex.Source)
	due := "due " + stamp(ex.DueAt)
	switch d := secs(ex.DueInSec).Round(time.Second); {
	case d < 0:
		due += ", overdue by " + clitext.Duration(-d)
	case d > 0:
		due += ", in " + clitext.Duration(d)
	default:
		due += ", now"
	}
	row("due", "%s", strings.TrimPrefix(due, "due "))
	cad := clitext.Duration(secs(ex.Cadence.Seconds).Round(time.Second)) + " from " + ex.Cadence.Origin
	if ex.Cadence.Route != "" {
		cad += " (route " + ex.Cadence.Route + ")"
	}
	if ex.DemandRung > 0 {
		cad += fmt.Sprintf(", demand rung %d", ex.DemandRung)
	}
	row("cadence", "%s", cad)
	row("lane", "%s, score %.3g", ex.Lane, ex.Score)
	if l := ex.Lease; l != nil {
		state := "held since " + a.ago(l.AcquiredAt)
		if l.Released {
			state = "released after its render"
		}
		row("lease", "%s, holder %d, expires %s", state, l.Holder, a.ago(l.ExpiresAt))
	} else {
		row("lease", "none")
	}
	if f := ex.Failures; f != nil {
		row("failures", "%d× %s, first %s, last %s", f.Count, f.Class, a.ago(f.FirstAt), a.ago(f.LastAt))
	} else {
		row("failures", "none")
	}
	if t := ex.Terminal; t != nil {
		row("terminal", "%s, rechecked %s", t.State, a.ago(t.RecheckAt))
	}
	if r := ex.LastRender; r != nil {
		row("last render", "status %d, %s in %s, %s", r.Status, sizeText(r.Bytes),
			clitext.Duration(time.Duration(r.DurationMs)*time.Millisecond), a.ago(r.At))
	} else {
		row("last render", "never")
	}
	if p := ex.Page; p != nil {
		serve := "servable"
		if !p.Servable {
			serve = "NOT servable (past cadence + swr)"
		}
		row("page", "age %s = %.2f× cadence, swr %s, %s", clitext.Duration(secs(p.AgeSec).Round(time.Second)),
			p.AgeOverCadence, clitext.Duration(secs(p.SWRSec).Round(time.Second)), serve)
	} else {
		row("page", "none stored")
	}
	if v := ex.Verdict; v != nil {
		line := v.Result
		if len(v.Reasons) > 0 {
			line += " (" + strings.Join(v.Reasons, ", ") + ")"
		}
		line += ", " + a.ago(time.UnixMilli(v.AtMs))
		if v.Agree != nil {
			line += fmt.Sprintf(", %d agreeing since %s", v.Agree.Count, a.ago(time.UnixMilli(v.Agree.FirstMs)))
		}
		if v.Marked {
			line += "; no good page stored (the next render is stored whatever its verdict)"
		}
		row("verdict", "%s", line)
	}
	tw.Flush()
}
