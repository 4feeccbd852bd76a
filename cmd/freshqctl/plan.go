package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/freshq/freshq/wire"
)

// runPlan sends a proposed configuration file to POST /v1/plan and prints what it would do to
// demand and lateness, next to the current capacity. Worker 0 computes it read-only: nothing
// changes until the file is installed and the supervisor reloaded.
func runPlan(a *app, args []string) error {
	fs := a.newFlags("plan")
	path := fs.String("config", "", "the proposed configuration `file` (required)")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *path == "" {
		return usagef("--config is required")
	}
	body, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	if len(body) > wire.MaxPlanBody {
		return fmt.Errorf("%s: %d bytes, over the %d the server reads", *path, len(body), wire.MaxPlanBody)
	}
	_, raw, err := a.call(request{method: http.MethodPost, path: wire.PathPlan, body: body, contentType: "application/yaml", idempotent: true})
	if err != nil {
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	var p wire.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("%s: bad answer: %w", wire.PathPlan, err)
	}
	fmt.Fprintf(a.stdout, "capacity %.3f renders/s; current demand %.3f/s over %d rows: %s\n",
		p.CapacityPerSecond, p.Current.Demand, p.Current.Rows, p.Current.Verdict)
	for _, l := range p.Lines {
		fmt.Fprintln(a.stdout, l)
	}
	return nil
}
