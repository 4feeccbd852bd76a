// Package sitemap reads sitemaps: it fetches a sitemap file and the files of an index, and parses
// them token by token. Worker 0's sitemap runs (sitemapruns.Runs) use it; what a run does
// with the URLs it finds is theirs. A walk stops when the context it was given ends, whatever
// it is doing: a fetch in flight is cut, and a body being read stops at its next read.
//
// A sitemap is how most operators hand freshq their catalogue, and it is also untrusted input
// from the internet, so the shape of this package follows from three threats:
//
//   - Size. A sitemap file may carry 50,000 URLs and an index 50,000 files. The XML is read token
//     by token (encoding/xml's Decoder; the document is never built), under a budget of MaxToken
//     bytes a token, and each entry is handed over as it is read, so memory stays flat whatever
//     the file's size.
//   - Compression bombs and runaway indexes. Every file, fetched or posted, gzip or not, is copied
//     to a temporary file through a reader that stops at sitemap.max_decompressed: a bomb is
//     refused after that many bytes, never expanded. Index recursion stops at sitemap.max_depth
//     levels of index files, a file is read at most once per walk, and a walk reads at most
//     MaxFiles files.
//   - SSRF. The submitted URL, each redirect and each child sitemap must be under render.domains,
//     like the http renderer's fetches, and the default client dials under render's address
//     policy; a child outside the domains is reported as filtered, never fetched.
//
// Nothing of a malformed file is handed over: each file is parsed to the end once before any of
// its entries is, so a malformed or truncated file yields no entry (the walk fails with the
// parser's reason). An index's children are files of their own: a bad child is one failure
// reported to the Sink, its siblings are still read.
//
// Of the sitemaps.org tags, <loc> is the target and <changefreq> becomes its cadence
// (ChangefreqCadence, floored at sitemap.min_ttl, so a site claiming "always" cannot make freshq
// re-render every page hourly). <lastmod> is handed on (Entry.LastMod): a page whose lastmod is
// later than its last render is made due (intake), not rushed, and at most once a read, since
// lastmod is unreliable in the wild (many sites stamp every URL with the generation time).
// <priority> is parsed and ignored: it is relative within a site and the lanes already decide
// order. Extension namespaces (image, news, video, xhtml:link) are skipped.
package sitemap

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/render"
)

// Limits of reading sitemaps.
const (
	// MaxFiles bounds the files one walk reads, index children included.
	MaxFiles = 10_000
	// MaxField bounds the text of one tag (<loc>, <changefreq>, …); longer text is cut and the
	// entry marked TooLong. A URL this long could not be a cache key anyway.
	MaxField = 8 << 10
	// MaxToken bounds one token of the XML as the parser reads it: a text node, a tag with its
	// attributes, a comment. The decoder holds a token whole before handing it over, so this is
	// what a file can make worker 0 hold at once; a longer token refuses the file (nothing of it
	// is handed over) once this many bytes were read, without keeping them.
	MaxToken = 64 << 10
)

// Sink receives what a walk finds, in document order. Its methods are called from the walk's
// goroutine only.
type Sink interface {
	// File is called for each file the walk has read whole, before it is parsed.
	File()
	// Entry is called for each <url> of a urlset file that parsed to its end. An error stops
	// the walk and is returned by it.
	Entry(Entry) error
	// EndFile is called after the last Entry of a urlset file. An error stops the walk.
	EndFile() error
	// Filtered is called for a child sitemap outside render.domains; it is not fetched.
	Filtered(url string)
	// Failed is called for a child sitemap that could not be read; its siblings still are.
	Failed(url, reason string)
}

// Fetcher reads sitemap files and follows indexes, under the limits of the package doc.
type Fetcher struct {
	// Client fetches; nil: a client with render.timeout dialing under render's address policy.
	// Either way a redirect outside render.domains is refused (see NewFetcher).
	Client  *http.Client
	Options Options
}

// Options are what a walk needs of the configuration, narrowed from it where the node is
// assembled, so that this package reads no configuration of its own.
type Options struct {
	Domains         []string      // render.domains: the hosts a sitemap, a redirect or a listed URL may name
	Timeout         time.Duration // render.timeout: the longest fetch of one file
	UserAgent       string        // render.user_agent
	MaxDepth        int           // sitemap.max_depth: levels of index files
	MaxDecompressed int64         // sitemap.max_decompressed: bytes of one file, gzip expanded
}

