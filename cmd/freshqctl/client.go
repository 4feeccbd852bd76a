package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
)

// apiError is the body of an API error.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// request is one API call.
type request struct {
	method      string
	path        string
	query       url.Values
	body        []byte
	contentType string
	// idempotent requests are retried while the server answers 503 (worker 0 restarting).
	idempotent bool
}

// maxAttempts bounds the retries of an idempotent request answered 503.
const maxAttempts = 5

// call sends req and returns the status and body of a 2xx answer; anything else is an error
// that reads as one line.
func (a *app) call(req request) (int, []byte, error) {
	status, body, err := a.send(req)
	if err != nil {
		return 0, nil, err
	}
	if status/100 == 2 {
		return status, body, nil
	}
	return status, body, a.statusError(req, status, body)
}

// send sends req, retrying an idempotent one while the server answers 503.
func (a *app) send(req request) (int, []byte, error) {
	u := a.server + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	for attempt := 1; ; attempt++ {
		var rd io.Reader
		if req.body != nil {
			rd = bytes.NewReader(req.body)
		}
		hr, err := http.NewRequestWithContext(a.ctx, req.method, u, rd)
		if err != nil {
			return 0, nil, err
		}
		if req.contentType != "" {
			hr.Header.Set("Content-Type", req.contentType)
		}
		hr.Header.Set("Accept", "application/json")
		hr.Header.Set("User-Agent", "freshqctl")
		if a.token != "" {
			hr.Header.Set("Authorization", "Bearer "+a.token)
		}
		resp, err := a.client.Do(hr)
		if err != nil {
			return 0, nil, a.netError(err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return 0, nil, fmt.Errorf("reading the answer to %s %s: %v", req.method, req.path, err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || !req.idempotent || attempt == maxAttempts {
			return resp.StatusCode, body, nil
		}
		wait := a.retryWait
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = min(time.Duration(s)*time.Second, 5*time.Second)
		}
		select {
		case <-a.ctx.Done():
			return 0, nil, errInterrupted
		case <-time.After(wait):
		}
	}
}

var errInterrupted = errors.New("interrupted")

// netError turns a transport error into one line naming the server.
func (a *app) netError(err error) error {
	if errors.Is(err, context.Canceled) {
		return errInterrupted
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("%s did not answer within %s (--timeout)", a.server, a.timeout)
		}
		err = ue.Err
	}
	return fmt.Errorf("cannot reach %s: %v (is freshq-supervisor running? see --server or FRESHQ_SERVER)", a.server, err)
}

// errNotAvailable is an endpoint this server does not have.
var errNotAvailable = errors.New("endpoint not available")

// statusError turns a non-2xx answer into an error. A JSON API error reads "field: error".
func (a *app) statusError(req request, status int, body []byte) error {
	var ae apiError
	if json.Unmarshal(body, &ae) == nil && ae.Error != "" {
		msg := ae.Error
		if ae.Field != "" {
			msg = ae.Field + ": " + msg
		}
		if status == http.StatusUnauthorized {
			msg += " (set --token or FRESHQ_TOKEN)"
		}
		return &serverError{status: status, msg: msg}
	}
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return fmt.Errorf("%w: this server does not serve %s %s (%d); it needs a newer freshq",
			errNotAvailable, req.method, req.path, status)
	case http.StatusUnauthorized:
		return &serverError{status: status, msg: "unauthorized: set --token or FRESHQ_TOKEN"}
	}
	text := oneLine(string(body))
	if len(text) > 160 {
		text = text[:160] + "…"
	}
	msg := fmt.Sprintf("%s %s: %d %s", req.method, req.path, status, http.StatusText(status))
	if text != "" {
		msg += ": " + text
	}
	return &serverError{status: status, msg: msg}
}

// serverError is a non-2xx answer.
type serverError struct {
	status int
	msg    string
}

func (e *serverError) Error() string { return e.msg }

// getJSON GETs path and decodes the answer into v, returning the raw body too.
func (a *app) getJSON(path string, query url.Values, v any) ([]byte, error) {
	_, body, err := a.call(request{method: http.MethodGet, path: path, query: query, idempotent: true})
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return body, fmt.Errorf("GET %s: the answer is not the expected JSON: %v", path, err)
		}
	}
	return body, nil
}

// printJSON writes a raw JSON body for scripts, indented on a terminal-free pipe as it came,
// always ending with a newline.
func (a *app) printJSON(body []byte) {
	body = bytes.TrimSpace(body)
	a.stdout.Write(body)
	io.WriteString(a.stdout, "\n")
}

// encodeJSON writes v as one line of JSON.
func (a *app) encodeJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ago reads t relative to now: "3m ago", "in 5h".
func (a *app) ago(t time.Time) string {
	d := a.now().Sub(t).Round(time.Second)
	switch {
	case d > 0:
		return clitext.Duration(d) + " ago"
	case d < 0:
		return "in " + clitext.Duration(-d)
	}
	return "now"
}

// stamp is a UTC timestamp to the second.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// sizeText is a byte count in KiB/MiB.
func sizeText(n uint64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// plural is "1 item" / "2 items".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
