//go:build testclock

package main

import (
	"os"

	"github.com/freshq/freshq/store"
)

// floorOnWriterEnv is the test switch of store.Mutations.FloorOnWriter: "1" makes every write
// lower its writer's floor instead of its owner's, the defect a cluster test must catch. Only
// this build, for the end-to-end tests (the tag testclock, testkit/testbin), reads it.
const floorOnWriterEnv = "FRESHQ_TEST_FLOOR_ON_WRITER"

// pgTestSignals are the PostgreSQL store's test signals, as the environment asks for them.
func pgTestSignals() store.TestSignals {
	return store.TestSignals{Mutations: store.Mutations{FloorOnWriter: os.Getenv(floorOnWriterEnv) == "1"}}
}
