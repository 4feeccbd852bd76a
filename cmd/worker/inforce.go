package main

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/serve"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/sweep"
)

// inForce is the configuration in force and every service's settings narrowed from it
// (assemble/node), swapped whole by a reload: a service reads its settings through one of the
// env's accessors below once per request, sweep or claim, so its policy and its settings
// always come from the same file.
type inForce struct {
	cfg  *config.Config
	node *node.Node
}

// Config is the configuration in force, for what the binary itself reads (paths, the
// renderer, the supervisor's bounds).
func (f *inForce) Config() *config.Config { return f.cfg }

// setConfig narrows cfg (validated) and puts it in force.
func (e *env) setConfig(cfg *config.Config) error {
	n, err := node.New(cfg)
	if err != nil {
		return err
	}
	e.cur.Store(&inForce{cfg: cfg, node: n})
	return nil
}

func (e *env) policy() *policy.Policy           { return e.cur.Load().node.Policy }
func (e *env) claimSettings() *claim.Settings   { return &e.cur.Load().node.Claim }
func (e *env) sweepSettings() *sweep.Settings   { return &e.cur.Load().node.Sweep }
func (e *env) intakeSettings() *intake.Settings { return &e.cur.Load().node.Intake }
func (e *env) sitemapSettings() *sitemapruns.Settings {
	return &e.cur.Load().node.Sitemap
}
func (e *env) missesSettings() *misses.Settings { return &e.cur.Load().node.Misses }
func (e *env) serveSettings() *serve.Settings   { return &e.cur.Load().node.Serve }
func (e *env) hostLimits() *hosts.Limits        { return &e.cur.Load().node.Intake.Hosts }
