//go:build !race

package api

// raceEnabled: the race detector's instrumentation changes what encoding/json allocates, so
// allocation bounds are looser under it.
const raceEnabled = false
