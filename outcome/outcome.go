// Package outcome names what happened to one render: the classification a renderer makes and
// the decision layer judges, and the stage the render ended at (Stages). It is a leaf (it
// imports nothing of freshq), so the renderers (render), the decisions (policy), the wire types
// (wire) and the write side (intake) share one type and one list of names instead of passing
// names between them.
//
// Invariants: the zero value is not an outcome; the values, their names and the stages' names
// never change once released, because the names travel (the results batch, JSON results, the
// label values of freshq_render_total{outcome}, a row's last attempt) and the values index
// per-worker counters in shared memory. New outcomes are appended after Failed.
package outcome

import "strconv"

// Outcome classifies what happened. It says nothing of what to do next: policy decides which
// outcomes are transient and which are evidence for sealing a row.
type Outcome uint8

// The outcomes, in their stable order.
const (
	OK           Outcome = iota + 1 // 2xx with a non-empty body and no noindex
	Noindex                         // 2xx, but X-Robots-Tag or a robots meta tag says noindex (or none)
	NotFound                        // 404
	Gone                            // 410
	ClientError                     // any other 4xx, except the retryable ones below
	ServerError                     // 5xx, and the 4xx that mean "try later": 408, 425, 429 (the status tells which)
	Timeout                         // render.timeout passed, or the caller's context ended, at any stage
	Network                         // connection refused or reset, DNS failure, unreachable, connection closed early
	RedirectLoop                    // a redirect back to a URL already visited, or more than max_redirects hops
	TooLarge                        // the body (exec: stdout) is over render.max_body
	Blocked                         // the host (of the URL or of a redirect target) is not in render.domains
	Failed                          // anything else: a bad URL, TLS, an unexpected status, an empty page, exec failing
)

var names = [...]string{
	OK:           "ok",
	Noindex:      "noindex",
	NotFound:     "not_found",
	Gone:         "gone",
	ClientError:  "client_error",
	ServerError:  "server_error",
	Timeout:      "timeout",
	Network:      "network",
	RedirectLoop: "redirect_loop",
	TooLarge:     "too_large",
	Blocked:      "blocked",
	Failed:       "failed",
}

// String returns the outcome's stable lowercase name, or "outcome(N)" for a value that is not
// an outcome.
func (o Outcome) String() string {
	if o.Valid() {
		return names[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Valid reports whether o is one of the outcomes.
func (o Outcome) Valid() bool { return o >= OK && o <= Failed }

// Response reports whether the outcome is a final HTTP response, so that it carries the
// response's status. The others (timeout, network, redirect_loop, too_large, blocked, failed)
// may end before any response.
func (o Outcome) Response() bool { return o >= OK && o <= ServerError }

// Parse returns the outcome named name; ok is false for a name that is no outcome's.
func Parse(name string) (o Outcome, ok bool) {
	for o := OK; o <= Failed; o++ {
		if names[o] == name {
			return o, true
		}
	}
	return 0, false
}

// All returns every outcome in order, e.g. to pre-create metric label values.
func All() []Outcome {
	out := make([]Outcome, 0, int(Failed))
	for o := OK; o <= Failed; o++ {
		out = append(out, o)
	}
	return out
}
