package main

import (
	"errors"
	"fmt"
	"net/http"
)

// runDelete removes one target: its schedule row, index entry and page (DELETE /v1/targets).
// The API deletes one key at a time, so there is no --prefix.
func runDelete(a *app, args []string) error {
	q, err := targetQuery(a, "delete", args)
	if err != nil {
		return err
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
	d := q.Get("device")
	if d == "" {
		d = "desktop"
	}
	fmt.Fprintf(a.stdout, "deleted %s (%s)\n", q.Get("url"), d)
	return nil
}
