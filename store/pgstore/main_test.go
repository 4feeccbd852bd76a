package pgstore_test

import (
	"testing"

	"github.com/freshq/freshq/testkit/pgtest"
)

// TestMain stops the PostgreSQL cluster the binary started for its tests, if it started one
// (testkit/pgtest: without FRESHQ_TEST_PG_DSN, the first test that needs a database starts it).
func TestMain(m *testing.M) { pgtest.Main(m) }
