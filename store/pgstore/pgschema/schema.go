package pgschema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrTooNew is returned by Migrate (and so by pgstore.Open) for a database whose schema a newer
// freshq migrated: this binary does not know what the newer version changed, and must not
// write to it.
var ErrTooNew = errors.New("pgstore: the database schema is newer than this binary knows")

// migration is one file of migrations/: its version is the number its name starts with.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("pgstore: migration %s: name must start with its version number", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migration %s: versions must be 1, 2, 3, … without gaps", m.name)
		}
	}
	return ms, nil
}

// Version is the newest schema this binary knows.
func Version() int {
	ms, _ := migrations()
	return len(ms)
}

// Migrate brings the database to Version, each migration in its own transaction, and
// returns the shard count. Two nodes starting at once are serialised by a table lock on
// freshq_meta (plain SQL, no advisory lock); the second finds the work done.
func Migrate(ctx context.Context, pool *pgxpool.Pool, shards int) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	if err := createMeta(ctx, pool); err != nil {
		return 0, err
	}
	for {
		done, err := migrateOne(ctx, pool, ms, shards)
		if err != nil {
			return 0, err
		}
		if done {
			break
		}
	}
	var s int64
	if err := pool.QueryRow(ctx, `SELECT value FROM freshq_meta WHERE name = 'shards'`).Scan(&s); err != nil {
		return 0, fmt.Errorf("pgstore: read the shard count: %w", err)
	}
	return int(s), nil
}

// createMeta creates freshq_meta unless it exists. Two sessions running CREATE TABLE IF NOT
// EXISTS at once can both find no table, and the second then fails on the catalog's unique
// index (23505), as a duplicate type (42710: the table's row type) or as a duplicate table
// (42P07) once the first commits: the table exists then,
// which is all this needs, and the statement run again is a no-op.
func createMeta(ctx context.Context, pool *pgxpool.Pool) error {
	for attempt := 1; ; attempt++ {
		_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS freshq_meta (name text PRIMARY KEY, value bigint NOT NULL)`)
		var pgErr *pgconn.PgError
		if err != nil && attempt < 3 && errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42710" || pgErr.Code == "42P07") {
			continue
		}
		if err != nil {
			return fmt.Errorf("pgstore: create freshq_meta: %w", err)
		}
		return nil
	}
}

// migrateOne applies the next migration, if any, and reports whether the schema is current.
func migrateOne(ctx context.Context, pool *pgxpool.Pool, ms []migration, shards int) (done bool, err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `LOCK TABLE freshq_meta IN EXCLUSIVE MODE`); err != nil {
		return false, fmt.Errorf("pgstore: migrate: %w", err)
	}
	var cur int64
	err = tx.QueryRow(ctx, `SELECT value FROM freshq_meta WHERE name = 'schema_version'`).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		cur = 0
	} else if err != nil {
		return false, fmt.Errorf("pgstore: read the schema version: %w", err)
	}
	switch {
	case cur > int64(len(ms)):
		return false, fmt.Errorf("%w: version %d, this binary knows up to %d", ErrTooNew, cur, len(ms))
	case cur == int64(len(ms)):
		return true, nil
	}
	m := ms[cur]
	sql := m.sql
	if m.version == 1 {
		// The first migration creates freshq_meta itself; it exists already (created above so
		// that it can be locked), so its CREATE is skipped.
		sql = strings.Replace(sql, "CREATE TABLE freshq_meta", "CREATE TABLE IF NOT EXISTS freshq_meta", 1)
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return false, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
	}
	if m.version == 1 {
		if _, err := tx.Exec(ctx, `INSERT INTO freshq_meta (name, value) VALUES ('shards', $1)`, shards); err != nil {
			return false, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO freshq_floor (shard, floor_ms) SELECT s, 0 FROM generate_series(0, $1::int - 1) s`, shards); err != nil {
			return false, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO freshq_meta (name, value) VALUES ('schema_version', $1)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, m.version); err != nil {
		return false, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
	}
	return false, nil
}
