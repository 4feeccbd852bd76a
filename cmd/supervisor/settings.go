package main

import (
	"errors"
	"fmt"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/supervise/admin"
	"github.com/freshq/freshq/supervise/pool"
	"github.com/freshq/freshq/supervise/rundir"
)

// The supervisor's pieces take their settings, not the configuration: these narrow it.

// adminSettings are the admin listener's settings under c.
func adminSettings(c *config.Config) admin.Settings {
	h := c.HTTP
	return admin.Settings{Listen: c.Listen, Token: c.Token, Hosts: h.Hosts, MaxConns: h.MaxConns, MaxUnauthenticated: h.MaxUnauthenticated,
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(), ReadTimeout: h.ReadTimeout.D(), WriteTimeout: h.WriteTimeout.D(),
		IdleTimeout: h.IdleTimeout.D(), BulkTimeout: h.BulkTimeout.D(), PageMaxWait: c.Page.MaxWait.D()}
}

// poolSettings are the worker pool's settings under c.
func poolSettings(c *config.Config) pool.Settings {
	s := c.Supervisor
	return pool.Settings{DataDir: c.DataDir, SegmentPath: c.SHM.Path, RestartIntensity: s.RestartIntensity,
		RestartPeriod: s.RestartPeriod.D(), BackoffMin: s.BackoffMin.D(), BackoffMax: s.BackoffMax.D()}
}

// resolvePaths makes data_dir absolute and puts a defaulted segment in the runtime directory rt
// (rundir.ResolvePaths).
func resolvePaths(c *config.Config, rt string) error {
	dataDir, segment, err := rundir.ResolvePaths(c.DataDir, c.SHM.Path, rt)
	if err != nil {
		return err
	}
	c.DataDir, c.SHM.Path = dataDir, segment
	return nil
}

// checkSegmentSpace refuses a segment larger than the free space of the filesystem that will
// hold it (rundir.CheckSegmentSpace), naming the key that sizes it; data is the configuration
// file, for the line.
func checkSegmentSpace(c *config.Config, opts shm.Options, data []byte) error {
	err := rundir.CheckSegmentSpace(c.SHM.Path, opts)
	var ns *rundir.NoSpaceError
	if errors.As(err, &ns) {
		return &config.FieldError{Path: "queue.ready.capacity", Line: config.LineOf(data, "queue.ready.capacity"),
			Msg: fmt.Sprintf("the segment it sizes (with queue.ready.key_capacity, queue.max_leases and workers) is %d bytes, more than the %d bytes free in %s", ns.Size, ns.Free, ns.Dir)}
	}
	return err
}
