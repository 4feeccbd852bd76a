package badgerstore

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/dueorder"
	"github.com/freshq/freshq/store/storetest"
)

// The benchmark corpus: 1,000,000 schedule rows with ~60-byte keys shaped like real cache
// keys, loaded once per `go test -bench` process through the funnel and reused by every
// benchmark below; TestMain removes it. Due times are spread evenly over 96 h around
// benchNow, so exactly half the rows (500,000) are due.
const (
	benchRows  = 1_000_000
	benchNow   = int64(1_700_000_000_000)
	benchSpan  = int64(96 * time.Hour / time.Millisecond)
	benchGuard = int64(5 * time.Minute / time.Millisecond)
)

var (
	corpusOnce   sync.Once
	corpusDir    string
	corpusLoadUs float64 // µs/row of the corpus's own bulk load
	corpusRSSMB  float64 // VmRSS right after the load, store still open, after a GC
	corpusHWMMB  float64 // VmHWM (peak RSS of the process) at the end of the load
	corpusErr    error
)

func benchKey(i int) []byte {
	return fmt.Appendf(nil, "desktop|https://www.example-shop.com/catalog/item-%08d", i) // 58 bytes
}

// benchDue is row i's due time: rows 0..499,999 are due at benchNow, the rest are not.
func benchDue(i int) int64 { return benchNow - benchSpan/2 + int64(i)*benchSpan/benchRows + 1 }

// benchCadence is row i's cadence: 6, 12, 18 or 24 hours.
func benchCadence(i int) int64 { return int64(1+i%4) * 21_600_000 }

// benchWrites returns the funnel writes of rows [from, to) of a corpus, in a fixed shuffled
// order so the load is not sorted.
func benchWrites(perm []int, from, to int) []store.Write {
	ws := make([]store.Write, 0, to-from)
	for _, i := range perm[from:to] {
		s, err := store.NewSchedule(benchKey(i), benchDue(i), i%2 == 0, benchCadence(i), store.Lanes{Failing: i%50 == 0})
		if err != nil {
			panic(err)
		}
		ws = append(ws, store.Write{Schedule: s})
	}
	return ws
}

func loadRows(st *Store, n int) error {
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	const chunk = 10_000
	for from := 0; from < n; from += chunk {
		if err := st.WriteSchedules(benchWrites(perm, from, min(n, from+chunk))); err != nil {
			return err
		}
	}
	return nil
}

// corpus returns the directory of the loaded corpus, building it on first use. The store is
// closed after loading, so every benchmark opens it as a restarted worker 0 would.
func corpus(b *testing.B) string {
	corpusOnce.Do(func() {
		corpusDir, corpusErr = os.MkdirTemp("", "freshq-store-bench-")
		if corpusErr != nil {
			return
		}
		st, err := Open(corpusDir, nil)
		if err != nil {
			corpusErr = err
			return
		}
		start := time.Now()
		if corpusErr = loadRows(st, benchRows); corpusErr != nil {
			return
		}
		corpusLoadUs = float64(time.Since(start).Microseconds()) / benchRows
		corpusHWMMB = procStatusMB("VmHWM")
		runtime.GC()
		debug.FreeOSMemory()
		corpusRSSMB = procStatusMB("VmRSS")
		corpusErr = st.Close()
	})
	if corpusErr != nil {
		b.Fatal(corpusErr)
	}
	return corpusDir
}

func removeBenchCorpus() {
	if corpusDir != "" {
		_ = os.RemoveAll(corpusDir)
	}
}

