package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/freshq/freshq/wire"
)

// maxAPIBody bounds what the console reads of one API answer.
const maxAPIBody = 8 << 20

// maxParam bounds a form or query parameter the console passes on (a URL, a prefix, a
// device): the API's own bound on a cache key is 2,048 bytes.
const maxParam = 4096

// apiError is an answer of the API other than 2xx: its status and its JSON error, shown as is.
type apiError struct {
	Status int
	Field  string
	Msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Field, e.Msg) }

// call sends one request to the API and decodes a 2xx JSON answer into out (nil: ignored).
func (c *Console) call(r *http.Request, method, path string, q url.Values, body, out any) error {
	ctx, cancel := apiCtx(r)
	defer cancel()
	u := "http://worker0" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.opt.API.Do(req)
	if err != nil {
		return &apiError{Status: http.StatusServiceUnavailable, Msg: "worker 0 is unavailable; retry shortly"}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return &apiError{Status: http.StatusBadGateway, Msg: "reading worker 0's answer: " + err.Error()}
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
			Field string `json:"field"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return &apiError{Status: resp.StatusCode, Field: e.Field, Msg: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &apiError{Status: http.StatusBadGateway, Msg: "worker 0's answer did not decode: " + err.Error()}
	}
	return nil
}

// apiFail shows an API error with the API's own status, field and message.
func (c *Console) apiFail(w http.ResponseWriter, r *http.Request, sess string, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		c.fail(w, r, sess, ae.Status, ae.Field, ae.Msg)
		return
	}
	c.fail(w, r, sess, http.StatusBadGateway, "", err.Error())
}

// param reads one query or form parameter, refusing one too long or not UTF-8.
func param(v url.Values, name string) (string, error) {
	s := v.Get(name)
	if len(s) > maxParam || !utf8.ValidString(s) {
		return "", fmt.Errorf("%s is over %d bytes or not UTF-8", name, maxParam)
	}
	return s, nil
}

// Lanes are the queue's lanes in the order the console shows them.
var Lanes = []string{"urgent", "submitted", "discovered", "cold"}

// ServeCounts are the crawler listener's requests by result (hit, stale, miss, error), as
// freshq_serve_requests_total counts them.
type ServeCounts map[string]float64

// serveCounts reads the crawler listener's request counters from worker 0 (the series
// /metrics shows as freshq_serve_requests_total). nil when worker 0 does not serve crawlers.
func (c *Console) serveCounts(r *http.Request) ServeCounts {
	ctx, cancel := apiCtx(r)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker0"+wire.PathServeMetrics, nil)
	if err != nil {
		return nil
	}
	resp, err := c.opt.API.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	return ParseServeCounts(io.LimitReader(resp.Body, 4<<20))
}

// ParseServeCounts sums freshq_serve_requests_total by result from the text exposition rd.
func ParseServeCounts(rd io.Reader) ServeCounts {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rd)
	if err != nil {
		return nil
	}
	out := ServeCounts{}
	f := fams["freshq_serve_requests_total"]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// Overview is the overview's data.
type Overview struct {
	Queue  wire.QueueView
	Serve  ServeCounts
	Chart  bool // a series is kept: the chart is shown
	Paused int
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, sess string) {
	var o Overview
	if err := c.call(r, http.MethodGet, "/v1/queue", nil, nil, &o.Queue); err != nil {
		c.apiFail(w, r, sess, err)
		return
	}
	o.Serve = c.serveCounts(r)
	for _, h := range o.Queue.Hosts {
		if h.Paused {
			o.Paused++
		}
	}
	o.Chart = c.seriesReady(r)
	c.view(w, http.StatusOK, "overview", "overview", sess, o)
}

// Pages is the pages view's data: the search forms, what an action did, and the pages under a
// prefix when one was searched (List nil: none was).
type Pages struct {
	Done   string
	Prefix string
	Device string
	List   *wire.PageList
}

func (c *Console) pagesView(w http.ResponseWriter, r *http.Request, sess string) {
	q := r.URL.Query()
	vals := map[string]string{}
	for _, name := range []string{"url", "device", "prefix", "after"} {
		v, err := param(q, name)
		if err != nil {
			c.fail(w, r, sess, http.StatusBadRequest, name, err.Error())
			return
		}
		vals[name] = v
	}
	if u := vals["url"]; u != "" {
		http.Redirect(w, r, Prefix+"page?"+pageQuery(u, vals["device"]), http.StatusSeeOther)
		return
	}
	p := Pages{Done: doneLabel(q.Get("done")), Prefix: vals["prefix"], Device: vals["device"]}
	if p.Prefix != "" {
		// One page of the targets under the prefix, as GET /v1/targets/list answers it; the
		// next page is the same search after its cursor.
		aq := url.Values{"prefix": {p.Prefix}}
		if p.Device != "" {
			aq.Set("device", p.Device)
		}
		if a := vals["after"]; a != "" {
			aq.Set("after", a)
		}
		var l wire.PageList
		if err := c.call(r, http.MethodGet, "/v1/targets/list", aq, nil, &l); err != nil {
			c.apiFail(w, r, sess, err)
			return
		}
		p.List = &l
	}
	c.view(w, http.StatusOK, "pages", "pages", sess, p)
}

func pageQuery(u, dev string) string {
	q := url.Values{"url": {u}}
	if dev != "" {
		q.Set("device", dev)
	}
	return q.Encode()
}

// PageDetail is one page's view.
type PageDetail struct {
	URL, Device string
	Target      wire.Explanation
	Renders     *Renders // nil: the API keeps no log of renders
	// Crawlers is the page's crawler requests by family (GET /v1/targets/crawlers); nil when
	// worker 0 serves no crawler listener, or the API did not answer (CrawlersErr says).
	Crawlers    *PageCrawlers
	CrawlersErr string
	Done        string
	Preview     template.URL // the preview's address, its query encoded once
}

// Renders is GET /v1/renders' answer as the console reads it.
type Renders struct {
	Renders []RenderEntry `json:"renders"`
}

// RenderEntry is one render of the log.
type RenderEntry struct {
	At         string   `json:"at"`
	URL        string   `json:"url"`
	Device     string   `json:"device"`
	Outcome    string   `json:"outcome"`
	Status     int      `json:"status"`
	DurationMs int64    `json:"duration_ms"`
	Changed    bool     `json:"changed"`
	Verdict    string   `json:"verdict,omitempty"`
	Class      string   `json:"class,omitempty"`
	Error      string   `json:"error,omitempty"`
	Evidence   []string `json:"evidence,omitempty"`
}

func (c *Console) pageView(w http.ResponseWriter, r *http.Request, sess string) {
	q := r.URL.Query()
	u, err := param(q, "url")
	if err != nil || u == "" {
		c.fail(w, r, sess, http.StatusBadRequest, "url", "url: give the page's absolute URL")
		return
	}
	dev, err := param(q, "device")
	if err != nil {
		c.fail(w, r, sess, http.StatusBadRequest, "device", err.Error())
		return
	}
	d := PageDetail{URL: u, Device: dev, Done: doneLabel(q.Get("done")), Preview: template.URL(Prefix + "preview?" + pageQuery(u, dev))}
	aq := url.Values{"url": {u}}
	if dev != "" {
		aq.Set("device", dev)
	}
	if err := c.call(r, http.MethodGet, "/v1/targets", aq, nil, &d.Target); err != nil {
		c.apiFail(w, r, sess, err)
		return
	}
	var rs Renders
	if err := c.call(r, http.MethodGet, "/v1/renders", aq, nil, &rs); err == nil {
		d.Renders = &rs
	}
	var pc PageCrawlers
	var ae *apiError
	switch err := c.call(r, http.MethodGet, "/v1/targets/crawlers", aq, nil, &pc); {
	case err == nil:
		d.Crawlers = &pc
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound && ae.Field == "serve.listen":
		// No crawler listener: nothing to count.
	default:
		d.CrawlersErr = err.Error()
	}
	c.view(w, http.StatusOK, "page", "pages", sess, d)
}

// PageCrawlers is GET /v1/targets/crawlers' answer as the console reads it: the crawler
// listener's requests for the page by family, from its bounded per-page tally.
type PageCrawlers struct {
	Tracked  bool          `json:"tracked"`
	SinceMs  int64         `json:"since_ms"`
	Families []FamilyCount `json:"families"`
	Table    struct {
		Pages    int `json:"pages"`
		MaxPages int `json:"max_pages"`
	} `json:"table"`
}

// FamilyCount is one family's requests for a page.
type FamilyCount struct {
	Family   string `json:"family"`
	Requests uint64 `json:"requests"`
	Hit      uint64 `json:"hit"`
	Stale    uint64 `json:"stale"`
	Miss     uint64 `json:"miss"`
	Refused  uint64 `json:"refused"`
	LastMs   int64  `json:"last_ms"`
}

// Max is the most requests of one family: the bars' full width.
func (p *PageCrawlers) Max() uint64 {
	m := uint64(0)
	for _, f := range p.Families {
		m = max(m, f.Requests)
	}
	return m
}

// preview serves the stored page, under PreviewCSP, for the page view's sandboxed frame.
func (c *Console) preview(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", PreviewCSP)
	w.Header().Set("X-Frame-Options", "SAMEORIGIN")
	q := r.URL.Query()
	u, err1 := param(q, "url")
	dev, err2 := param(q, "device")
	if err1 != nil || err2 != nil || u == "" {
		http.Error(w, "url: give the page's absolute URL", http.StatusBadRequest)
		return
	}
	ctx, cancel := apiCtx(r)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker0/v1/pages?"+pageQuery(u, dev), nil)
	if err != nil {
		http.Error(w, "url: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := c.opt.API.Do(req)
	if err != nil {
		http.Error(w, "worker 0 is unavailable; retry shortly", http.StatusServiceUnavailable)
		return
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if ct == "" || resp.StatusCode/100 != 2 {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, maxAPIBody))
}

func (c *Console) sites(w http.ResponseWriter, r *http.Request, sess string) {
	var q wire.QueueView
	if err := c.call(r, http.MethodGet, "/v1/queue", nil, nil, &q); err != nil {
		c.apiFail(w, r, sess, err)
		return
	}
	c.view(w, http.StatusOK, "sites", "sites", sess, q)
}

// Failures is the failures view: the log's failures grouped by cause, and the hosts paused or
// held back for errors.
type Failures struct {
	Log     *FailureLog // nil: the API keeps no log of failures
	ByCause map[string][]RenderEntry
	Causes  []string
	Hosts   []wire.QueueHost
}

// FailureLog is GET /v1/failures' answer as the console reads it.
type FailureLog struct {
	Failures []RenderEntry `json:"failures"`
}

func (c *Console) failures(w http.ResponseWriter, r *http.Request, sess string) {
	var f Failures
	var q wire.QueueView
	if err := c.call(r, http.MethodGet, "/v1/queue", nil, nil, &q); err != nil {
		c.apiFail(w, r, sess, err)
		return
	}
	for _, h := range q.Hosts {
		if h.Cause == "errors" || h.Cause == "retry_after" {
			f.Hosts = append(f.Hosts, h)
		}
	}
	var log FailureLog
	if err := c.call(r, http.MethodGet, "/v1/failures", nil, nil, &log); err == nil {
		f.Log = &log
		f.ByCause = map[string][]RenderEntry{}
		for _, e := range log.Failures {
			f.ByCause[e.Class] = append(f.ByCause[e.Class], e)
		}
		for k := range f.ByCause {
			f.Causes = append(f.Causes, k)
		}
		sort.Strings(f.Causes)
	}
	c.view(w, http.StatusOK, "failures", "failures", sess, f)
}

// Cluster is the cluster view: View nil on a single node.
type Cluster struct {
	View *wire.ClusterView
	Err  string
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request, sess string) {
	var v wire.ClusterView
	var cl Cluster
	err := c.call(r, http.MethodGet, "/v1/cluster", nil, nil, &v)
	var ae *apiError
	switch {
	case err == nil:
		cl.View = &v
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		// Badger: a single node, in no cluster.
	default:
		cl.Err = err.Error()
	}
	c.view(w, http.StatusOK, "cluster", "cluster", sess, cl)
}

// Actions the page view's forms send, as op.
var actions = map[string]string{"rush": "rushed", "recache": "recached", "delete": "deleted", "rush-prefix": "rushed every page under the prefix"}

func doneLabel(op string) string { return actions[op] }

// action runs one action (the form's op) through the API, then goes back to the page.
func (c *Console) action(w http.ResponseWriter, r *http.Request, sess string) {
	f := r.PostForm
	op := f.Get("op")
	if _, ok := actions[op]; !ok {
		c.fail(w, r, sess, http.StatusBadRequest, "op", "op: one of rush, recache, delete, rush-prefix")
		return
	}
	u, err := param(f, "url")
	if err != nil {
		c.fail(w, r, sess, http.StatusBadRequest, "url", err.Error())
		return
	}
	dev, err := param(f, "device")
	if err != nil {
		c.fail(w, r, sess, http.StatusBadRequest, "device", err.Error())
		return
	}
	prefix, err := param(f, "prefix")
	if err != nil {
		c.fail(w, r, sess, http.StatusBadRequest, "prefix", err.Error())
		return
	}
	if op == "rush-prefix" {
		if prefix == "" {
			c.fail(w, r, sess, http.StatusBadRequest, "prefix", "prefix: give the URL prefix to rush")
			return
		}
	} else if u == "" {
		c.fail(w, r, sess, http.StatusBadRequest, "url", "url: give the page's absolute URL")
		return
	}
	q := url.Values{"url": {u}}
	if dev != "" {
		q.Set("device", dev)
	}
	switch op {
	case "rush":
		err = c.call(r, http.MethodPost, "/v1/prioritize", nil, wire.PrioritizeRequest{URL: u, Device: dev, Mode: "rush"}, nil)
	case "rush-prefix":
		err = c.call(r, http.MethodPost, "/v1/prioritize", nil, wire.PrioritizeRequest{Prefix: prefix, Device: dev, Mode: "rush"}, nil)
	case "recache":
		body := map[string]string{"url": u}
		if dev != "" {
			body["device"] = dev
		}
		err = c.call(r, http.MethodPost, "/recache", nil, body, nil)
	case "delete":
		err = c.call(r, http.MethodDelete, "/v1/targets", q, nil, nil)
	}
	if err != nil {
		c.apiFail(w, r, sess, err)
		return
	}
	c.opt.Log.Info().Str("op", op).Str("url", u).Str("prefix", prefix).Str("device", dev).Msg("console action")
	switch op {
	case "delete", "rush-prefix":
		http.Redirect(w, r, Prefix+"pages?done="+op, http.StatusSeeOther)
	default:
		http.Redirect(w, r, Prefix+"page?"+pageQuery(u, dev)+"&done="+op, http.StatusSeeOther)
	}
}
