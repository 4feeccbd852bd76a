// Package assemble builds a node's parts from its configuration: it is where the configuration
// is read and narrowed into each package's own options, so that the packages that do the work
// (render, render/chrome, sitemap, ...) import no configuration and a test of one of them states
// every value it runs with.
//
// Invariant: a value reaches a domain package only through the options built here (or by the
// binaries in cmd/), never by that package reading the configuration itself; internal/lint's
// table of allowed imports holds every domain package to it as it is narrowed.
package assemble
