// Package rows converts the store's schedule rows into the rows policy decides on. It is the one
// place that knows both shapes, so a new lane input or projection field is carried through to
// every decision (sweep, index fallback, explain, pages) or to none: a conversion copied into
// each caller could forget it in one and silently put rows in the wrong lane.
package rows

import (
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Policy is the policy view of the schedule row of key. key is referenced, not copied.
func Policy(key []byte, r store.Row) policy.Row {
	return policy.Row{
		Key:                 key,
		DueAtMs:             r.DueAtMs,
		Submitted:           r.Submitted,
		EffectiveIntervalMs: r.EffectiveIntervalMs,
		StoredIntervalMs:    r.StoredIntervalMs,
		Urgent:              r.Urgent,
		NeverRendered:       r.NeverRendered,
		Failing:             r.Failing,
	}
}