// walk is the state of one walk.
type walk struct {
	ctx     context.Context
	opts    Options
	sink    Sink
	client  *http.Client
	visited map[string]bool // files already read in this walk
	files   int
}

func (f *Fetcher) walk(ctx context.Context, sink Sink) *walk {
	return &walk{ctx: ctx, opts: f.Options, sink: sink, client: f.client(), visited: map[string]bool{}}
}

// WalkURL fetches the sitemap at u, a normalised URL under render.domains, and everything an
// index under it names, handing what it finds to sink. It stops when ctx ends. Its error is the
// walk's: the first file's failure, or sink's.
func (f *Fetcher) WalkURL(ctx context.Context, u string, sink Sink) error {
	w := f.walk(ctx, sink)
	w.visited[u] = true
	return w.fetchFile(u, 1)
}

// WalkBody reads a sitemap file from body (gzip or not) like WalkURL reads a fetched one.
func (f *Fetcher) WalkBody(ctx context.Context, body io.Reader, sink Sink) error {
	w := f.walk(ctx, sink)
	spooled, err := w.spool(body)
	if err != nil {
		return err
	}
	defer discard(spooled)
	return w.file(spooled, 1)
}

func discard(f *os.File) {
	if f != nil {
		f.Close()
		os.Remove(f.Name())
	}
}

// client returns the HTTP client of a walk: the injected one or a default with render.timeout,
// either way refusing a redirect outside render.domains. The default client dials under
// render's address policy (render.NewTransport): an internal address that render.domains does
// not list is refused at dial time, on every hop, with an error that names the policy only.
// An injected client without a Transport gets the same guard; one with its own Transport is
// used as given.
func (f *Fetcher) client() *http.Client {
	c := &http.Client{Timeout: f.Options.Timeout}
	if f.Client != nil {
		cp := *f.Client
		c = &cp
	}
	domains := f.Options.Domains
	if c.Transport == nil {
		t := render.NewTransport(domains)
		t.IdleConnTimeout = 30 * time.Second // a transport per walk: its idle connections end soon after it
		c.Transport = t
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL", req.URL.Scheme)
		}
		if !render.Allowed(domains, req.URL.Host) {
			return fmt.Errorf("redirect to %s, which is not under render.domains", req.URL.Host)
		}
		return nil
	}
	return c
}

var gzipMagic = []byte{0x1f, 0x8b}

// ctxReader stops reading once ctx is done, so that a walk's spooling ends with the walk.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

var errTooLarge = errors.New("too large")

// boundedReader fails with errTooLarge once more than n bytes were read.
type boundedReader struct {
	r io.Reader
	n int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.n+1 {
		p = p[:b.n+1]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n < 0 {
		return n, errTooLarge
	}
	return n, err
}

// spool copies a sitemap file, decompressing it if it starts with the gzip magic, to a temporary
// file, refusing one that exceeds sitemap.max_decompressed (after decompression): a gzip bomb is
// refused after that many bytes, not expanded.
func (w *walk) spool(src io.Reader) (*os.File, error) {
	br := bufio.NewReaderSize(src, 32<<10)
	var r io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == gzipMagic[0] && head[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
		r = zr
	}
	f, err := os.CreateTemp("", "freshq-sitemap-*")
	if err != nil {
		return nil, err
	}
	limit := w.opts.MaxDecompressed
	if _, err := io.Copy(f, &boundedReader{r: ctxReader{w.ctx, r}, n: limit}); err != nil {
		discard(f)
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("over sitemap.max_decompressed (%d bytes) once decompressed: refused", limit)
		}
		return nil, fmt.Errorf("reading: %v", err)
	}
	return f, nil
}

// fetchFile downloads the sitemap at u and reads it; level counts the index files above it
// plus one.
func (w *walk) fetchFile(u string, level int) error {
	w.files++
	if w.files > MaxFiles {
		return fmt.Errorf("the walk already read %d files", MaxFiles)
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", w.opts.UserAgent)
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("fetching: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching: HTTP %d", resp.StatusCode)
	}
	f, err := w.spool(resp.Body)
	if err != nil {
		return err
	}
	defer discard(f)
	resp.Body.Close()
	cancel()
	return w.file(f, level)
}

