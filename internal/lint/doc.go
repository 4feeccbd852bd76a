// Package lint holds the rules about the code itself that a test can keep, so that they fail the
// build rather than wait for a reviewer: which of freshq's packages each package may import.
//
// The table of allowed imports is in imports_test.go. Its rules, which the table encodes:
//   - imports point down: binaries (cmd/) over worker 0's services (api, intake) over the
//     machinery (claim, sweep, store, shm, policy, render) over the leaves (outcome, cachekey,
//     wire, internal/...);
//   - shm, outcome and cachekey import nothing of freshq; store only its build switch; wire only
//     outcome, so that freshqctl links no store;
//   - no production package imports a test helper (internal/qtest, internal/pgtest, testdns,
//     storetest, clustertest);
//   - only config, the assembly packages (assemble, assemble/node), the binaries, the
//     simulator and its reports, and internal/qtest depend on config, even transitively
//     (config_test.go): every other package takes its settings as options.
//
// A new import is a decision about the architecture: it changes the table, and the generated
// list in docs/ARCHITECTURE.md with it (go test ./internal/lint/ -rewrite).
package lint
