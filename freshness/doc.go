// Package freshness holds freshq's decisions about freshness of content, as opposed to age: how
// often a page really changes (estimated from renders that did or did not find it changed), how
// often crawlers ask for it (a decayed request counter), how many stale serves rendering it now
// would prevent, and, for a known set of pages, the render rates that serve the fewest stale
// requests under a render budget (the oracle the simulator measures the learning policy
// against).
//
// The model is the one the crawling literature optimises (Azar et al., PNAS 2018; Kolobov et
// al., NeurIPS 2019): page i changes as a Poisson process at rate λᵢ and is requested at rate
// μᵢ; a request is served stale when the page changed since its last render. Rendered every τ,
// the page serves μ·(τ − (1−e^{−λτ})/λ) stale requests per cycle, and the rates that minimise
// the stale share under Σ 1/τᵢ = budget make every page's marginal value
// h(τ) = μ·((1−e^{−λτ})/λ − τe^{−λτ}) equal to one common multiplier ν: render a page when its
// h crosses ν. Score is that h, within the operator's bounds.
//
// Nothing here does I/O or reads a clock: time comes in as milliseconds since the epoch, and
// every function is a pure function of its arguments, so the sweep, the simulator and the
// tests decide identically. Rates are per hour, intervals in milliseconds.
//
// # Invariants
//
//   - Every estimate, rate and score is finite and not negative, whatever the inputs (a
//     negative interval, NaN or Inf counts as nothing observed).
//   - History and Counter are a few numbers kept with a row and updated in O(1); the exact
//     estimator over a whole history (Exact) exists to measure the compact one against.
//   - Score is 0 before the floor (Bounds.MinIntervalMs), ranks every row at or past its ceiling
//     (Bounds.MaxIntervalMs, less the lead Bounds.LeadMs) above every row inside it, and between
//     them is increasing in the time since the last render.
package freshness