// file reads one spooled sitemap: a first pass checks it parses to the end, so nothing of a
// malformed file is handed over; the second hands its entries to the sink, or follows an
// index's children.
func (w *walk) file(f *os.File, level int) error {
	w.sink.File()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	kind, err := Parse(bufio.NewReaderSize(f, 64<<10), func(Entry) error { return nil })
	if err != nil {
		return fmt.Errorf("sitemap: %v (nothing of this file was stored)", err)
	}
	if kind == Index && level > w.opts.MaxDepth {
		return fmt.Errorf("an index file nested deeper than sitemap.max_depth (%d levels of index files)", w.opts.MaxDepth)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if kind == Index {
		_, err = Parse(bufio.NewReaderSize(f, 64<<10), func(e Entry) error {
			if err := w.ctx.Err(); err != nil {
				return err
			}
			w.child(e, level)
			return nil
		})
		return err
	}
	_, err = Parse(bufio.NewReaderSize(f, 64<<10), func(e Entry) error {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		return w.sink.Entry(e)
	})
	if err != nil {
		return err
	}
	return w.sink.EndFile()
}

// child follows one <sitemap> of an index; its failure is one failure reported to the sink.
func (w *walk) child(e Entry, level int) {
	if e.TooLong {
		w.sink.Failed(e.Loc, "child sitemap <loc> too long")
		return
	}
	u, err := cachekey.NormalizeURL(e.Loc)
	if err != nil {
		w.sink.Failed(e.Loc, "child sitemap: "+err.Error())
		return
	}
	pu, _ := url.Parse(u)
	if !render.Allowed(w.opts.Domains, pu.Host) {
		w.sink.Filtered(u)
		return
	}
	if w.visited[u] {
		return
	}
	w.visited[u] = true
	if err := w.fetchFile(u, level+1); err != nil {
		w.sink.Failed(u, "child sitemap: "+err.Error())
	}
}

// ChangefreqCadence maps a sitemaps.org <changefreq> to a cadence, floored at minTTL. An absent
// or unknown value reports false: the target keeps its cadence, or resolves one from the routes.
func ChangefreqCadence(freq string, minTTL time.Duration) (time.Duration, bool) {
	const day = 24 * time.Hour
	var d time.Duration
	switch strings.ToLower(strings.TrimSpace(freq)) {
	case "always", "hourly":
		d = time.Hour
	case "daily":
		d = day
	case "weekly":
		d = 7 * day
	case "monthly":
		d = 30 * day
	case "yearly", "never":
		d = 365 * day
	default:
		return 0, false
	}
	d = max(d, minTTL)
	return min(max(d, policy.MinCadence), policy.MaxCadence), true
}

// Kind is the root element of a sitemap file.
type Kind int

// File kinds.
const (
	URLSet Kind = iota + 1 // <urlset>: pages
	Index                  // <sitemapindex>: other sitemap files
)

// Entry is one <url> of a urlset or one <sitemap> of an index. Each field is the trimmed
// text of its tag, at most MaxField bytes.
type Entry struct {
	Loc        string
	LastMod    string // as written; intake reads it as a W3C Datetime (see the package comment)
	ChangeFreq string
	Priority   string // parsed and ignored
	TooLong    bool   // a tag's text was longer than MaxField and was cut
}

// Parse streams a sitemap file token by token, calling fn for each entry in document
// order, and returns the file's kind. Memory is bounded by the longest tag, not the document.
// It fails on XML that is malformed or truncated, on a root other than <urlset> or
// <sitemapindex>, and on anything but comments after the root; fn may have been called for
// entries before the error. Elements it does not know (extensions such as image:image,
// news:news, xhtml:link) are skipped.
func Parse(r io.Reader, fn func(Entry) error) (Kind, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 32<<10)
	}
	budget := &tokenBudget{r: br}
	dec := xml.NewDecoder(budget)
	p := &parser{dec: dec, budget: budget}
	dec.CharsetReader = func(charset string, input io.Reader) (io.Reader, error) {
		switch strings.ToLower(charset) {
		case "utf-8", "utf8", "us-ascii", "ascii":
			return input, nil
		}
		return nil, fmt.Errorf("encoding %q is not supported (sitemaps are UTF-8)", charset)
	}
	var (
		kind     Kind
		rootNS   string
		rootDone bool
		entry    = "url"
	)
	for {
		tok, err := p.token()
		if err == io.EOF {
			if kind == 0 {
				return 0, errors.New("no <urlset> or <sitemapindex> element")
			}
			if !rootDone {
				return kind, errors.New("truncated: the document ends inside its root element")
			}
			return kind, nil
		}
		if err != nil {
			return kind, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if rootDone {
				return kind, fmt.Errorf("line %d: element <%s> after the root element", line(dec), t.Name.Local)
			}
			if kind == 0 {
				switch t.Name.Local {
				case "urlset":
					kind = URLSet
				case "sitemapindex":
					kind, entry = Index, "sitemap"
				default:
					return 0, fmt.Errorf("root element <%s> is neither <urlset> nor <sitemapindex>", t.Name.Local)
				}
				rootNS = t.Name.Space
				continue
			}
			if t.Name.Local != entry || t.Name.Space != rootNS {
				if err := p.skip(); err != nil {
					return kind, err
				}
				continue
			}
			e, err := parseEntry(p, rootNS)
			if err != nil {
				return kind, err
			}
			if err := fn(e); err != nil {
				return kind, err
			}
		case xml.EndElement:
			rootDone = true // the decoder checks that end tags match: this closes the root
		case xml.CharData:
			if kind == 0 || rootDone {
				if len(strings.TrimSpace(string(t))) > 0 {
					return kind, fmt.Errorf("line %d: text outside the root element", line(dec))
				}
			}
		}
	}
}

