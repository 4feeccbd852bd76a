package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/wire"
)

// intervalJSON is an interval as the API takes it: a number of seconds or a duration string.
func intervalJSON(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// postTargets sends one NDJSON body to POST /v1/targets. A 400 that carries per-item errors
// (nothing accepted) is an answer, not an error.
func (a *app) postTargets(body []byte) (wire.TargetsResponse, []byte, error) {
	req := request{method: http.MethodPost, path: "/v1/targets", body: body, contentType: "application/x-ndjson", idempotent: true}
	var resp wire.TargetsResponse
	status, raw, err := a.send(req)
	if err != nil {
		return resp, nil, err
	}
	if status == http.StatusOK || status == http.StatusBadRequest {
		if json.Unmarshal(raw, &resp) == nil && (status == http.StatusOK || len(resp.Errors) > 0) {
			return resp, raw, nil
		}
	}
	if status/100 == 2 {
		return resp, raw, fmt.Errorf("POST /v1/targets: the answer is not the expected JSON")
	}
	return resp, raw, a.statusError(req, status, raw)
}

func itemErrorText(e wire.ItemError) string {
	if e.Field != "" {
		return e.Field + ": " + e.Error
	}
	return e.Error
}

func runAdd(a *app, args []string) error {
	fs := a.newFlags("add")
	device := fs.String("device", "", "`device`: desktop, mobile or a key of render.user_agents (default desktop)")
	interval := fs.String("interval", "", "cadence like 6h, 7d, 90m or seconds (default: keep, or the route's)")
	source := fs.String("source", "", "sitemap, discovered or api (default api)")
	due := fs.String("due", "", "next render `time`, RFC 3339 (default: keep, or now)")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	item := wire.TargetItem{URL: pos[0], Device: *device, Source: *source, Due: *due, Interval: intervalJSON(*interval)}
	line, _ := json.Marshal(item)
	resp, raw, err := a.postTargets(append(line, '\n'))
	if err != nil {
		return err
	}
	if a.json {
		a.printJSON(raw)
		if resp.Rejected > 0 {
			return errSilent
		}
		return nil
	}
	if resp.Rejected > 0 || resp.Accepted != 1 {
		if len(resp.Errors) > 0 {
			return errors.New(itemErrorText(resp.Errors[0]))
		}
		return fmt.Errorf("the server accepted %d and rejected %d items", resp.Accepted, resp.Rejected)
	}
	d := *device
	if d == "" {
		d = "desktop"
	}
	fmt.Fprintf(a.stdout, "accepted %s (%s)\n", pos[0], d)
	return nil
}

// importItem is one target read from a file, with where it was.
type importItem struct {
	loc  int // line number, or item number in a JSON array
	item wire.TargetItem
	err  error // the item could not be read; it is rejected without being sent
}

// itemReader reads targets from JSON or CSV. JSON (NDJSON, a JSON array, or any
// whitespace-separated objects however they are laid out) is read with the decoder of POST
// /v1/targets, so an import refuses locally exactly the items, and stops at exactly the
// breaks, that the server would; it only adds where each one is in the file.
type itemReader struct {
	format string // ndjson | csv
	locTag string // "line" or "item" (in a JSON array)

	src   *bufio.Reader // JSON from its first value on; nil: no value at all
	base  int64         // bytes before src's first value
	lines *lineCounter  // beneath src

	lineNo  int // CSV
	csv     *csv.Reader
	columns []string // CSV column names, by position
}

var csvColumns = []string{"url", "device", "interval", "source", "due"}

func newItemReader(r io.Reader, format string) (*itemReader, error) {
	ir := &itemReader{format: format, locTag: "line"}
	switch format {
	case "ndjson":
		ir.lines = &lineCounter{r: r}
		br := bufio.NewReaderSize(ir.lines, 64<<10)
		for {
			b, err := br.ReadByte()
			if err == io.EOF {
				return ir, nil
			}
			if err != nil {
				return nil, err
			}
			if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
				br.UnreadByte()
				ir.src, ir.base = br, ir.lines.n-int64(br.Buffered())
				if b == '[' {
					ir.locTag = "item"
				}
				return ir, nil
			}
		}
	case "csv":
		ir.csv = csv.NewReader(r)
		ir.csv.FieldsPerRecord = -1
		ir.csv.TrimLeadingSpace = true
		ir.csv.LazyQuotes = true
		ir.csv.Comment = '#'
		ir.csv.ReuseRecord = true
		ir.columns = csvColumns[:4]
		return ir, nil
	}
	return nil, usagef("--format must be ndjson or csv, not %q", format)
}

