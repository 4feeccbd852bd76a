// Package pgtest gives a test a throwaway PostgreSQL database: NewDatabase creates a fresh,
// empty database for the calling test and drops it when the test ends.
//
// # Where the server comes from
//
// If FRESHQ_TEST_PG_DSN is set, its server is used: the DSN connects as a role that may create
// and drop databases, and a DSN that does not connect fails the test (whoever set it wanted
// PostgreSQL). `make test` starts one cluster for the whole run and sets it (see
// scripts/pg-test.sh), so the test binaries share one server.
//
// Otherwise the first NewDatabase of a test binary starts a cluster of its own: the PostgreSQL
// binaries are found through FRESHQ_TEST_PG_BINDIR, `pg_config --bindir`, or the newest
// /usr/lib/postgresql/*/bin; initdb writes a new cluster into a fresh temporary directory
// (owned by the unprivileged user nobody when the tests run as root, because PostgreSQL
// refuses to run as root), and the server listens only on a unix socket in that directory
// (listen_addresses is empty, so it opens no TCP port), with fsync and full_page_writes off:
// a crash of the machine loses a throwaway cluster, which costs nothing. synchronous_commit is
// left on, as in production, so a commit still waits for its WAL write; a test that wants it off
// sets it on its own connections (DSN option `options='-c synchronous_commit=off'`).
//
// # What a caller may rely on
//
//   - Each NewDatabase returns the DSN of a database no other call returned, empty (no table
//     in schema public), dropped by t.Cleanup even while connections to it are still open.
//   - With no server to be had, NewDatabase skips the test with the reason, except when the
//     environment variable CI is set: then it fails the test, so that CI never passes by
//     running nothing.
//   - A cluster the binary started is stopped and its directory removed by Main (or Stop).
//     A binary killed before that does not leave its server running: the postmaster gets
//     SIGQUIT when the binary dies (Pdeathsig), and the next binary removes the directory it
//     left. Every cluster has a directory and socket of its own, so runs never collide.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables the package reads.
const (
	// EnvDSN names a server to create the test databases on, instead of starting one.
	EnvDSN = "FRESHQ_TEST_PG_DSN"
	// EnvBinDir names the directory of initdb and postgres, instead of searching for them.
	EnvBinDir = "FRESHQ_TEST_PG_BINDIR"
	// envCI is set by CI, where a test that needs PostgreSQL must fail rather than skip.
	envCI = "CI"
)

// adminTimeout bounds each administrative statement (connect, CREATE and DROP DATABASE).
const adminTimeout = 30 * time.Second

var (
	serverOnce sync.Once
	serverDSN  string
	serverErr  error
	// started is the cluster this binary started, or nil when it uses EnvDSN's server or has
	// not needed one yet. It is set at most once, inside serverOnce.
	started *cluster

	dbSeq atomic.Uint64
)

// server returns the DSN of the server to create databases on, starting a cluster the first
// time it is needed when EnvDSN is not set.
func server() (string, error) {
	serverOnce.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			serverDSN = dsn
			return
		}
		c, err := startCluster()
		if err != nil {
			serverErr = err
			return
		}
		started, serverDSN = c, c.dsn()
	})
	return serverDSN, serverErr
}

// NewDatabase creates an empty database for t on the test server and returns its DSN, in the
// form (keyword/value or URL) of the server's DSN. The database is dropped when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin, err := server()
	if err != nil {
		if os.Getenv(envCI) != "" {
			t.Fatalf("pgtest: no PostgreSQL, and CI is set: %v", err)
		}
		t.Skipf("pgtest: no PostgreSQL (set %s, or install PostgreSQL): %v", EnvDSN, err)
	}
	name, err := databaseName()
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDSN, err)
	}
	if err := adminExec(admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// FORCE ends the sessions a test left open, so a leaked pool cannot keep the database.
		if err := adminExec(admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return dsn
}

// databaseName is unique across processes (pid) and across machines sharing one server (the
// random part).
func databaseName() (string, error) {
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("pgtest: naming a database: %w", err)
	}
	return fmt.Sprintf("freshq_test_%d_%d_%s", os.Getpid(), dbSeq.Add(1), hex.EncodeToString(r[:])), nil
}

// adminExec runs one statement on its own connection to the server's DSN.
func adminExec(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dsn connecting to database name instead of its own. A URL gets name as
// its path; a keyword/value DSN gets a dbname keyword appended, which overrides an earlier one
// (both libpq and pgx read keywords left to right, the last one winning).
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the DSN: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		q := u.Query()
		if q.Has("dbname") {
			q.Del("dbname")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " dbname='" + name + "'", nil
}

// Main is a TestMain for packages that use NewDatabase: it runs the tests, stops the cluster
// the binary started (if any), and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the cluster this binary started, if any, and removes its directory. It is for a
// TestMain that cannot call Main because it already wraps m.Run in another helper; call it
// after m.Run has returned. Later calls do nothing.
func Stop() {
	serverOnce.Do(func() { serverErr = fmt.Errorf("pgtest: stopped") })
	if started != nil {
		if err := started.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
		started = nil
	}
}
