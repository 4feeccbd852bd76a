// Package fuzz holds the go test -fuzz targets over freshq's shared-memory protocol, every
// binary decoder, worker 0's HTTP endpoints (FuzzAPIEndpoints drives its whole mux with
// arbitrary requests: no panic, every error JSON, a refusal writes nothing), and the render
// verdict's reading of any page (FuzzInspect, FuzzJudgePair). Each target runs
// for a bounded time in `make test` (see the Makefile's fuzz rule); a failing input is written
// under testdata/fuzz and becomes a permanent regression case once committed.
//
// It also holds the interleaving models and history tests of freshq's concurrency: the shm
// model (shm_model_test.go, driving the real protocol one atomic step at a time under the
// shmstep tag) and TestFenceHistory/FuzzFenceHistory (fence_history_test.go), which run claims,
// results, duplicate and lapsed deliveries, deletes, upserts, rushes and waits concurrently
// against worker 0's real handlers, record a history, and check it: at most one result per
// grant, none on a lease no longer held, no delete or rush undone by an older render, F1 and
// the due index intact.
//
// Seeds follow the NATS parser's habit: besides well-formed inputs, every corpus is seeded with
// partially written and truncated encodings, because those are what a crash leaves behind.
package fuzz
