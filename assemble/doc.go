// Package assemble builds a node's parts from its configuration: it is where the configuration
// is read and narrowed into each package's own options (policy.Options, hosts.Limits, the
// hosts' farm of a cluster node, render.Options, chrome.Options), so that the packages that do
// the work import no configuration and a test of one of them states every value it runs with.
// The services' settings (claim, sweep, intake, serve) are narrowed by its sibling
// assemble/settings, kept apart so that the test helper testkit/qtest, which compiles a test's
// policy here, does not import the services whose tests use it; the store engine is opened by
// assemble/engine, kept apart so that what imports this package links no engine.
//
// Invariant: a value reaches a domain package only through the options built here (or by the
// binaries in cmd/), never by that package reading the configuration itself; internal/lint
// holds every domain package to it (TestOnlyAssemblersDependOnConfig: none depends on config,
// directly or transitively).
package assemble