// openCorpus opens the corpus (building it on first use) and resets the benchmark timer, so
// the 1M-row load is never counted in an op.
func openCorpus(b *testing.B, o *Options) *Store {
	st, err := Open(corpus(b), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	b.ResetTimer()
	return st
}

// BenchmarkBulkLoad: one op is a load of rows=N schedule rows, through the funnel in calls of
// 10,000 and in a fixed shuffled order, into a fresh store (opening and closing it are not
// timed). After each, bareLoad writes the same rows into another fresh database with the same
// options: bare-µs/row and x-bare are the engine's floor for these bytes and the funnel's
// ratio to it, measured in the same benchmark. A load gets slower per row as the LSM it builds
// grows, so the target's corpus size, 1,000,000, is measured whole. Target ≤ 6 µs/row.
func BenchmarkBulkLoad(b *testing.B) {
	for _, rows := range []int{100_000, benchRows} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			perm := make([]int, rows)
			for i := range perm {
				perm[i] = (i * 7919) % rows // a fixed shuffle (7919 is prime)
			}
			var funnel, bare time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				st, err := Open(b.TempDir(), nil)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				b.StartTimer()
				for from := 0; from < rows; from += 10_000 {
					if err := st.WriteSchedules(benchWrites(perm, from, min(rows, from+10_000))); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				funnel += time.Since(start)
				// Closed so that its flushes and compactions do not run during the bare load.
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				d, err := bareLoad(b.TempDir(), perm)
				if err != nil {
					b.Fatal(err)
				}
				bare += d
			}
			perRow := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*rows) }
			b.ReportMetric(perRow(funnel), "µs/row")
			b.ReportMetric(perRow(bare), "bare-µs/row")
			b.ReportMetric(float64(funnel)/float64(bare), "x-bare")
		})
	}
}

// bareLoad writes the rows of perm into a fresh Badger database in dir, opened with the
// store's default options, and returns how long the writes took. It writes exactly the index
// entries and rows the funnel writes, in the same calls of 10,000, with Badger's own
// WriteBatch: no read of the row being replaced, no floor protocol, no group commit. It is
// the floor of what a bulk load can cost on this engine and machine, not a way to load a
// store: a load that does not read cannot replace an existing row's index entry.
func bareLoad(dir string, perm []int) (time.Duration, error) {
	db, err := badger.Open((&Options{}).EnsureDefaults().badgerOptions(dir))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for from := 0; from < len(perm); from += 10_000 {
		wb := db.NewWriteBatch()
		for _, w := range benchWrites(perm, from, min(len(perm), from+10_000)) {
			s := w.Schedule
			rowVal, projVal := rowValues(s.Row())
			if err := wb.Set(dueKey(s.Row().DueAtMs, s.Key()), projVal); err != nil {
				wb.Cancel()
				return 0, errors.Join(err, db.Close())
			}
			if err := wb.Set(scheduleKey(s.Key()), rowVal); err != nil {
				wb.Cancel()
				return 0, errors.Join(err, db.Close())
			}
		}
		if err := wb.Flush(); err != nil {
			return 0, errors.Join(err, db.Close())
		}
	}
	elapsed := time.Since(start)
	return elapsed, db.Close()
}

// bareIterate is the floor of what a sweep can cost: a key-only Badger iteration of the same
// due range, no value read, no decode, no copy.
func bareIterate(db *badger.DB, nowMs int64) (int, error) {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixDue)})
	defer it.Close()
	end := dueorder.Cursor{Ms: nowMs + 1}.DueSeek()
	n := 0
	for it.Seek(dueorder.Cursor{}.DueSeek()); it.Valid(); it.Next() {
		if string(it.Item().Key()) >= string(end) {
			break
		}
		n++
	}
	return n, nil
}

// bareSeek is the floor of what a seek to the first due row can cost: a read transaction, a
// key-only iterator over the due index, one Seek, and the due time decoded from the key it
// lands on.
func bareSeek(db *badger.DB, fromMs int64) (int64, error) {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixDue)})
	defer it.Close()
	if it.Seek(dueorder.Cursor{Ms: fromMs}.DueSeek()); !it.Valid() {
		return 0, fmt.Errorf("no due row at or after %d", fromMs)
	}
	due, _, err := DecodeDueKey(it.Item().Key())
	return due, err
}

// BenchmarkSweepDue500k: one op is a full sweep pass over the 500,000 due rows of the corpus,
// projection included (Pass.IterateDue, chunks of 1024), next to a bare key-only Badger
// iteration of the same range measured in the same loop. Target ≤ 0.25 µs/row.
func BenchmarkSweepDue500k(b *testing.B) {
	st := openCorpus(b, nil)
	var sweep, bare time.Duration
	rows := 0
	var sink int64
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		n, err := bareIterate(st.db, benchNow)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		p, err := st.BeginPass(benchNow)
		if err != nil {
			b.Fatal(err)
		}
		err = p.IterateDue(0, 1024, func(rs []store.DueRow) error {
			for j := range rs {
				sink += rs[j].EffectiveIntervalMs
			}
			return nil
		})
		p.Close()
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		bare += t1.Sub(t0)
		sweep += t2.Sub(t1)
		rows = p.Stats().Rows
		if rows != n || rows != benchRows/2 {
			b.Fatalf("sweep read %d rows, bare %d, want %d", rows, n, benchRows/2)
		}
	}
	_ = sink
	perRow := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*rows) }
	b.ReportMetric(perRow(sweep), "sweep-µs/row")
	b.ReportMetric(perRow(bare), "bare-µs/row")
	b.ReportMetric(float64(sweep)/float64(bare), "sweep/bare")
	b.ReportMetric(corpusLoadUs, "corpus-load-µs/row")
}

