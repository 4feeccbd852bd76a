package assemble

import (
	"fmt"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
)

// PolicyOptions narrows the configuration to what policy decides with: the cadences (the
// default, the routes' intervals and swr windows), the ready set's boost and lane shares, the
// cache-key rules, the demand ladder, the retry backoff and the seals. cfg must have passed
// validation (config.Load and config.Parse validate): the key rules of a valid configuration
// always compile, and an error here is returned, not panicked.
func PolicyOptions(cfg *config.Config) (policy.Options, error) {
	keys, err := cfg.KeyRules()
	if err != nil {
		return policy.Options{}, fmt.Errorf("assemble: key rules: %w", err)
	}
	q, r := cfg.Queue, cfg.Render
	routes := make([]policy.Route, len(cfg.Routes))
	for i, rt := range cfg.Routes {
		m := policy.MatchExact
		switch rt.Match {
		case "prefix":
			m = policy.MatchPrefix
		case "contains":
			m = policy.MatchContains
		}
		routes[i] = policy.Route{Name: rt.Name, Match: m, Path: rt.Path, Interval: rt.Interval.D(), SWR: rt.SWR.D()}
	}
	ladder := make([]time.Duration, len(r.Demand.Ladder))
	for i, d := range r.Demand.Ladder {
		ladder[i] = d.D()
	}
	fr := r.FailureRetry
	return policy.Options{
		DefaultInterval: r.DefaultInterval.D(),
		DefaultSWR:      cfg.Page.SWRTTL.D(),
		Routes:          routes,
		SubmittedBoost:  q.Ready.SubmittedBoost,
		Shares: policy.Shares{
			UrgentMax:     q.Lanes.UrgentMaxShare,
			DiscoveredMin: *q.Lanes.MinShare.Discovered,
			ColdMin:       *q.Lanes.MinShare.Cold,
		},
		Keys:   keys,
		Ladder: ladder,
		Retry: policy.Retry{FastRetries: *fr.FastRetries, FastDelay: fr.FastDelay.D(), Factor: fr.Factor,
			MaxBackoff: fr.MaxBackoff.D(), NonSubmittedPenalty: fr.NonSitemapPenalty},
		Gone:    policy.Seal{Strikes: r.Suppression.Gone.Strikes, Recheck: r.Suppression.Gone.Recheck.D()},
		Noindex: policy.Seal{Strikes: r.Suppression.Noindex.Strikes, Recheck: r.Suppression.Noindex.Recheck.D()},
	}, nil
}

// Policy is the policy cfg configures: policy.New of PolicyOptions.
func Policy(cfg *config.Config) (*policy.Policy, error) {
	o, err := PolicyOptions(cfg)
	if err != nil {
		return nil, err
	}
	return policy.New(o), nil
}
