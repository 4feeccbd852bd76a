package main

import (
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/cmd/freshqctl/top"
	"github.com/freshq/freshq/wire"
)

func runQueue(a *app, args []string) error {
	fs := a.newFlags("queue")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	var q wire.QueueView
	raw, err := a.getJSON("/v1/queue", nil, &q)
	if err != nil {
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	a.printQueue(&q)
	return nil
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }

func pct(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", float64(part)*100/float64(whole))
}

func (a *app) printQueue(q *wire.QueueView) {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, v...)) }

	f := q.Floor
	if f.Ms > 0 {
		row("FLOOR", "%s (%s)", stamp(msTime(f.Ms)), a.ago(msTime(f.Ms)))
	} else {
		row("FLOOR", "none yet")
	}
	if f.PinnedKeyHash != 0 {
		since := ""
		if f.PinnedSinceMs > 0 {
			since = " for " + clitext.Duration(a.now().Sub(msTime(f.PinnedSinceMs)).Round(time.Second))
		}
		row("", "pinned%s by key hash %016x", since, f.PinnedKeyHash)
	} else {
		row("", "not pinned")
	}
	var notes []string
	if f.NextDueMs > 0 {
		notes = append(notes, "next due "+a.ago(msTime(f.NextDueMs)))
	}
	if f.AdvancedAtMs > 0 {
		notes = append(notes, "advanced "+a.ago(msTime(f.AdvancedAtMs)))
	}
	if len(notes) > 0 {
		row("", "%s", joinComma(notes))
	}

	r := q.Ready
	if !r.Enabled {
		row("READY SET", "disabled (claims come from the index)")
	} else {
		pub := ""
		if r.PublishedAtMs > 0 {
			pub = ", published " + a.ago(msTime(r.PublishedAtMs))
		}
		row("READY SET", "generation %d: %d entries, %d taken (%s)%s", r.Generation, r.Count, r.Taken, pct(r.Taken, r.Count), pub)
	}
	row("", "last sweep %.1f ms over %d rows; %d capped; %d long keys dropped", r.SweepMs, r.SweepRows, r.Capped, r.DroppedKeys)
	below := fmt.Sprint(q.BelowFloor)
	if q.BelowFloor > 0 {
		below += "  (anything but 0 is a bug)"
	}
	row("BELOW FLOOR", "%s", below)
	tw.Flush()

	fmt.Fprintln(a.stdout)
	fmt.Fprintf(a.stdout, "%-12s %12s\n", "LANE", "BACKLOG")
	total := uint64(0)
	for _, l := range clitext.Lanes(q.Backlog) {
		fmt.Fprintf(a.stdout, "%-12s %12d\n", l, q.Backlog[l])
		total += q.Backlog[l]
	}
	fmt.Fprintf(a.stdout, "%-12s %12d\n", "total", total)

	fmt.Fprintln(a.stdout)
	tw = tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	grants := q.Claims["ready"] + q.Claims["index"]
	row = func(k, format string, v ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, v...)) }
	row("GRANTS", "ready %d (%s), index %d (%s)", q.Claims["ready"], pct(q.Claims["ready"], grants), q.Claims["index"], pct(q.Claims["index"], grants))
	for _, src := range sortedKeys(q.Claims) {
		if src != "ready" && src != "index" {
			row("", "%s %d", src, q.Claims[src])
		}
	}
	ls := q.Leases
	row("LEASES", "%d live, %d in release grace, capacity %d", ls.Live, ls.Graces, ls.Capacity)
	row("", "refused: %d held, %d full, %d contended; %d graces evicted", ls.RefusedHeld, ls.RefusedFull, ls.RefusedContended, ls.GracesEvicted)
	row("HOSTS", "%d in the host table, %d evicted from it", q.HostsTracked, q.HostEvictions)
	tw.Flush()
	var held []wire.QueueHost
	for i := range q.Hosts {
		if q.Hosts[i].HeldBack() {
			held = append(held, q.Hosts[i])
		}
	}
	for _, l := range top.HostLines(held, len(held), a.now()) {
		fmt.Fprintln(a.stdout, l)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}
