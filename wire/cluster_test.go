package wire

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// keysOf is the sorted keys of the JSON object b.
func keysOf(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, " ")
}

// The farm's capacity on the wire: its field names are the API (docs/API.md), so a rename
// fails here. The farm's demand, capacity and projection are named as a node's own capacity
// section's, flattened into the farm object beside the farm's own fields.
func TestFarmCapacityFieldNames(t *testing.T) {
	f := FarmCapacity{Nodes: 1, Reporting: 1, Unknown: []string{"b"}, PerNode: []FarmNode{{ID: "a", Capacity: &NodeCapacity{Classes: []DemandClass{{}}}}}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keysOf(t, b), "capacity demand nodes now_ms per_node projection recount_drift recounted_at_ms reporting unknown"; got != want {
		t.Fatalf("farm keys %q, want %q", got, want)
	}
	var raw struct {
		Capacity json.RawMessage `json:"capacity"`
		PerNode  []struct {
			Capacity json.RawMessage `json:"capacity"`
		} `json:"per_node"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if got, want := keysOf(t, raw.Capacity), "per_second recheck_share renders retry_share window_s"; got != want {
		t.Fatalf("farm capacity keys %q, want %q", got, want)
	}
	node := raw.PerNode[0].Capacity
	if got, want := keysOf(t, node), "at_ms backlog capacity_per_second classes demand_per_second demand_rows recheck_share recount_drift recounted_at_ms renders retry_share shards window_s"; got != want {
		t.Fatalf("node figures keys %q, want %q", got, want)
	}
	var cl struct {
		Classes []json.RawMessage `json:"classes"`
	}
	json.Unmarshal(node, &cl)
	if got, want := keysOf(t, cl.Classes[0]), "lane per_second route rows submitted"; got != want {
		t.Fatalf("class keys %q, want %q", got, want)
	}
}
