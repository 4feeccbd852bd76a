package pagedigest

import (
	"fmt"
	"regexp"

	"github.com/cespare/xxhash/v2"
)

// DefaultsVersion names the built-in rules; it changes whenever they do.
const DefaultsVersion = 1

// defaults are the finders every Normalizer applies unless told not to (scan.go), in order:
// nonces, CSRF tokens, date-times, asset cache-busting query strings, asset hash segments.
var defaults = []finder{findNonce, findCSRF, findTime, findAssetQuery, findAssetHash}

// Normalizer strips what changes on every load, then digests.
type Normalizer struct {
	defaults bool
	strip    []*regexp.Regexp
}

// New returns a Normalizer with the built-in rules (when withDefaults) and then strip: each
// pattern a regular expression (Go's syntax) whose matches are removed. A pattern that does
// not compile is an error naming its index.
func New(withDefaults bool, strip []string) (*Normalizer, error) {
	n := &Normalizer{defaults: withDefaults}
	for i, p := range strip {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %d: %w", i, err)
		}
		n.strip = append(n.strip, re)
	}
	return n, nil
}

// Normalize returns body with the built-in rules, then the route's patterns, applied in
// order. It never changes body (it may return it). A route's patterns run Go's regexp over
// the whole body, each at a few MB/s: the operator's choice, for the routes that need one.
func (n *Normalizer) Normalize(body []byte) []byte {
	if n.defaults {
		for _, f := range defaults {
			body = rewrite(body, f)
		}
	}
	for _, re := range n.strip {
		body = re.ReplaceAllLiteral(body, nil)
	}
	return body
}

// Digest is the 64-bit digest of body after Normalize; never 0.
func (n *Normalizer) Digest(body []byte) uint64 {
	d := xxhash.Sum64(n.Normalize(body))
	if d == 0 {
		return 1
	}
	return d
}
