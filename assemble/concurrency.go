package assemble

import (
	"runtime"
	"sync"

	"github.com/freshq/freshq/config"
)

// cores is the CPUs this process may use, read once: runtime.GOMAXPROCS, which Go sets from the
// machine's CPUs, the process's affinity and the cgroup's CPU quota (or GOMAXPROCS in the
// environment). The runtime may change it later when the quota changes; render.concurrency is
// read at start, and every reader in a process must see the one figure the render loops were
// started with.
var cores = sync.OnceValue(func() int { return runtime.GOMAXPROCS(0) })

// Cores is the CPU count render.concurrency is derived from in this process.
func Cores() int { return cores() }

// RenderConcurrency is a render worker's renders in flight under cfg on this process's cores
// (config.Config.RenderConcurrency says how it is derived when render.concurrency is unset).
func RenderConcurrency(cfg *config.Config) int { return cfg.RenderConcurrency(Cores()) }
