package sim

import (
	"bytes"
	"fmt"
	"math"
)

// HostsSection renders the politeness scenario's section of the report: every host's lateness
// without and with the big host, the big host's share of the due rows and its renders in
// flight, and whether the scenario's promises hold.
func (r *Report) HostsSection() string {
	b := r.BigHost
	if b == nil {
		return ""
	}
	var out bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }
	big := b.Big()
	window := r.Options.Window.Hours()
	w("## Politeness: one host with most of the due rows\n\n")
	w("The politeness scenario: one host, `%s`, holds %.0f %% of the due rows and `render.hosts.overrides` limits it to **%d** renders in flight; every other host must be rendered as late as in the same run without it (within %.0f %%), and `%s` must never have more than %d renders in flight. ",
		b.Host, 100*b.DueShare, b.Limit, 100*Tolerance, b.Host, b.Limit)
	w("`sim/simreport` runs it unless `-bighost ''` (flags `-bighost %s -bighost-share %g -bighost-limit %d -bighost-policy %s -bighost-capacity %g`); `go test ./sim -run TestBigHostScenario` checks the same promises on a small corpus. ",
		b.Host, b.DueShare, b.Limit, b.Scenario.Name, b.Scenario.Capacity)
	w("It runs `%s` at %s of the corpus's demand twice, on the corpus above (%s), then with %s pages of `%s` added (%s pages, all overdue at the start: a host with a backlog), sized from the due rows the first run measured so that they are at least %.0f %% of them (the big host makes the others later, and so raises their due rows: a run that falls short is sized again from what it measured; this one is the %s run with it). ",
		b.Scenario.Name, pct(b.Scenario.Capacity), plural(len(b.Without.Hosts), "host"), thousands(b.Keys), b.Host,
		r.Corpus.Mix.Classes[bulkClass(r.Corpus.Mix)].Name, 100*b.DueShare, ordinal(b.Sizings))
	w("A render takes %.1f s on average, so %d renders in flight are at most %s renders an hour: the second run's farm is the first's (%s renders/h) plus that many, %d render slots in all as the sweep is told them (`render.concurrency` %d on one render worker). The other hosts are so offered at least their slots of the first run; what the scenario tests is whether they get them — whether the big host's rows, ranked first by their lateness, fill the ready set or hold up the claim path — and whether the limit holds. Lateness is age at render ÷ TTL over the window, per host.\n\n",
		meanLatencyMs(r.Corpus.Mix)/1000, b.Limit, thousands(int(math.Round(b.AddedPerHour))), thousands(int(math.Round(b.Without.CapacityPerHour))),
		b.Slots, b.Slots)
	w("| host | pages | renders without | mean | p95 | renders with | mean | p95 | mean, change | most in flight |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, h := range b.With.Hosts {
		if h.Name == b.Host {
			continue
		}
		wo := hostNamed(b.Without, h.Name)
		change := "—"
		if wo.Ratios > 0 && h.Ratios > 0 {
			change = fmt.Sprintf("%+.1f %%", 100*(h.Mean/wo.Mean-1))
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", h.Name, thousands(h.Pages),
			thousands(wo.Renders), ratio(wo.Mean, wo.Ratios), ratio(wo.P95, wo.Ratios),
			thousands(h.Renders), ratio(h.Mean, h.Ratios), ratio(h.P95, h.Ratios), change, h.MaxInFlight)
	}
	w("| **%s** | %s | — | — | — | %s | %s | %s | — | **%d** (limit %d) |\n\n", b.Host, thousands(big.Pages),
		thousands(big.Renders), ratio(big.Mean, big.Ratios), ratio(big.P95, big.Ratios), big.MaxInFlight, b.Limit)
	rate := float64(big.Renders) / window
	w("- `%s` held **%.1f %%** of the due rows (mean of the hourly samples in the window) and rendered %s pages an hour: **%.0f %%** of the %s an hour its %d slots could render with no wait between renders (the farm's addition for it).",
		b.Host, 100*big.DueShare, thousands(int(math.Round(rate))), 100*rate/b.AddedPerHour, thousands(int(math.Round(b.AddedPerHour))), b.Limit)
	if rate < b.AddedPerHour/2 {
		w(" It is held far below its limit, not at it: a take refused for the host consumes the ready entry it took (claim.Claimer), so the host's entries in a set are spent by the claims that meet them while its slots are busy, and its rows then wait for the next sweep or an index scan while the other hosts take the slots it leaves.")
	}
	w("\n")
	wr, ww := 0, 0
	for _, h := range b.Without.Hosts {
		wr += h.Renders
		ww += hostNamed(b.With, h.Name).Renders
	}
	w("- The other hosts had %s renders in the window without `%s` and %s with it.\n", thousands(wr), b.Host, thousands(ww))
	w("- Over the run with `%s`, %s ready entries and index rows were refused for their host (`freshq_render_refused_total{cause=\"host\"}`), and %s claims found the index's due rows queued behind leased ones (their slots stay idle, as a render worker's do until its next claim); %s and %s without it.\n",
		b.Host, thousands(int(b.With.HostRefused)), thousands(b.With.Queued), thousands(int(b.Without.HostRefused)), thousands(b.Without.Queued))
	if sf := b.SameFarm; sf != nil {
		wm, sm, n := 0.0, 0.0, 0
		for _, h := range b.Without.Hosts {
			if o := hostNamed(sf, h.Name); h.Ratios > 0 && o.Ratios > 0 {
				wm, sm, n = wm+h.Mean, sm+o.Mean, n+1
			}
		}
		sb := hostNamed(sf, b.Host)
		if n > 0 {
			baseSlots := b.Without.CapacityPerHour * meanLatencyMs(r.Corpus.Mix) / 3_600_000
			full := baseSlots * float64(r.Corpus.Mix.Keys) / float64(r.Corpus.Len())
			w("- On the first run's farm, without the slots added for `%s` (%s renders/h): it rendered %s pages an hour, %.0f %% of the farm, at most %d in flight, and the other hosts' mean lateness was %.2f× against %.2f× without it (%+.1f %%, averaged over the hosts). Those renders are the farm's to give: a host within its limit takes its slots. %d slots are %.0f %% of this farm's %.1f renders in flight on average, and would be %.1f %% of the %.0f of a farm for the mix's full %s keys. Shown for scale, not judged.\n",
				b.Host, thousands(int(math.Round(sf.CapacityPerHour))), thousands(int(math.Round(float64(sb.Renders)/window))),
				100*float64(sb.Renders)/window/sf.CapacityPerHour, sb.MaxInFlight, sm/float64(n), wm/float64(n), 100*(sm/wm-1),
				b.Limit, 100*float64(b.Limit)/baseSlots, baseSlots, 100*float64(b.Limit)/full, full, thousands(r.Corpus.Mix.Keys))
		}
	}
	if v := b.Violations(); len(v) == 0 {
		w("- **The promises hold**: `%s` never had more than %d renders in flight, and every other host's mean lateness is within %.0f %% of its figure without it.\n\n",
			b.Host, b.Limit, 100*Tolerance)
	} else {
		w("- **The promises do not hold**:\n")
		for _, s := range v {
			w("  - %s\n", s)
		}
		w("\n")
	}
	return out.String()
}

// plural is "1 host", "6 hosts".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return thousands(n) + " " + what + "s"
}

// ordinal is "first", "second", "third", else "n-th".
func ordinal(n int) string {
	if n >= 1 && n <= 3 {
		return []string{"first", "second", "third"}[n-1]
	}
	return fmt.Sprintf("%d-th", n)
}
