// Command freshqctl is the operator CLI for freshq: it wraps the HTTP API served by
// freshq-supervisor for people at a terminal, and prints JSON for scripts with --json.
//
// Usage:
//
//	freshqctl [global flags] COMMAND [flags] [args]
//
//	add URL [--device D] [--interval 6h] [--source sitemap|discovered|api] [--due RFC3339]
//	    Upsert one target (POST /v1/targets). Omitted fields keep their stored value.
//	import FILE|- [--format ndjson|csv] [--chunk 5000]
//	    Upsert targets from NDJSON (or one JSON array) or CSV with columns url,device,interval,
//	    source (a header row naming them, in any order, is optional; due is allowed too). The
//	    file is streamed in chunks of --chunk items, with a progress bar when stderr is a
//	    terminal; the totals and the first rejected items, by line, are printed at the end.
//	sitemap URL|FILE|- [--device D] [--poll 500ms] [--detach] | sitemap --run ID
//	    Start a sitemap ingest run (POST /v1/sitemaps: a URL for the server to fetch, or the
//	    XML of a local file) and follow it until it is done, with a live line on a terminal.
//	explain URL [--device D]
//	    What freshq knows and decides about one target: due time, cadence and its origin,
//	    lane and score, lease, failures, terminal state, last render, page age.
//	get URL [--device D] [--wait 10s]
//	    Print the stored page (--json: its status, age, staleness and body). With --wait, a
//	    missing page is rendered on miss and waited for; concurrent waits share one render.
//	delete URL [--device D]
//	    Remove one target: its schedule, its place in the queue and its stored page. A render in
//	    flight cannot bring it back.
//	prioritize URL|--prefix P --mode rush|wait [--device D]
//	    rush: re-render at the urgent lane; wait: drop the stored pages, let cadence refill them.
//	queue
//	    The floor and what pins it, the ready set, backlog by lane, grants by source, leases.
//	top [--interval 2s] [--once] [--cluster]
//	    A live view of renders, backlog and lateness at grant by lane, read from /metrics and
//	    redrawn every --interval until Ctrl-C (--once: one frame; --json: one object a frame).
//	    --cluster adds the farm's capacity: each node's demand, capacity, retries and backlog,
//	    their sum, and the farm's verdict and projected age ÷ cadence by lane.
//	cluster
//	    On PostgreSQL: the nodes (address, live, heartbeat age, shards held), then each owner's
//	    shards as runs of consecutive shards with their epochs, floors and rows below the floor.
//	keys check | keys migrate [--batch N]
//	    check: how many stored keys the cache-key rules in force (keys.drop_params, routes'
//	    keep_params and trailing_slash) would change. migrate: move them, schedule, target and
//	    page together, in batches, until none is left; interrupted, run it again to continue.
//	suspects [--site HOST] | suspects accept URL [--device D]
//	    The suspect renders worker 0 keeps beside the good pages they did not replace (a render
//	    that completed but may have lost the page): URL, device, reasons, how many agreed, size.
//	    accept: apply the kept render as the page now, in place of the renders' agreement.
//
// Global flags, before or after the command:
//
//	--server URL    the supervisor's listener (env FRESHQ_SERVER; default http://127.0.0.1:8420)
//	--token T       bearer token (env FRESHQ_TOKEN)
//	--timeout D     per-request timeout (default 60s)
//	--json          print the server's JSON (import: a summary object) instead of text
//
// Requests answered 503 while worker 0 restarts are retried a few times when they are safe
// to repeat (reads and upserts). Exit codes: 0 success; 1 a server, network or data error
// (import: any item rejected); 2 a usage error. Errors are one line on stderr; an API error
// {"error", "field"} reads "freshqctl: field: error", and an endpoint the server does not have
// (404) says so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

const defaultServer = "http://127.0.0.1:8420"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// app is one invocation: its global options and where it writes.
type app struct {
	server  string
	token   string
	timeout time.Duration
	json    bool

	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tty    bool // stderr is a terminal: progress bars and live progress lines
	ttyOut bool // stdout is a terminal: top redraws in place
	client *http.Client
	now    func() time.Time
	ctx    context.Context
	// retryWait is how long a 503 without Retry-After waits before the next attempt.
	retryWait time.Duration
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// command is one subcommand.
type command struct {
	name, args, summary string
	run                 func(a *app, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"add", "URL [--device D] [--interval 6h] [--source S] [--due T]", "upsert one target", runAdd},
		{"import", "FILE|- [--format ndjson|csv] [--chunk N]", "upsert targets from NDJSON or CSV", runImport},
		{"sitemap", "URL|FILE|-|--run ID [--device D] [--poll D] [--detach]", "ingest a sitemap for every device (or --device), following it", runSitemap},
		{"explain", "URL [--device D]", "explain one target", runExplain},
		{"get", "URL [--device D] [--wait D]", "print the page, rendering it on miss with --wait", runGet},
		{"delete", "URL [--device D]", "remove one target and its page", runDelete},
		{"prioritize", "URL|--prefix P --mode rush|wait", "rush a re-render, or drop pages", runPrioritize},
		{"queue", "", "floor, ready set, backlog, grants, leases", runQueue},
		{"top", "[--interval 2s] [--once] [--cluster]", "live backlog and lateness by lane (--cluster: the farm's capacity)", runTop},
		{"plan", "--config FILE", "what a proposed configuration would do to demand and lateness", runPlan},
		{"cluster", "", "nodes, and each node's shards with epochs and floors", runCluster},
		{"keys", "check|migrate [--batch N]", "stored keys the key rules would change; move them", runKeys},
		{"suspects", "[--site HOST] | accept URL [--device D]", "suspect renders kept beside good pages; accept one as the page", runSuspects},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, terminals{stdout: isTerminal(os.Stdout), stderr: isTerminal(os.Stderr)})
	stop()
	os.Exit(code)
}

