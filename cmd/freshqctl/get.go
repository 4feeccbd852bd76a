package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// runGet prints the stored page of one target (GET /v1/pages): its body on stdout as it was
// rendered, or with --json an object with its status, age, staleness, content type and body.
// With --wait D a missing page is rendered on miss and waited for, up to D (the server's
// page.max_wait bounds it): that is POST /v1/pages, since a render on miss writes and a GET on
// the admin listener never does. The request is not retried: a 503 says render on miss is at its
// cap or the server is stopping, and the user decides whether to ask again.
func runGet(a *app, args []string) error {
	fs := a.newFlags("get")
	device := fs.String("device", "", "`device` (default desktop)")
	wait := fs.Duration("wait", 0, "render a missing page and wait up to this `duration` for it (e.g. 10s)")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *wait < 0 {
		return usagef("freshqctl get: --wait must not be negative")
	}
	q := url.Values{"url": {pos[0]}}
	if *device != "" {
		q.Set("device", *device)
	}
	method := http.MethodGet
	if *wait > 0 {
		method = http.MethodPost
		q.Set("wait", wait.String())
		// The answer may take the whole wait: the client's bound must outlast it.
		c := *a.client
		c.Timeout = max(a.timeout, *wait+10*time.Second)
		a.client = &c
	}
	u := a.server + "/v1/pages?" + q.Encode()
	req, err := http.NewRequestWithContext(a.ctx, method, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "freshqctl")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return a.netError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the page: %v", err)
	}
	// A page carries X-Freshq-Stale whatever its own status (a stored 404 is a page); an API
	// error does not.
	if resp.Header.Get("X-Freshq-Stale") == "" {
		return a.statusError(request{method: method, path: "/v1/pages"}, resp.StatusCode, body)
	}
	if a.json {
		return a.encodeJSON(map[string]any{
			"status": resp.StatusCode, "age_sec": resp.Header.Get("Age"), "stale": resp.Header.Get("X-Freshq-Stale") == "true",
			"content_type": resp.Header.Get("Content-Type"), "body": string(body)})
	}
	a.stdout.Write(body)
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(a.stderr, "freshqctl: the page's own status is %d\n", resp.StatusCode)
	}
	return nil
}
