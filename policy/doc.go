// Package policy holds freshq's pure decisions: which cadence a row has and where it came from,
// how late it is relative to that cadence, which lane it is in, and which rows of a due set
// make the published ready set, in what order. Nothing here does I/O or reads a clock: every
// function is a function of (row, configuration, now), so the sweep, the claim path, the API's
// explain and the simulator all decide identically, and tests replay exactly.
//
// A key's route is matched in one place (Resolve, the first route in their order whose match
// takes the key's path); a caller that makes several decisions of one key resolves it once and
// hands the KeyRoute to the entry points that take it (CadenceOf, ApplyRoute, CadenceBoundOf).
// Cadence, Apply and CadenceBound resolve it themselves.
//
// A row here is the store's own due row (Row is an alias of store.DueRow): policy imports the
// store's contract, which holds types and codecs and links no engine, so what the store keeps
// and what a decision reads are one type, and no conversion exists that could drop a field.
//
// # Invariants
//
//   - A cadence is always within [MinCadence, MaxCadence], and what Score divides by (a cadence,
//     or a rank interval a write filed) within [MinRankInterval, MaxCadence]: scoring never
//     divides by zero and never yields Inf or NaN. A rank interval orders due rows; it may be
//     shorter than any cadence, and renders nothing sooner.
//   - A row without a finite due time (≤ 0, or at or past MaxDueMs) scores 0: a broken row never
//     sorts to the head.
//   - The carried cadence wins but never exceeds its route's ceiling, so lowering a route takes
//     effect on rows filed under the old one.
//   - Lanes are derived from the row, never stored.
//   - A Selector holds at most K items per lane however many candidates it is offered, and in
//     lanes mode every prefix of its result honours the urgent cap and the lane floors as far as
//     the candidates allow. In lanes mode its Admits also turns away what the interleave could
//     not publish given the rows held (the lane bars); its result is the same as without them,
//     and Admits only ever turns from yes to no for a candidate as offers go on.
package policy