// BenchmarkRSS1M reports the resident set of this process (VmRSS from /proc/self/status)
// with the 1M-row corpus reopened and swept once, after a GC has returned what it can to the
// OS: worker 0 after a restart. It also reports the RSS right after the corpus's bulk load
// with the store still open (memtables full, the load's garbage collected), the peak RSS of
// the process during the load, and how long the reopen took (open-ms: a restarted worker 0
// waits for it while Badger replays its memtables and the key filter reads every row's key).
// rss-anon-MB is the part that is not file pages: the rest of rss-MB is the memory-mapped
// tables the sweep and the key filter read, page cache the kernel may reclaim. The process
// also holds the test binary and the harness. Target ≤ 300 MB.
func BenchmarkRSS1M(b *testing.B) {
	corpus(b)
	start := time.Now()
	st := openCorpus(b, nil)
	open := time.Since(start)
	p, _ := st.BeginPass(benchNow)
	_ = p.IterateDue(0, 1024, func([]store.DueRow) error { return nil })
	p.Close()
	for i := 0; i < b.N; i++ {
		runtime.GC()
	}
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(procStatusMB("VmRSS"), "rss-MB")
	b.ReportMetric(procStatusMB("RssAnon"), "rss-anon-MB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "go-heap-MB")
	b.ReportMetric(corpusRSSMB, "rss-after-load-MB")
	b.ReportMetric(corpusHWMMB, "peak-rss-MB")
	b.ReportMetric(float64(open.Microseconds())/1e3, "open-ms")
}

// procStatusMB reads a kB field of /proc/self/status, in MiB (0 if unavailable).
func procStatusMB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return float64(kb) / 1024
		}
	}
	return 0
}

// reschedule moves one not-yet-due corpus row (the upper half) to another future due time,
// so the due set the sweep benchmark reads is unchanged.
func reschedule(st *Store, r *rand.Rand, seq int64) error {
	i := benchRows/2 + 1 + r.IntN(benchRows/2-1)
	s, err := store.NewSchedule(benchKey(i), benchNow+1+seq%benchSpan, i%2 == 0, 21_600_000, store.Lanes{})
	if err != nil {
		return err
	}
	return st.WriteSchedule(s)
}

// bareReschedule makes n reschedules like reschedule's straight into st's database with
// Badger's own WriteBatch, in batches of 4096, and returns how long the writes took. Each
// writes what the funnel would (delete the old index entry, set the new one, set the row),
// but the old due times are read before the clock starts and nothing is acknowledged until a
// whole batch is: the floor of what n reschedules can cost on this engine and machine, with
// no read, no floor protocol and the largest batches. Rows move between future due times, so
// the floor and the head, which sit at or below now, stay true. st must be idle.
func bareReschedule(st *Store, r *rand.Rand, n int) (time.Duration, error) {
	type move struct {
		key      []byte
		old, row store.Row
	}
	moves := make([]move, n)
	last := make(map[int]store.Row, n)
	for j := range moves {
		i := benchRows/2 + 1 + r.IntN(benchRows/2-1)
		old, ok := last[i]
		if !ok {
			var err error
			if old, err = st.GetSchedule(benchKey(i)); err != nil {
				return 0, err
			}
		}
		s, err := store.NewSchedule(benchKey(i), benchNow+1+int64(j)%benchSpan, i%2 == 0, 21_600_000, store.Lanes{})
		if err != nil {
			return 0, err
		}
		row := s.Row()
		row.StoredIntervalMs = old.StoredIntervalMs
		moves[j] = move{key: s.Key(), old: old, row: row}
		last[i] = row
	}
	start := time.Now()
	for from := 0; from < n; from += 4096 {
		wb := st.db.NewWriteBatch()
		for _, m := range moves[from:min(n, from+4096)] {
			rowVal, projVal := rowValues(m.row)
			err := wb.Delete(dueKey(m.old.DueAtMs, m.key))
			if err == nil {
				err = wb.Set(dueKey(m.row.DueAtMs, m.key), projVal)
			}
			if err == nil {
				err = wb.Set(scheduleKey(m.key), rowVal)
			}
			if err != nil {
				wb.Cancel()
				return 0, err
			}
		}
		if err := wb.Flush(); err != nil {
			return 0, err
		}
	}
	elapsed := time.Since(start)
	checked := 0
	for i, want := range last { // a sample of up to 1,000 rows: map order is random
		if got, err := st.GetSchedule(benchKey(i)); err != nil || got != want {
			return 0, fmt.Errorf("bare reschedule of row %d: got %+v (%v), want %+v", i, got, err, want)
		}
		if checked++; checked == 1000 {
			break
		}
	}
	return elapsed, nil
}

