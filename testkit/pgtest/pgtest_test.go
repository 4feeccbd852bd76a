package pgtest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// helperEnv makes the test binary, run again as a subprocess, act as one of the helpers below
// instead of running the suite.
const helperEnv = "PGTEST_HELPER"

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %q: %v", dsn, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	admin, err := server()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := connect(t, admin).QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Two databases of one test are distinct and empty: a table made in one is not in the other,
// and each is dropped when its test ends.
func TestNewDatabaseIsolatedAndDropped(t *testing.T) {
	var names [2]string
	var open []*pgx.Conn // left open past the subtest's end, as a leaked pool would be
	defer func() {
		for _, c := range open {
			c.Close(context.Background())
		}
	}()
	t.Run("use", func(t *testing.T) {
		a, b := NewDatabase(t), NewDatabase(t)
		if a == b {
			t.Fatalf("two calls returned one DSN %q", a)
		}
		ctx := context.Background()
		for _, dsn := range []string{a, b} {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, c)
		}
		ca, cb := open[0], open[1]
		for i, c := range []*pgx.Conn{ca, cb} {
			if err := c.QueryRow(ctx, "SELECT current_database()").Scan(&names[i]); err != nil {
				t.Fatal(err)
			}
			var tables int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("database %s is not empty: %d tables", names[i], tables)
			}
		}
		if names[0] == names[1] {
			t.Fatalf("both DSNs connect to database %s", names[0])
		}
		if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
			t.Fatal(err)
		}
		var seen bool
		if err := cb.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&seen); err != nil {
			t.Fatal(err)
		}
		if seen {
			t.Errorf("a table made in %s is visible in %s", names[0], names[1])
		}
	})
	for _, n := range names {
		if n != "" && databaseExists(t, n) {
			t.Errorf("database %s still exists after its test ended", n)
		}
	}
}

// withDatabase covers both spellings a DSN can have: each must connect to the named database
// and keep the rest of the server's DSN.
func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"host=/tmp/x port=5432 user=postgres dbname=postgres", "host=/tmp/x port=5432 user=postgres dbname=postgres dbname='freshq_t1'"},
		{"host=/tmp/x", "host=/tmp/x dbname='freshq_t1'"},
		{"postgres://u:p@localhost:5433/postgres?sslmode=disable", "postgres://u:p@localhost:5433/freshq_t1?sslmode=disable"},
		{"postgresql://u@localhost?dbname=other&sslmode=disable", "postgresql://u@localhost/freshq_t1?sslmode=disable"},
	} {
		got, err := withDatabase(tc.in, "freshq_t1")
		if err != nil {
			t.Errorf("withDatabase(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.in, got, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("pgx cannot parse %q: %v", got, err)
		} else if cfg.Database != "freshq_t1" {
			t.Errorf("pgx reads database %q from %q", cfg.Database, got)
		}
	}
}

// runHelper runs this test binary again as the named helper with env added to a copy of the
// environment from which the server's variables are removed, so that the helper must find (or
// fail to find) a server on its own.
func runHelper(t *testing.T, helper string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == EnvDSN || k == EnvBinDir || k == "CI" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, append([]string{helperEnv + "=" + helper}, env...)...)
	return cmd
}

// Without a server, a test that asks for a database skips on a developer's machine but fails
// when CI is set. The helper is given a bindir with no PostgreSQL in it.
func TestNoServer(t *testing.T) {
	bogus := t.TempDir()
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{ci: "", wantFail: false, want: "--- SKIP: TestHelper"},
		{ci: "true", wantFail: true, want: "--- FAIL: TestHelper"},
	} {
		cmd := runHelper(t, "database", EnvBinDir+"="+bogus, "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		failed := errors.As(err, &exit)
		if err != nil && !failed {
			t.Fatal(err)
		}
		if failed != tc.wantFail || !strings.Contains(string(out), tc.want) {
			t.Errorf("CI=%q: failed=%v, want %v and %q in the output:\n%s", tc.ci, failed, tc.wantFail, tc.want, out)
		}
		if !strings.Contains(string(out), bogus) {
			t.Errorf("CI=%q: the reason does not name the bindir searched:\n%s", tc.ci, out)
		}
	}
}

// A test binary killed with SIGKILL cannot stop the cluster it started; the cluster must stop
// itself, and the next binary's cluster must start regardless.
func TestKilledBinaryLeavesNoCluster(t *testing.T) {
	if _, err := findBinDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	cmd := runHelper(t, "hold")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var postmaster int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "postmaster "); ok {
			postmaster, _ = strconv.Atoi(v)
			break
		}
	}
	if postmaster == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper did not report its postmaster")
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for alive(postmaster) {
		if time.Now().After(deadline) {
			syscall.Kill(postmaster, syscall.SIGKILL)
			t.Fatalf("postmaster %d still runs 30s after its test binary was killed", postmaster)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The next run (this binary, with no DSN given) gets a working cluster of its own.
	again := runHelper(t, "database")
	if b, err := again.CombinedOutput(); err != nil || !strings.Contains(string(b), "--- PASS: TestHelper") {
		t.Fatalf("a run after the killed one: %v\n%s", err, b)
	}
}

// alive reports whether pid names a live process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestHelper is not a test of its own: it is what runHelper's subprocess runs.
func TestHelper(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		t.Skip("only run as a subprocess")
	case "database":
		c := connect(t, NewDatabase(t))
		if err := c.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	case "hold":
		NewDatabase(t)
		b, err := os.ReadFile(filepath.Join(started.dir, "data", "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, _, _ := strings.Cut(string(b), "\n")
		os.Stdout.WriteString("postmaster " + pid + "\n")
		select {} // until killed
	}
}
