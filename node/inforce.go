package node

import (
	"github.com/freshq/freshq/assemble/settings"
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

// InForce is the configuration in force and every service's settings narrowed from it
// (assemble/settings), swapped whole by a reload: a service reads its settings through one of
// the accessors below once per request, sweep or claim, so its policy and its settings always
// come from the same file.
type InForce struct {
	cfg *config.Config
	set *settings.Node
}

// NewInForce narrows cfg (validated) into the settings a reload puts in force.
func NewInForce(cfg *config.Config) (*InForce, error) {
	n, err := settings.New(cfg)
	if err != nil {
		return nil, err
	}
	return &InForce{cfg: cfg, set: n}, nil
}

// Config is the configuration in force, for what the binary itself reads (paths, the
// renderer, the supervisor's bounds).
func (f *InForce) Config() *config.Config { return f.cfg }

// Claim is the claim path's settings in force.
func (f *InForce) Claim() *claim.Settings { return &f.set.Claim }

func (e *env) policy() *policy.Policy           { return e.cur.Load().set.Policy }
func (e *env) claimSettings() *claim.Settings   { return &e.cur.Load().set.Claim }
func (e *env) sweepSettings() *sweep.Settings   { return &e.cur.Load().set.Sweep }
func (e *env) intakeSettings() *intake.Settings { return &e.cur.Load().set.Intake }
func (e *env) serveSettings() *serve.Settings   { return &e.cur.Load().set.Serve }
func (e *env) hostLimits() *hosts.Limits        { return &e.cur.Load().set.Intake.Hosts }

func (e *env) sitemapSettings() *sitemapruns.Settings { return &e.cur.Load().set.Sitemap }
func (e *env) missesSettings() *misses.Settings       { return &e.cur.Load().set.Misses }