// terminals says which of stdout and stderr are terminals.
type terminals struct{ stdout, stderr bool }

// isTerminal reports whether f is a character device (a terminal), without a dependency.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// run is the whole program, minus the process: it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, term terminals) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, tty: term.stderr, ttyOut: term.stdout, now: time.Now, ctx: ctx, retryWait: time.Second}
	a.server = getenv("FRESHQ_SERVER")
	if a.server == "" {
		a.server = defaultServer
	}
	a.token = getenv("FRESHQ_TOKEN")
	a.timeout = 60 * time.Second

	fs := flag.NewFlagSet("freshqctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			mainUsage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "freshqctl: %v (see freshqctl -h)\n", err)
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 {
		mainUsage(stderr)
		return exitUsage
	}
	name := rest[0]
	if name == "help" {
		mainUsage(stdout)
		return exitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "freshqctl: unknown command %q (see freshqctl -h)\n", name)
		return exitUsage
	}
	err := cmd.run(a, rest[1:])
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "freshqctl %s: %s (see freshqctl %s -h)\n", name, ue.msg, name)
		return exitUsage
	case errors.Is(err, errSilent):
		return exitError
	default:
		fmt.Fprintf(stderr, "freshqctl: %s\n", oneLine(err.Error()))
		return exitError
	}
}

// errSilent fails a command whose output already said why.
var errSilent = errors.New("failed")

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(s), " ")
}

func mainUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: freshqctl [--server URL] [--token T] [--json] COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "global flags (before or after the command):")
	fmt.Fprintln(w, "  --server URL   env FRESHQ_SERVER, default "+defaultServer)
	fmt.Fprintln(w, "  --token T      bearer token (env FRESHQ_TOKEN)")
	fmt.Fprintln(w, "  --timeout D    per-request timeout (default 60s)")
	fmt.Fprintln(w, "  --json         print JSON for scripts")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run 'freshqctl COMMAND -h' for a command's flags")
}

func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.server, "server", a.server, "the supervisor's `URL` (env FRESHQ_SERVER)")
	fs.StringVar(&a.token, "token", a.token, "bearer `token` (env FRESHQ_TOKEN)")
	fs.DurationVar(&a.timeout, "timeout", a.timeout, "per-request `timeout`")
	fs.BoolVar(&a.json, "json", a.json, "print JSON for scripts")
}

// newFlags is a subcommand's flag set, with the global flags.
func (a *app) newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	return fs
}

// parse parses a subcommand's flags, which may come before or after its positional arguments,
// and checks the number of positional arguments is within [min, max].
func (a *app) parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				a.subUsage(fs)
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < min:
		return nil, usagef("missing argument")
	case len(pos) > max:
		return nil, usagef("unexpected argument %q", pos[max])
	}
	return pos, a.finishGlobals()
}

func (a *app) subUsage(fs *flag.FlagSet) {
	for _, c := range commands {
		if c.name == fs.Name() {
			fmt.Fprintf(a.stdout, "usage: freshqctl %s %s\n  %s\n\nflags:\n", c.name, c.args, c.summary)
		}
	}
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		l := "  --" + f.Name
		if name != "" {
			l += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, wrap(fmt.Sprintf("%-22s ", l), usage, 79))
	})
	sort.Strings(lines)
	fmt.Fprintln(a.stdout, strings.Join(lines, "\n"))
}

// finishGlobals checks the global flags and builds the HTTP client.
func (a *app) finishGlobals() error {
	s := strings.TrimRight(strings.TrimSpace(a.server), "/")
	if s == "" {
		return usagef("--server is empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	a.server = s
	if a.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if a.client == nil {
		a.client = &http.Client{Timeout: a.timeout}
	}
	return nil
}

// wrap puts text after head, wrapping words at width; continuation lines are indented by
// head's width.
func wrap(head, text string, width int) string {
	var b strings.Builder
	b.WriteString(head)
	col, indent := len(head), strings.Repeat(" ", len(head))
	for i, w := range strings.Fields(text) {
		if i > 0 && col+1+len(w) > width {
			b.WriteString("\n" + indent)
			col = len(indent)
		} else if i > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}
