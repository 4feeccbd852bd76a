//go:build invariants || race

package store

// invariants is true in builds tagged invariants and in race builds (every test run with
// -race): expensive self-checks then run, and cost nothing in production (Pebble's habit).
const invariants = true
