package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/freshq/freshq/wire"
)

// A job's Submitted travels as "from_sitemap", the name remote renderers read: renaming the
// field must not rename the JSON.
func TestJobSubmittedKeepsItsJSONName(t *testing.T) {
	b, err := json.Marshal(wire.Job{Submitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"from_sitemap":true`) {
		t.Fatalf("job JSON %s has no \"from_sitemap\":true", b)
	}
	var j wire.Job
	if err := json.Unmarshal([]byte(`{"from_sitemap": true}`), &j); err != nil || !j.Submitted {
		t.Fatalf("decoding from_sitemap: %+v, %v", j, err)
	}
}
