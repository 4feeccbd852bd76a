package main

import (
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/grantlog"
)

// openGrantLog opens the cluster's grant log, a test switch (internal/grantlog): nil, and no
// cost, unless this is a test build (tag testclock) and FRESHQ_TEST_GRANT_LOG is set.
func openGrantLog(e *env, cfg *config.Config) *grantlog.Log {
	gl, err := grantlog.Open(cfg.NodeID(), cfg.Store.Postgres.Shards)
	if err != nil {
		e.log.Error().Err(err).Msg("grant log")
	}
	return gl
}

// grantHook is the claim path's Granted hook for gl: nil when there is no log.
func grantHook(gl *grantlog.Log) func([]byte, int64) {
	if gl == nil {
		return nil
	}
	return gl.Grant
}
