package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// runDelete removes one target: its schedule row, index entry and page (DELETE /v1/targets).
// The API deletes one key at a time, so there is no --prefix.
func runDelete(a *app, args []string) error {
	fs := a.newFlags("delete")
	device := fs.String("device", "", "`device` (default desktop)")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	q := url.Values{"url": {pos[0]}}
	if *device != "" {
		q.Set("device", *device)
	}
	// Idempotent: a 503 means worker 0 did not take the delete, and deleting again is harmless.
	_, raw, err := a.call(request{method: http.MethodDelete, path: "/v1/targets", query: q, idempotent: true})
	if err != nil {
		if errors.Is(err, errNotAvailable) {
			return fmt.Errorf("delete is not available on %s: %w", a.server, err)
		}
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	d := *device
	if d == "" {
		d = "desktop"
	}
	fmt.Fprintf(a.stdout, "deleted %s (%s)\n", pos[0], d)
	return nil
}