func line(dec *xml.Decoder) int {
	l, _ := dec.InputPos()
	return l
}

// parseEntry reads the children of one <url> or <sitemap> up to its end tag.
func parseEntry(p *parser, ns string) (Entry, error) {
	var e Entry
	for {
		tok, err := p.token()
		if err != nil {
			return e, unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return e, nil
		case xml.StartElement:
			var dst *string
			if t.Name.Space == ns {
				switch t.Name.Local {
				case "loc":
					dst = &e.Loc
				case "lastmod":
					dst = &e.LastMod
				case "changefreq":
					dst = &e.ChangeFreq
				case "priority":
					dst = &e.Priority
				}
			}
			if dst == nil {
				if err := p.skip(); err != nil {
					return e, unexpectedEOF(err)
				}
				continue
			}
			text, long, err := fieldText(p)
			if err != nil {
				return e, err
			}
			*dst = text
			e.TooLong = e.TooLong || long
		}
	}
}

// fieldText reads the text of a simple element up to its end tag, keeping at most
// MaxField bytes; nested elements are skipped.
func fieldText(p *parser) (string, bool, error) {
	var sb strings.Builder
	long := false
	for {
		tok, err := p.token()
		if err != nil {
			return "", false, unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			if room := MaxField - sb.Len(); len(t) > room {
				t, long = t[:room], true
			}
			sb.Write(t)
		case xml.StartElement:
			if err := p.skip(); err != nil {
				return "", false, unexpectedEOF(err)
			}
		case xml.EndElement:
			return strings.TrimSpace(sb.String()), long, nil
		}
	}
}

// parser reads tokens under a per-token byte budget (MaxToken): the decoder
// reads through tokenBudget one byte at a time, and the budget is renewed before each token,
// so a token that would grow past it fails while the decoder holds at most the budget.
type parser struct {
	dec    *xml.Decoder
	budget *tokenBudget
}

func (p *parser) token() (xml.Token, error) {
	p.budget.left = MaxToken
	tok, err := p.dec.Token()
	if errors.Is(err, errTokenTooLong) {
		return nil, fmt.Errorf("line %d: a text node, tag or comment longer than %d bytes: refused", line(p.dec), MaxToken)
	}
	return tok, err
}

// skip skips the element just started, token by token (xml.Decoder.Skip would read the whole
// element under one budget).
func (p *parser) skip() error {
	for depth := 1; depth > 0; {
		tok, err := p.token()
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
	return nil
}

var errTokenTooLong = errors.New("token over budget")

// tokenBudget is the decoder's reader: an io.ByteReader (so the decoder adds no buffer of its
// own) that fails once left bytes were read since the budget was last renewed.
type tokenBudget struct {
	r    *bufio.Reader
	left int
}

func (t *tokenBudget) ReadByte() (byte, error) {
	if t.left <= 0 {
		return 0, errTokenTooLong
	}
	t.left--
	return t.r.ReadByte()
}

func (t *tokenBudget) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, errTokenTooLong
	}
	n, err := t.r.Read(p[:min(len(p), t.left)])
	t.left -= n
	return n, err
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return errors.New("truncated: the document ends inside an element")
	}
	return err
}
