package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

func runPrioritize(a *app, args []string) error {
	fs := a.newFlags("prioritize")
	prefix := fs.String("prefix", "", "every target whose URL starts with `P`, instead of one URL")
	mode := fs.String("mode", "", "rush (re-render now, at urgent) or wait (drop the page, let cadence refill it)")
	device := fs.String("device", "", "`device` (default: the server's choice)")
	pos, err := a.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if (*prefix == "") == (len(pos) == 0) {
		return usagef("give one URL or --prefix P")
	}
	if *mode != "rush" && *mode != "wait" {
		return usagef("--mode must be rush or wait")
	}
	body := map[string]string{"mode": *mode}
	what := *prefix + "*"
	if *prefix != "" {
		body["prefix"] = *prefix
	} else {
		body["url"] = pos[0]
		what = pos[0]
	}
	if *device != "" {
		body["device"] = *device
	}
	b, _ := json.Marshal(body)
	_, raw, err := a.call(request{method: http.MethodPost, path: "/v1/prioritize", body: b, contentType: "application/json"})
	if err != nil {
		if errors.Is(err, errNotAvailable) {
			return fmt.Errorf("prioritize is not available on %s: %w", a.server, err)
		}
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	var out struct {
		Matched *int `json:"matched"`
	}
	if json.Unmarshal(raw, &out) == nil && out.Matched != nil {
		done := "rendering next, at the urgent lane"
		if *mode == "wait" {
			done = "pages dropped; cadence refills them"
		}
		fmt.Fprintf(a.stdout, "%s %s: %s, %s\n", *mode, what, plural(*out.Matched, "target"), done)
		return nil
	}
	fmt.Fprintf(a.stdout, "%s %s: %s\n", *mode, what, countsLine(raw))
	return nil
}

// countsLine shows the scalar fields of a JSON object as "matched 12, rushed 10".
func countsLine(raw []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return oneLine(string(raw))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := strings.TrimSpace(string(m[k]))
		if v == "" || v[0] == '{' || v[0] == '[' || v == "null" {
			continue
		}
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+" "+scalarText(m[k]))
	}
	if len(parts) == 0 {
		return "done"
	}
	return strings.Join(parts, ", ")
}

// scalarText is a JSON string or number as text.
func scalarText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}
