package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
)

// progressBar draws one line on a terminal, redrawn in place with a carriage return:
//
//	importing [##########..........]  52%  120000 items  8000/s  3 rejected
//
// With an unknown total (stdin) the bar is left out.
type progressBar struct {
	w     io.Writer
	label string
	total int64
	start time.Time
	last  time.Time
	width int // of the last line drawn, to blank it out
}

func newProgressBar(w io.Writer, label string, total int64) *progressBar {
	return &progressBar{w: w, label: label, total: total, start: time.Now()}
}

// line renders the bar for done bytes of total, items sent and rejected so far.
func (p *progressBar) line(done int64, items, rejected int, elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString(p.label)
	if p.total > 0 {
		frac := min(float64(done)/float64(p.total), 1)
		const cells = 20
		full := int(frac * cells)
		fmt.Fprintf(&b, " [%s%s] %3d%%", strings.Repeat("#", full), strings.Repeat(".", cells-full), int(frac*100))
	}
	fmt.Fprintf(&b, "  %d items", items)
	if s := elapsed.Seconds(); s > 0.05 {
		fmt.Fprintf(&b, "  %.0f/s", float64(items)/s)
	}
	if rejected > 0 {
		fmt.Fprintf(&b, "  %d rejected", rejected)
	}
	return clitext.Truncate(b.String(), 79)
}

func (p *progressBar) update(done int64, items, rejected int) {
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond && (p.total == 0 || done < p.total) {
		return
	}
	p.last = now
	p.draw(p.line(done, items, rejected, now.Sub(p.start)))
}

func (p *progressBar) draw(s string) {
	pad := ""
	if n := len([]rune(s)); n < p.width {
		pad = strings.Repeat(" ", p.width-n)
	}
	p.width = len([]rune(s))
	fmt.Fprintf(p.w, "\r%s%s", s, pad)
}

// done clears the bar: the summary follows on a clean line.
func (p *progressBar) done() {
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}
