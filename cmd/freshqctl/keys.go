package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/freshq/freshq/wire"
)

// runKeys is `keys check` (GET /v1/keys/check: how many stored keys the key rules in force
// would change) and `keys migrate [--batch N]` (POST /v1/keys/migrate, called until it says
// done: each call moves up to N keys, so an interrupted migrate loses at most its batch's
// answer, and running it again continues).
func runKeys(a *app, args []string) error {
	fs := a.newFlags("keys")
	batch := fs.Int("batch", 0, "keys moved per request (`N`; 0: the server's default)")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	switch pos[0] {
	case "check":
		return keysCheck(a)
	case "migrate":
		return keysMigrate(a, *batch)
	}
	return usagef("give check or migrate, not %q", pos[0])
}

func keysCheck(a *app) error {
	var c wire.KeysCheck
	raw, err := a.getJSON("/v1/keys/check", nil, &c)
	if err != nil {
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	fmt.Fprintf(a.stdout, "%s scanned: %d would change under the key rules in force, %d cannot be rekeyed\n",
		plural(c.Scanned, "key"), c.Changed, c.Unkeyable)
	for _, m := range c.Examples {
		fmt.Fprintf(a.stdout, "  %s\n    → %s\n", m.From, m.To)
	}
	if c.Changed > 0 {
		fmt.Fprintln(a.stdout, "freshqctl keys migrate moves them")
	}
	return nil
}

func keysMigrate(a *app, batch int) error {
	body, _ := json.Marshal(wire.KeysMigrateRequest{Limit: batch})
	var total wire.KeysMigrate
	for calls := 0; ; calls++ {
		// Idempotent: a key's move is repeatable (see intake/keys.go), so a 503 is retried.
		_, raw, err := a.call(request{method: http.MethodPost, path: "/v1/keys/migrate", body: body,
			contentType: "application/json", idempotent: true})
		if err != nil {
			return err
		}
		var m wire.KeysMigrate
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("keys migrate: answer: %w", err)
		}
		total.Moved, total.Kept, total.Replaced = total.Moved+m.Moved, total.Kept+m.Kept, total.Replaced+m.Replaced
		if m.Done {
			break
		}
		if m.Moved+m.Kept+m.Replaced == 0 && calls > 0 {
			return fmt.Errorf("keys migrate: the server moves no key and is not done")
		}
	}
	total.Done = true
	if a.json {
		return a.encodeJSON(total)
	}
	fmt.Fprintf(a.stdout, "migrated %s: %d moved, %d dropped for an existing key with a newer page, %d replaced an older one\n",
		plural(total.Moved+total.Kept+total.Replaced, "key"), total.Moved, total.Kept, total.Replaced)
	return nil
}
