package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// PathCapacity is worker 0's capacity view on the control socket: the supervisor reads it at
// each scrape for the capacity metrics.
const PathCapacity = "/internal/capacity"

// MaxCapacityBody bounds the capacity view a client reads: a few maps keyed by lane and route
// name (route names are bounded by the configuration).
const MaxCapacityBody = 1 << 20

// Capacity is whether the farm keeps up: the capacity section of GET /v1/queue and the body of
// GET /internal/capacity. Rates are renders per second.
type Capacity struct {
	NowMs int64 `json:"now_ms"`
	// Demand is Σ 1/cadence over the node's live rows (sealed targets ask for none).
	Demand struct {
		Total   float64            `json:"total"`
		Rows    int64              `json:"rows"`
		ByLane  map[string]float64 `json:"by_lane"`
		ByRoute map[string]float64 `json:"by_route"` // "" is the rows no route matches
	} `json:"demand"`
	// Capacity is the renders completed per second over the meter's window, and the shares of
	// them that were retries of failing rows and rechecks of sealed targets; Renders counts
	// the renders in the window.
	Capacity struct {
		PerSecond    float64 `json:"per_second"`
		Renders      int64   `json:"renders"`
		RetryShare   float64 `json:"retry_share"`
		RecheckShare float64 `json:"recheck_share"`
		WindowS      float64 `json:"window_s"`
	} `json:"capacity"`
	// Projection is the steady state under the current policy: age ÷ cadence per lane and
	// route at render, the hourly surplus (negative: falling behind), the time to drain the
	// backlog (-1: never) and the verdict.
	Projection struct {
		ByLane          map[string]float64 `json:"lateness_by_lane"`
		ByRoute         map[string]float64 `json:"lateness_by_route"`
		Utilisation     float64            `json:"utilisation"`
		SurplusPerHour  float64            `json:"surplus_per_hour"`
		DrainSeconds    float64            `json:"drain_seconds"`
		Backlog         uint64             `json:"backlog"`
		Verdict         string             `json:"verdict"`
		CadenceCapacity float64            `json:"cadence_capacity"`
	} `json:"projection"`
	// RecountedAtMs is when demand was last recounted exactly (0: not yet), and RecountDrift
	// how far the incremental figure had drifted from it, in renders per second.
	RecountedAtMs int64   `json:"recounted_at_ms"`
	RecountDrift  float64 `json:"recount_drift"`
}

// DecodeCapacity reads a capacity view, at most MaxCapacityBody bytes of it.
func DecodeCapacity(r io.Reader) (Capacity, error) {
	var c Capacity
	dec := json.NewDecoder(io.LimitReader(r, MaxCapacityBody))
	if err := dec.Decode(&c); err != nil {
		return Capacity{}, fmt.Errorf("capacity view: %w", err)
	}
	return c, nil
}

// Capacity reads worker 0's capacity view.
func (c *Client) Capacity(ctx context.Context) (Capacity, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker0"+PathCapacity, nil)
	if err != nil {
		return Capacity{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Capacity{}, fmt.Errorf("%w: %s: %v", ErrUnavailable, PathCapacity, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Capacity{}, &StatusError{Path: PathCapacity, Code: resp.StatusCode, Msg: string(msg)}
	}
	v, err := DecodeCapacity(resp.Body)
	if err != nil {
		return Capacity{}, fmt.Errorf("%w: %s: %v", ErrUnavailable, PathCapacity, err)
	}
	return v, nil
}

// PathPlan is the what-if endpoint: POST a configuration file, get the demand it implies.
const PathPlan = "/v1/plan"

// MaxPlanBody bounds POST /v1/plan's body: a configuration file.
const MaxPlanBody = 1 << 20

// Plan answers POST /v1/plan: the demand of the current rows under the current configuration
// and under the proposed one, each projected at the current capacity, and what changed, one
// line each ("routes: /c/ 24h → 6h: demand +38 %, projected catalog lateness 1.3× → 1.8×").
type Plan struct {
	CapacityPerSecond float64  `json:"capacity_per_second"`
	Current           PlanSide `json:"current"`
	Proposed          PlanSide `json:"proposed"`
	Lines             []string `json:"lines"`
}

// PlanSide is one configuration's demand and projection over the current rows.
type PlanSide struct {
	Demand          float64            `json:"demand"`
	Rows            int64              `json:"rows"`
	DemandByLane    map[string]float64 `json:"demand_by_lane"`
	DemandByRoute   map[string]float64 `json:"demand_by_route"`
	LatenessByLane  map[string]float64 `json:"lateness_by_lane"`
	LatenessByRoute map[string]float64 `json:"lateness_by_route"`
	Verdict         string             `json:"verdict"`
}
