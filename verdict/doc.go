// Package verdict judges a render that completed before it is applied: good, or suspect with
// named reasons. A render that returns 200 can still have lost the page (an error state, a
// shell whose script threw, data still loading, a maintenance page, an old script kept by the
// browser's cache); the verdict is what keeps such a render from replacing a good page.
//
// Evidence comes from two places: what the renderer saw (render.Signals: uncaught exceptions,
// the page's own failed or still-pending data requests) and a comparison with the last good
// render's Landmarks (visible text collapsed, title, h1, meta description or canonical link
// lost) and with the route's Expect (a selector or text every good page of the route has).
//
// The applier calls InspectExpect once per render on the decoded body: it streams the body
// through html.Tokenizer, builds no tree, and returns the landmarks (stored with a good render,
// to judge the next) and whether the route's Expect is there; then Judge.
//
// Invariants:
//   - Inspect, InspectExpect, Found and Judge never panic, whatever the bytes; they read their
//     inputs and change none of them.
//   - Inspect's work is linear in the body and its memory a few words plus the tokenizer's
//     buffer (the longest token); an expected text adds a fixed window (32 KiB plus the text).
//     Only a route with an expect selector has its renders parsed into a tree (Expect says
//     what that costs); its selectors are limited to those matched in one walk of the tree,
//     one compound test per element and compound.
//   - Inspect of the same bytes gives the same Landmarks, so a render identical to the last
//     good one has its landmarks and is never suspect for a landmark or a collapse.
//   - A render whose content is the last good render's (Render.Unchanged) is never suspect.
//   - A render with no last good render to compare with is judged on its signals and Expect
//     only; the caller stores it anyway (nothing better exists) and marks it.
//   - Reasons have stable names (Reasons.Names), used in metrics labels, logs and the API.
//
// The package decides nothing about storing: intake applies a suspect as a transient failure,
// keeps the last good page, and accepts the suspect's content once renders agree (Agreement).
package verdict
