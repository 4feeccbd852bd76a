package shm

import "github.com/freshq/freshq/shm/hosttable"

// The host table is package hosttable: its layout and atomic access (politeness's decisions
// are package hosts'). These names are the segment's view of it.
type (
	// Hosts is the host table: the hosts paused or throttled for politeness, and the farm
	// words. Worker 0 is its one writer; any process reads it.
	Hosts = hosttable.Table
	// HostState is one host's politeness state, as a slot holds it.
	HostState = hosttable.State
	// HostCause says why a host is not at its defaults.
	HostCause = hosttable.Cause
	// HostStats counts the table's writes and evictions.
	HostStats = hosttable.Stats
)

const (
	HostCauseNone       = hosttable.CauseNone
	HostCauseRetryAfter = hosttable.CauseRetryAfter // a 429, or a 503 with Retry-After, paused it
	HostCauseErrors     = hosttable.CauseErrors     // consecutive 5xx or timeouts lowered its limit

	// MaxHostName is the longest host name the table keeps.
	MaxHostName = hosttable.MaxName
	// DefaultHostCapacity is the default number of host slots.
	DefaultHostCapacity = hosttable.DefaultCapacity
	// FarmWords is the number of farm words (Hosts.LoadFarm).
	FarmWords = hosttable.FarmWords
	// FarmShares is the number of the farm's shares entries (Hosts.LoadFarmShare).
	FarmShares = hosttable.FarmShares
)

// HostHash is the 64-bit hash of a host name, never 0 (0 marks a free slot): KeyHash's.
func HostHash(host []byte) uint64 { return hosttable.Hash(host) }