// BenchmarkReschedule: one op is one reschedule (read the row, delete the old index entry,
// set the new one, set the row) through the funnel, with SyncWrites off and on. "writers=8"
// runs 8 concurrent callers (group commit amortises the commit); "writers=1" is one caller
// at a time and reports its latency percentiles. Target ≤ 10 µs/op amortised at 8 writers.
func BenchmarkReschedule(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v/writers=8", sync), func(b *testing.B) {
			st := openCorpus(b, &Options{SyncWrites: sync})
			var seq atomic.Int64
			var batches atomic.Int64
			st.opts.TestSignals.BeforeCommit = func() { batches.Add(1) }
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(uint64(seq.Add(1)), 9))
				for pb.Next() {
					if err := reschedule(st, r, seq.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			funnel := b.Elapsed()
			bare, err := bareReschedule(st, rand.New(rand.NewPCG(uint64(b.N), 11)), b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/float64(max(1, batches.Load())), "writes/batch")
			b.ReportMetric(float64(bare.Nanoseconds())/1e3/float64(b.N), "bare-µs/op")
			b.ReportMetric(float64(funnel)/float64(bare), "x-bare")
		})
		b.Run(fmt.Sprintf("sync=%v/writers=1", sync), func(b *testing.B) {
			st := openCorpus(b, &Options{SyncWrites: sync})
			r := rand.New(rand.NewPCG(7, 7))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := reschedule(st, r, int64(i)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// BenchmarkSeekFirstDue: one op is a scan for the first due row (ScanDue with limit 1) after
// the earliest due rows of the corpus were rescheduled into the future, in due order, as a
// sweep rendering the oldest rows first would: each leaves a tombstone at the head of the due
// index. Stages: after 10,000, 20,000 and 40,000 reschedules; after a reopen has flushed the
// memtables into L0 tables; after Flatten. Before each stage a sweep pass sets the floor and
// the head. "floored" seeks from the floor, firstDue − 5 min (the guard window behind the
// first due row holds the tombstones of the ~870 rows rescheduled out of it); "from-head" from
// the head, where the claim fallback's scan starts (Store.HeadMs: the first due row the pass
// observed); "bare-from-head" is bareSeek from the head, the engine's floor for that seek;
// "unfloored" from 0. Target: floored ≤ 10 µs and flat. This benchmark changes the
// corpus, so it runs last.
func BenchmarkSeekFirstDue(b *testing.B) {
	dir := corpus(b)
	st, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	res, err := st.ScanDue(0, benchNow, 1)
	if err != nil || len(res.Rows) != 1 {
		b.Fatal(res, err)
	}
	moved := 0
	for moved < benchRows/2 && res.FirstDueMs > benchDue(moved) {
		moved++ // an earlier -count run moved these already
	}
	moveTo := func(n int) {
		for ; moved < n; moved += 1000 {
			ws := make([]store.Write, 0, 1000)
			for j := moved; j < moved+1000; j++ {
				s, _ := store.NewSchedule(benchKey(j), benchNow+benchSpan+int64(j), j%2 == 0, 21_600_000, store.Lanes{})
				ws = append(ws, store.Write{Schedule: s})
			}
			if err := st.WriteSchedules(ws); err != nil {
				b.Fatal(err)
			}
		}
	}
	run := func(stage string) {
		first, err := st.ScanDue(0, benchNow, 1)
		if err != nil || first.FirstDueMs != benchDue(moved) {
			b.Fatalf("%s: first due %d, want %d (%v)", stage, first.FirstDueMs, benchDue(moved), err)
		}
		seek := func(from int64) func(*testing.B) {
			return func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r, err := st.ScanDue(from, benchNow, 1)
					if err != nil || r.FirstDueMs != first.FirstDueMs {
						b.Fatal(r, err)
					}
				}
			}
		}
		// A sweep pass sets the floor and the head, as worker 0's would.
		p, err := st.BeginPass(benchNow)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.IterateDue(1, 1, func([]store.DueRow) error { return nil }); err != nil {
			b.Fatal(err)
		}
		p.AdvanceFloor(benchGuard)
		p.Close()
		if f, h := st.Floor().Load(), st.HeadMs(); f != first.FirstDueMs-benchGuard || h != first.FirstDueMs {
			b.Fatalf("%s: floor %d and head %d after a pass, want %d and %d", stage, f, h, first.FirstDueMs-benchGuard, first.FirstDueMs)
		}
		b.Run(stage+"/floored", seek(st.Floor().Load()))
		b.Run(stage+"/from-head", seek(st.HeadMs()))
		b.Run(stage+"/bare-from-head", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				due, err := bareSeek(st.db, st.HeadMs())
				if err != nil || due != first.FirstDueMs {
					b.Fatal(due, err)
				}
			}
		})
		b.Run(stage+"/unfloored", seek(0))
	}
	for _, n := range []int{10_000, 20_000, 40_000} {
		moveTo(max(n, moved))
		run(fmt.Sprintf("moved=%d", moved))
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if st, err = Open(dir, nil); err != nil {
		b.Fatal(err)
	}
	run("reopened")
	if err := st.db.Flatten(2); err != nil {
		b.Fatal(err)
	}
	run("flattened")
}

