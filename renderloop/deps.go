package renderloop

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/shm"
)

// Settings is what a render worker reads of the configuration in force.
type Settings struct {
	Concurrency     int           // render.concurrency: the render loops (read at start)
	Renderer        string        // render.renderer's name, for the log
	ShutdownTimeout time.Duration // supervisor.shutdown_timeout: the stop's drain bound
	// Render is the render settings in force, as NewRenderer and NewChecker take them: a
	// pointer that a reload replaces. A renderer (and a checker) is rebuilt when it changes
	// both as a pointer and in value (reflect.DeepEqual).
	Render any
}

// Deps is what a render worker is made of. Every field is required except Granted.
type Deps struct {
	Index  int    // this worker's index (1..N-1)
	Holder uint64 // this process's lease holder id
	Socket string // worker 0's control socket
	Seg    *shm.Segment
	Worker *shm.Worker // this worker's block of counters
	Log    zerolog.Logger
	Now    func() int64 // Unix ms
	// Settings returns the settings in force; Claim the claim path's.
	Settings func() Settings
	Claim    func() *claim.Settings
	// Granted is the claim path's hook for every lease granted (claim.Options.Granted); nil: none.
	Granted func(key []byte, grantUntil int64)
	// NewRenderer builds the renderer of the render settings r (Settings.Render), counting the
	// chrome renderer's blocks and restarts with hooks.
	NewRenderer func(r any, hooks chrome.Hooks) (render.Renderer, error)
	// NewChecker builds the conditional checker of the render settings r.
	NewChecker func(r any) *render.Checker
}
