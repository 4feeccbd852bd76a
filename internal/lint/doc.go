// Package lint holds the rules about the code itself that a test can keep, so that they fail the
// build rather than wait for a reviewer: which of freshq's packages each package may import.
//
// The table of allowed imports is in imports_test.go. Its rules, which the table encodes:
//   - imports point down: binaries (cmd/) over worker 0's services (api, intake) over the
//     machinery (claim, sweep, store, shm, policy, render) over the leaves (outcome, cachekey,
//     wire, internal/...);
//   - outcome, cachekey and store (the store's contract) import nothing of freshq, and shm only
//     its own host table's layout (shm/hosttable, which imports nothing); wire only outcome, so that freshqctl links no store; policy only cachekey, outcome and store,
//     whose row type it decides on (leafRules in imports_test.go holds this sentence to the
//     table, so it cannot drift from it);
//   - the store's contract links no storage engine: the engines (store/badgerstore on Badger,
//     store/pgstore on pgx) import it, never the other way, and neither does policy, wire or
//     freshqctl link one (TestContractLinksNoEngine, over go list -deps);
//   - no production package imports a test helper (testkit/*,
//     storetest, clustertest);
//   - only config, the assembly packages (assemble, assemble/settings), the binaries, the
//     simulator and its reports, and testkit/qtest depend on config, even transitively
//     (config_test.go): every other package takes its settings as options;
//   - go.mod is what `go mod tidy` would write (tidy_test.go): a direct import is listed as
//     direct, and nothing is required that nothing imports.
//
// A new import is a decision about the architecture: it changes the table, and the generated
// blocks of docs/ARCHITECTURE.md with it (archdoc_test.go; go test ./internal/lint/ -rewrite
// writes them, go test ./internal/lint/ fails while they differ): the package table, one line
// per package with its layer, its imports and the first sentence of its doc comment, and the
// layers, each package drawn one layer above the highest package it imports. They work for any
// table, so a merge that adds or moves packages only reruns -rewrite. The same test keeps
// docs/ARCHITECTURE.md a map (at most 250 lines of at most 400 characters): the detail is in
// each package's doc comment.
//
// One rule is about a generated document: docs/BENCHMARKS.md ends with the sections measured by
// hand (scripts/bench/by-hand), as scripts/bench.sh copies them, so a figure edited into the
// document alone cannot be lost at the next `make bench` (benchmarks_test.go).
package lint