// BenchmarkReadCacheWriteCost is what the read cache costs the write path: one op loads 100,000
// rows through the funnel, in calls of 10,000, into a fresh store with the default read cache
// and then into another without one (ReadCacheBytes −1), so that both run side by side on the
// same machine state. Every commit drops the keys it may write from the cache first (three a
// row), whether they are cached or not. µs/row is with the cache, nocache-µs/row without, and
// x-nocache their ratio.
func BenchmarkReadCacheWriteCost(b *testing.B) {
	const rows = 100_000
	perm := make([]int, rows)
	for i := range perm {
		perm[i] = (i * 7919) % rows
	}
	load := func(opts *Options) time.Duration {
		st, err := Open(b.TempDir(), opts)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for from := 0; from < rows; from += 10_000 {
			if err := st.WriteSchedules(benchWrites(perm, from, from+10_000)); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(start)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	var with, without time.Duration
	b.ResetTimer()
	for range b.N {
		with += load(nil)
		without += load(&Options{ReadCacheBytes: -1})
	}
	b.StopTimer()
	perRow := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*rows) }
	b.ReportMetric(perRow(with), "µs/row")
	b.ReportMetric(perRow(without), "nocache-µs/row")
	b.ReportMetric(float64(with)/float64(without), "x-nocache")
}