// each calls fn with every item in order. An error of fn is returned as it is; any other error
// means the file could not be read past the items fn saw.
func (ir *itemReader) each(fn func(importItem) error) error {
	if ir.csv != nil {
		for {
			it, err := ir.nextCSV()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	if ir.src == nil {
		return nil
	}
	err := wire.DecodeTargetItemsAt(ir.src, func(i int, off int64, item *wire.TargetItem, err error) error {
		it := importItem{loc: ir.where(i, off), err: err}
		if item != nil {
			it.item = *item
		}
		return fn(it)
	})
	var bad *wire.BodyError
	if errors.As(err, &bad) {
		return fmt.Errorf("%s %d: %s", ir.locTag, ir.where(bad.Index, bad.Offset), bad.Msg)
	}
	return err
}

// where names item i, which begins at byte off of the decoded JSON: by line, or by number in
// an array.
func (ir *itemReader) where(i int, off int64) int {
	if ir.locTag == "item" {
		return i + 1
	}
	return ir.lines.lineAt(ir.base + off)
}

// lineCounter numbers the lines of what is read through it. It keeps only the offsets of the
// newlines not yet asked about, so asking about ever later offsets holds no more than the
// reader above it has read ahead.
type lineCounter struct {
	r        io.Reader
	n        int64   // bytes read
	line     int     // newlines before the last offset asked about
	newlines []int64 // offsets of the newlines read since
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for i, b := range p[:n] {
		if b == '\n' {
			c.newlines = append(c.newlines, c.n+int64(i))
		}
	}
	c.n += int64(n)
	return n, err
}

// lineAt is the 1-based line of byte off; off is never before the last one asked about.
func (c *lineCounter) lineAt(off int64) int {
	k := 0
	for k < len(c.newlines) && c.newlines[k] < off {
		k++
	}
	c.line += k
	c.newlines = c.newlines[k:]
	return c.line + 1
}

func (ir *itemReader) nextCSV() (importItem, error) {
	for {
		rec, err := ir.csv.Read()
		if err != nil {
			return importItem{}, err
		}
		line, _ := ir.csv.FieldPos(0)
		if ir.lineNo == 0 && isCSVHeader(rec) {
			ir.lineNo = line
			cols, err := csvHeader(rec)
			if err != nil {
				return importItem{}, fmt.Errorf("line %d: %v", line, err)
			}
			ir.columns = cols
			continue
		}
		ir.lineNo = line
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		out := importItem{loc: line}
		if len(rec) > len(ir.columns) {
			out.err = fmt.Errorf("%d columns, want at most %d (%s)", len(rec), len(ir.columns), strings.Join(ir.columns, ","))
			return out, nil
		}
		for i, v := range rec {
			v = strings.TrimSpace(v)
			switch ir.columns[i] {
			case "url":
				out.item.URL = v
			case "device":
				out.item.Device = v
			case "interval":
				out.item.Interval = intervalJSON(v)
			case "source":
				out.item.Source = v
			case "due":
				out.item.Due = v
			}
		}
		return out, nil
	}
}

func isCSVHeader(rec []string) bool {
	for _, f := range rec {
		if strings.EqualFold(strings.TrimSpace(f), "url") {
			return true
		}
	}
	return false
}

func csvHeader(rec []string) ([]string, error) {
	cols := make([]string, len(rec))
	seen := map[string]bool{}
	for i, f := range rec {
		c := strings.ToLower(strings.TrimSpace(f))
		known := false
		for _, k := range csvColumns {
			known = known || k == c
		}
		if !known {
			return nil, fmt.Errorf("CSV header: unknown column %q (want %s)", f, strings.Join(csvColumns, ","))
		}
		if seen[c] {
			return nil, fmt.Errorf("CSV header: column %q twice", c)
		}
		seen[c] = true
		cols[i] = c
	}
	return cols, nil
}

// importError is one rejected item of an import.
type importError struct {
	Line  int    `json:"line,omitempty"`
	Item  int    `json:"item,omitempty"`
	Field string `json:"field,omitempty"`
	Error string `json:"error"`
}

// importSummary is the outcome of an import (its --json output).
type importSummary struct {
	File     string        `json:"file"`
	Items    int           `json:"items"`
	Accepted int           `json:"accepted"`
	Rejected int           `json:"rejected"`
	Errors   []importError `json:"errors,omitempty"`
	Seconds  float64       `json:"seconds"`
	Stopped  string        `json:"stopped,omitempty"` // why the import stopped early
}

const maxImportErrors = 10

func (s *importSummary) reject(tag string, loc int, field, msg string) {
	if len(s.Errors) >= maxImportErrors {
		return
	}
	e := importError{Field: field, Error: msg}
	if tag == "item" {
		e.Item = loc
	} else {
		e.Line = loc
	}
	s.Errors = append(s.Errors, e)
}

// countingReader counts the bytes read through it, for the progress bar.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// openImport opens the file an import reads ("-": standard input) and says its size when it is
// a regular file (0: unknown), for the progress bar.
func (a *app) openImport(name string) (io.ReadCloser, int64, error) {
	if name == "-" {
		return io.NopCloser(a.stdin), 0, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		total = st.Size()
	}
	return f, total, nil
}

func runImport(a *app, args []string) error {
	fs := a.newFlags("import")
	format := fs.String("format", "", "ndjson or csv (default: csv for a .csv file, else ndjson; NDJSON may also be a JSON array)")
	chunk := fs.Int("chunk", 5000, "items per request")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *chunk < 1 || *chunk > 50000 {
		return usagef("--chunk must be between 1 and 50000")
	}
	switch *format {
	case "", "ndjson", "csv":
	default:
		return usagef("--format must be ndjson or csv, not %q", *format)
	}
	name := pos[0]
	in, total, err := a.openImport(name)
	if err != nil {
		return err
	}
	defer in.Close()
	if *format == "" {
		*format = "ndjson"
		if strings.EqualFold(filepath.Ext(name), ".csv") {
			*format = "csv"
		}
	}
	cr := &countingReader{r: in}
	ir, err := newItemReader(cr, *format)
	if err != nil {
		return err
	}
	sum := importSummary{File: name}
	start := time.Now()
	var bar *progressBar
	if a.tty && !a.json {
		bar = newProgressBar(a.stderr, "importing", total)
	}
	var (
		body bytes.Buffer
		locs []int
	)
	flush := func() error {
		if len(locs) == 0 {
			return nil
		}
		resp, _, err := a.postTargets(body.Bytes())
		if err != nil {
			return fmt.Errorf("%s %d: %w", ir.locTag, locs[0], err)
		}
		sum.Accepted += resp.Accepted
		sum.Rejected += resp.Rejected
		for _, e := range resp.Errors {
			loc := 0
			if e.Index >= 0 && e.Index < len(locs) {
				loc = locs[e.Index]
			}
			sum.reject(ir.locTag, loc, e.Field, e.Error)
		}
		body.Reset()
		locs = locs[:0]
		if bar != nil {
			bar.update(cr.n, sum.Items, sum.Rejected)
		}
		return nil
	}
	var stop error
	err = ir.each(func(it importItem) error {
		sum.Items++
		if it.err != nil {
			sum.Rejected++
			sum.reject(ir.locTag, it.loc, wire.FieldOf(it.err), it.err.Error())
			return nil
		}
		line, _ := json.Marshal(it.item)
		body.Write(line)
		body.WriteByte('\n')
		locs = append(locs, it.loc)
		if len(locs) == *chunk {
			stop = flush()
		}
		return stop
	})
	if stop == nil {
		// Like the server, send every item read before the file broke, then stop.
		stop = flush()
		if err != nil && stop == nil {
			stop = fmt.Errorf("reading %s: %w", name, err)
		}
	}
	if bar != nil {
		bar.done()
	}
	sum.Seconds = time.Since(start).Seconds()
	if stop != nil {
		if errors.Is(stop, errInterrupted) {
			sum.Stopped = "interrupted"
		} else {
			sum.Stopped = oneLine(stop.Error())
		}
	}
	if a.json {
		a.encodeJSON(sum)
	} else {
		a.printImportSummary(&sum)
	}
	switch {
	case stop != nil:
		return fmt.Errorf("import stopped: %v (%d items accepted before it)", stop, sum.Accepted)
	case sum.Rejected > 0:
		return fmt.Errorf("%d of %s rejected", sum.Rejected, plural(sum.Items, "item"))
	}
	return nil
}

func (a *app) printImportSummary(s *importSummary) {
	verb := "imported"
	if s.Stopped != "" {
		verb = "stopped importing"
	}
	name := s.File
	if name != "-" {
		name = filepath.Base(name)
	}
	fmt.Fprintln(a.stdout, clitext.Truncate(fmt.Sprintf("%s %s: %s, %d accepted, %d rejected in %s", verb, name, plural(s.Items, "item"),
		s.Accepted, s.Rejected, clitext.Duration(time.Duration(s.Seconds*float64(time.Second)))), 79))
	for _, e := range s.Errors {
		where := fmt.Sprintf("line %d", e.Line)
		if e.Item > 0 {
			where = fmt.Sprintf("item %d", e.Item)
		} else if e.Line == 0 {
			where = "?"
		}
		msg := e.Error
		if e.Field != "" {
			msg = e.Field + ": " + msg
		}
		fmt.Fprintf(a.stdout, "  %s: %s\n", where, clitext.Truncate(oneLine(msg), 66))
	}
	if more := s.Rejected - len(s.Errors); more > 0 && len(s.Errors) > 0 {
		fmt.Fprintf(a.stdout, "  … and %d more rejected\n", more)
	}
}
