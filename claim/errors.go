package claim

import "errors"

// Errors of a claim.
var (
	// ErrQueuedBehindLeases is returned by the index fallback when it granted nothing because
	// every due row its bounded scan read was leased, and more due rows lie past the bound.
	// It is not "nothing to do": work is queued behind rows being rendered, and a claimer
	// should come back soon rather than idle.
	ErrQueuedBehindLeases = errors.New("claim: due rows are queued behind leased ones")
)
