package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/wire"
)

// TestDecodeJSONNamesTheFieldAndRefusesTrailingData pins what every small JSON endpoint
// (claim, prioritize, discover, leases, sitemaps by URL) answers for a malformed body: a 400
// naming the field when there is one, and nothing taken from a body with more than one value.
func TestDecodeJSONNamesTheFieldAndRefusesTrailingData(t *testing.T) {
	type req struct {
		Mode  string `json:"mode"`
		Limit int    `json:"limit"`
	}
	cases := []struct {
		body      string
		code      int
		field     string
		errSubstr string
	}{
		{`{"mode":"rush","limit":3}`, http.StatusOK, "", ""},
		{"{\"mode\":\"rush\"}\n  \n", http.StatusOK, "", ""},
		{`{"mode":"rush","limt":3}`, http.StatusBadRequest, "limt", "unknown field"},
		{`{"mode":"rush","limit":"3"}`, http.StatusBadRequest, "limit", "cannot unmarshal"},
		{`{"mode":"rush"} {"mode":"wait"}`, http.StatusBadRequest, "", "data after the JSON object"},
		{`{"mode":"rush"}]`, http.StatusBadRequest, "", "bad JSON"},
		{`{"mode":"rush"`, http.StatusBadRequest, "", "bad JSON"},
		{`{"mode":"` + strings.Repeat("x", 2000) + `"}`, http.StatusRequestEntityTooLarge, "", "body over"},
		{`{"mode":"rush"}` + strings.Repeat(" ", 2000), http.StatusRequestEntityTooLarge, "", "body over"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
		var v req
		err := decodeJSON(w, r, &v, 1024)
		if (err == nil) != (c.code == http.StatusOK) {
			t.Errorf("%.40q: decodeJSON = %v, want code %d", c.body, err, c.code)
			continue
		}
		if err == nil {
			if v.Mode != "rush" {
				t.Errorf("%.40q: decoded %+v", c.body, v)
			}
			continue
		}
		fail(w, err)
		if w.Code != c.code {
			t.Errorf("%.40q: status %d, want %d", c.body, w.Code, c.code)
		}
		var e wire.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatalf("%.40q: error body %q: %v", c.body, w.Body, err)
		}
		if e.Field != c.field || !strings.Contains(e.Error, c.errSubstr) {
			t.Errorf("%.40q: error %+v, want field %q and %q in the message", c.body, e, c.field, c.errSubstr)
		}
	}
}
