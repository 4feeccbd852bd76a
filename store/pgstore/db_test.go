package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// newDatabase creates a fresh, empty database on the test server and returns its DSN; the
// database is dropped at the end of the test. The server is FRESHQ_TEST_PG_DSN (default: the
// throwaway server of a developer machine on the unix socket /tmp/pgdev). Without a server
// the test is skipped, and fails when CI is set: CI must run it.
//
// A stand-in until internal/pgtest (NewDatabase, Main) lands, which replaces it.
func newDatabase(t testing.TB) string {
	t.Helper()
	server := os.Getenv("FRESHQ_TEST_PG_DSN")
	if server == "" {
		server = "host=/tmp/pgdev user=postgres"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no PostgreSQL server at %q (CI is set): %v", server, err)
		}
		t.Skipf("no PostgreSQL server at %q: %v", server, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "freshq_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(t, server, name)
}

// withDatabase is dsn naming database name instead of its own.
func withDatabase(t testing.TB, dsn, name string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("FRESHQ_TEST_PG_DSN: %v", err)
		}
		u.Path = "/" + name
		return u.String()
	}
	return fmt.Sprintf("%s dbname=%s", dsn, name)
}
