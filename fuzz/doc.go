// Package fuzz holds the go test -fuzz targets over freshq's shared-memory protocol, every
// binary decoder, and worker 0's HTTP endpoints (FuzzAPIEndpoints drives its whole mux with
// arbitrary requests: no panic, every error JSON, a refusal writes nothing). Each target runs
// for a bounded time in `make test` (see the Makefile's fuzz rule); a failing input is written
// under testdata/fuzz and becomes a permanent regression case once committed.
//
// Seeds follow the NATS parser's habit: besides well-formed inputs, every corpus is seeded with
// partially written and truncated encodings, because those are what a crash leaves behind.
package fuzz