// BenchmarkResultWrites: what applying a render's result costs as the store grows, through the
// funnel and, side by side, with nothing of freshq's around the engine. For each size in
// FRESHQ_RESULT_BENCH_ROWS (default "50000 1000000"), each mode below gets a store of that many
// rows with their targets, all built alike (through the funnel, with a classifier, then reopened
// as worker 0 restarts) before the clock starts. One op is a result for every row of the store,
// once each, in a random order, as BenchmarkQueueOverhead (cmd/supervisor) renders every seeded
// row once:
//
//   - funnel: Modify, in calls of 256 results, each reading the row and its target and filing
//     the row a day later with its target and a page: what worker 0 does with a result batch;
//   - bare: the same entries straight into the store's database, in transactions of
//     1,024 results: read the row and the target, then delete the row's old class-index entry
//     and set the new one, the row, the target and the page. No floor, no overlay, no
//     acknowledgement: the engine's own cost of a result's five entries;
//   - bare-without-class: bare without the two class-index entries, what a result would cost
//     the engine if its due index were kept elsewhere (the sweep cannot run on such a store);
//   - blind: bare-without-class without the reads, the row, target and page rebuilt from what
//     the benchmark knows of each row: what a result would cost the engine if worker 0 held
//     every row it published and its due index elsewhere: about the least a result can cost
//     the engine while it writes these three values.
//
// It reports results/s and the process's CPU µs a result (Badger's compactions included) for
// each. The ratio of a size's figures to the smallest's is what the store's growth costs, and
// the bare ratio is how much of it is the engine's.
func BenchmarkResultWrites(b *testing.B) {
	sizes := []int{50_000, 1_000_000}
	if env := os.Getenv("FRESHQ_RESULT_BENCH_ROWS"); env != "" {
		sizes = sizes[:0]
		for _, f := range strings.Fields(env) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("FRESHQ_RESULT_BENCH_ROWS: %q is not a row count", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		for _, mode := range []string{"funnel", "bare", "bare-without-class", "blind"} {
			b.Run(fmt.Sprintf("rows=%d/%s", n, mode), func(b *testing.B) {
				st := resultCorpus(b, n)
				order := rand.New(rand.NewPCG(uint64(n), 3)).Perm(n)
				b.ResetTimer()
				cpu0, start := processCPU(), time.Now()
				for op := range b.N {
					dueMs := benchNow + int64(op+1)*86_400_000
					var err error
					switch mode {
					case "funnel":
						err = funnelResults(st, order, dueMs)
					case "bare":
						err = bareResults(st, order, dueMs, bareEntries{read: true, classIndex: true})
					case "bare-without-class":
						err = bareResults(st, order, dueMs, bareEntries{read: true})
					case "blind":
						err = bareResults(st, order, dueMs, bareEntries{})
					default:
						b.Fatalf("unknown mode %q", mode)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				results := float64(b.N) * float64(n)
				b.ReportMetric(results/time.Since(start).Seconds(), "results/s")
				b.ReportMetric(1e6*(processCPU()-cpu0)/results, "cpu-µs/result")
				b.StopTimer()
				// Every row was filed at the last op's due time, whichever way it was written (read
				// from Badger: the store's read view is renewed by the funnel's commits only).
				err := st.db.View(func(txn *badger.Txn) error {
					for _, i := range order[:min(n, 1000)] {
						var row store.Row
						item, err := txn.Get(scheduleKey(benchKey(i)))
						if err == nil {
							err = item.Value(row.UnmarshalBinary)
						}
						if err != nil || row.DueAtMs != benchNow+int64(b.N)*86_400_000 {
							return fmt.Errorf("row %d after the results: %+v, %v", i, row, err)
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// resultCorpus builds a store of n corpus rows (benchKey, benchDue), each with its target,
// under a class index, and reopens it: the store a restarted worker 0 finds.
func resultCorpus(b *testing.B, n int) *Store {
	dir := b.TempDir()
	o := func() *Options { return &Options{Classifier: storetest.Classifier{}} }
	st, err := Open(dir, o())
	if err != nil {
		b.Fatal(err)
	}
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for from := 0; from < n; from += 10_000 {
		ws := benchWrites(perm, from, min(n, from+10_000))
		for j := range ws {
			tgt := corpusTarget(ws[j].Schedule.Key())
			ws[j].Target = &tgt
		}
		if err := st.WriteSchedules(ws); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if st, err = Open(dir, o()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// resultPage is the page every benchmark result files: a small rendered document.
var resultPage = store.Page{Status: 200, Headers: []store.Header{{Name: "content-type", Value: "text/html"}},
	Body: []byte("<!doctype html><html><head><title>item</title></head><body>" + strings.Repeat("<p>rendered</p>", 12) + "</body></html>")}

// resultWrite is the Write a result files for cur: the row due at dueMs with its cadence, its
// target with one more render counted, and the page.
func resultWrite(key []byte, cur store.Current, dueMs int64) (store.Write, error) {
	sch, err := store.NewSchedule(key, dueMs, false, cur.Row.EffectiveIntervalMs, store.Lanes{})
	if err != nil {
		return store.Write{}, err
	}
	tgt := cur.Target
	tgt.Failures = store.Failures{}
	page := resultPage
	page.RenderedAtMs = dueMs
	return store.Write{Schedule: sch, Target: &tgt, Page: &page}, nil
}

// funnelResults files a result for every row in order through Modify, 256 a call.
func funnelResults(st *Store, order []int, dueMs int64) error {
	const perCall = 256
	changes := make([]store.Change, 0, perCall)
	for from := 0; from < len(order); from += perCall {
		changes = changes[:0]
		for _, i := range order[from:min(len(order), from+perCall)] {
			key := benchKey(i)
			changes = append(changes, store.Change{Key: key, MinDueMs: dueMs, Decide: func(cur store.Current) (store.Write, bool, error) {
				if !cur.HasRow || !cur.HasTarget {
					return store.Write{}, false, fmt.Errorf("result for %q: row %v, target %v", key, cur.HasRow, cur.HasTarget)
				}
				w, err := resultWrite(key, cur, dueMs)
				return w, err == nil, err
			}})
		}
		applied, err := st.Modify(changes)
		if err != nil {
			return err
		}
		if i := slices.Index(applied, false); i >= 0 {
			return fmt.Errorf("result %d of a call not applied", i)
		}
	}
	return nil
}

// bareEntries is what bareResults does for a result besides writing its row, target and page.
type bareEntries struct {
	read       bool // read the row and target first; else rebuild them with corpusCurrent
	classIndex bool // delete the row's old class-index entry and set its new one (needs read)
}

// bareResults writes what funnelResults files, with Badger alone: for each transaction of
// 1,024 results, the rows and targets are read in one read transaction (or rebuilt, unless
// e.read), and each result's row, target and page, with its two class-index entries if
// e.classIndex, written in one WriteBatch.
func bareResults(st *Store, order []int, dueMs int64, e bareEntries) error {
	if e.classIndex && !e.read {
		return errors.New("bareResults: the class index's old entry needs the row read")
	}
	const perTxn = 1024
	c := st.opts.Classifier
	for from := 0; from < len(order); from += perTxn {
		part := order[from:min(len(order), from+perTxn)]
		curs := make([]store.Current, len(part))
		var err error
		if e.read {
			err = readCurrents(st.db, part, curs)
		} else {
			for j, i := range part {
				curs[j] = corpusCurrent(i)
			}
		}
		if err != nil {
			return err
		}
		wb := st.db.NewWriteBatch()
		for j, i := range part {
			key, cur := benchKey(i), curs[j]
			w, err := resultWrite(key, cur, dueMs)
			if err != nil {
				wb.Cancel()
				return err
			}
			row := w.Schedule.Row()
			row.SetMirror(cur.Row.Mirror())
			rowVal, projVal := rowValues(row)
			tgt, err := w.Target.MarshalBinary()
			if err == nil {
				var page []byte
				if page, err = w.Page.MarshalBinary(); err == nil {
					if e.classIndex {
						err = errors.Join(
							wb.Delete(classKey(c.Class(key, cur.Row.Projection), cur.Row.DueAtMs, key)),
							wb.Set(classKey(c.Class(key, row.Projection), row.DueAtMs, key), projVal))
					}
					err = errors.Join(err,
						wb.Set(scheduleKey(key), rowVal),
						wb.Set(targetKey(key), tgt),
						wb.Set(pageKey(key), page))
				}
			}
			if err != nil {
				wb.Cancel()
				return err
			}
		}
		if err := wb.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// readCurrents reads the row and target of each benchmark row in part into curs, in one read
// transaction.
func readCurrents(db *badger.DB, part []int, curs []store.Current) error {
	return db.View(func(txn *badger.Txn) error {
		for j, i := range part {
			cur := &curs[j]
			for _, read := range []struct {
				key    []byte
				decode func([]byte) error
			}{{scheduleKey(benchKey(i)), cur.Row.UnmarshalBinary}, {targetKey(benchKey(i)), cur.Target.UnmarshalBinary}} {
				item, err := txn.Get(read.key)
				if err != nil {
					return fmt.Errorf("read %q: %w", read.key, err)
				}
				if err := item.Value(read.decode); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// corpusCurrent is row i's row and target as resultCorpus filed them, as far as a result's
// write depends on them: its cadence, and its target's URL, device and source.
func corpusCurrent(i int) store.Current {
	var cur store.Current
	cur.Row.EffectiveIntervalMs = benchCadence(i)
	cur.Target = corpusTarget(benchKey(i))
	return cur
}

// corpusTarget is the target resultCorpus files for a corpus key: the key's URL, on desktop,
// from a sitemap.
func corpusTarget(key []byte) store.Target {
	return store.Target{URL: string(key[len("desktop|"):]), Device: "desktop", Source: store.SourceSitemap}
}

// processCPU is the CPU seconds this process has used, user and system, every thread's.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
