package sweep

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/testkit/qtest"
)

// The sweep benchmark runs on one corpus of 1,000,000 rows whose due times are one ms apart, so
// "now" chooses how many are due: 100k, 500k or all of them. It is built once per process.

const benchRows = 1_000_000

var (
	benchOnce  sync.Once
	benchDir   string
	benchStore *badgerstore.Store
	benchSeg   *shm.Segment
	benchErr   error
	benchBase  = int64(1_700_000_000_000)
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchStore != nil {
		benchStore.Close()
		benchSeg.Close()
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchKey returns a ~60-byte cache key spread over the routes of the default bench config.
func benchKey(i int) []byte {
	switch i % 10 {
	case 0:
		return fmt.Appendf(nil, "desktop|https://shop.example.test/c/category-%07d/page", i)
	case 1, 2, 3:
		return fmt.Appendf(nil, "mobile|https://shop.example.test/c/category-%07d/items", i)
	}
	return fmt.Appendf(nil, "desktop|https://shop.example.test/p/product-%07d-detail", i)
}

func benchCorpus(b *testing.B) {
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "freshq-sweep-bench-")
		if benchErr != nil {
			return
		}
		benchSeg, benchErr = shm.Create(filepath.Join(benchDir, "seg"), shm.Options{EpochMs: benchBase})
		if benchErr != nil {
			return
		}
		benchStore, benchErr = badgerstore.Open(filepath.Join(benchDir, "db"), &badgerstore.Options{Floor: benchSeg.Floor()})
		if benchErr != nil {
			return
		}
		ws := make([]store.Write, 0, 10_000)
		for i := range benchRows {
			carried := int64(0)
			if i%2 == 0 {
				carried = int64(6+6*(i%4)) * 3_600_000 // half carry a ladder rung, half resolve
			}
			sch, err := store.NewSchedule(benchKey(i), benchBase+int64(i), i%3 != 0, carried,
				store.Lanes{Failing: i%97 == 0, Urgent: i%1001 == 0})
			if err != nil {
				benchErr = err
				return
			}
			ws = append(ws, store.Write{Schedule: sch})
			if len(ws) == cap(ws) {
				if benchErr = benchStore.WriteSchedules(ws); benchErr != nil {
					return
				}
				ws = ws[:0]
			}
		}
		if benchErr = benchStore.WriteSchedules(ws); benchErr != nil {
			return
		}
		// Measure the steady state: background compaction would get there over time.
		benchErr = benchStore.Compact()
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
}

// benchSettings are the sweep's settings of benchPolicy's configuration.
func benchSettings(b *testing.B, pol *policy.Policy) func() *Settings {
	set := SweepSettingsOf(benchConfig(b), pol)
	return func() *Settings { return &set }
}

func benchPolicy(b *testing.B) *policy.Policy {
	pol, err := assemble.Policy(benchConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	return pol
}

func benchConfig(b *testing.B) *config.Config { return benchConfigHostLimit(b, 1024) }

// benchConfigHostLimit is benchConfig with the corpus's one host limited to limit renders at
// once: 1024 (benchConfig) never caps it, the default 4 caps it in the set.
func benchConfigHostLimit(b *testing.B, limit int) *config.Config {
	cfg, err := config.Parse([]byte(`
queue:
  ready: {sweep_cap: 2000000}
render:
  hosts: {max_concurrency: ` + strconv.Itoa(limit) + `}
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 24h}
  - {name: product, match: prefix, path: /p/, interval: 48h}
`))
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// bareIterationNs is the store's own iteration of the same due set: key and projection decoded,
// nothing else done with them.
func bareIterationNs(b *testing.B, now int64, rows int) float64 {
	start := time.Now()
	p, err := benchStore.BeginPass(now)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	if err := p.IterateDue(0, chunkRows, func(rs []store.DueRow) error { n += len(rs); return nil }); err != nil {
		b.Fatal(err)
	}
	p.Close()
	if n != rows {
		b.Fatalf("bare iteration read %d rows, want %d", n, rows)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(rows)
}

// BenchmarkSweep measures one whole sweep (read, score, select, publish) per op.
func BenchmarkSweep(b *testing.B) {
	benchCorpus(b)
	pol := benchPolicy(b)
	for _, rows := range []int{100_000, 500_000, 1_000_000} {
		b.Run(fmt.Sprintf("due=%dk", rows/1000), func(b *testing.B) {
			now := benchBase + int64(rows) - 1
			w, _ := benchSeg.Worker(0)
			s := qtest.Must(New(Options{Store: FromStore(benchStore, nil), Changes: NewChanges(), Segment: benchSeg, Worker: w,
				Policy: func() *policy.Policy { return pol }, Settings: benchSettings(b, pol), Now: func() int64 { return now }}))(b)
			// The bare iteration runs in the same loop, timer stopped, so that both see the
			// same machine: it is shared and noisy.
			bare := 0.0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				bare += bareIterationNs(b, now, rows) / float64(b.N)
				b.StartTimer()
				res, err := s.Sweep(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if res.Rows != rows || res.Published != 5000 {
					b.Fatalf("sweep read %d rows and published %d", res.Rows, res.Published)
				}
			}
			b.StopTimer()
			perRow := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(rows)
			b.ReportMetric(perRow/1000, "µs/row")
			b.ReportMetric(bare/1000, "bare-µs/row")
			b.ReportMetric(perRow/bare, "x-bare")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sweep")
		})
	}
}

// The class-merge benchmark's corpus: the same rows, in a store that keeps the class index of
// benchPolicy's classifier. FRESHQ_SWEEP_BENCH_ROWS sizes it (default 1,000,000); the due sets
// measured are 100k, 1M and 10M rows, those that fit.
var (
	classOnce  sync.Once
	classDir   string
	classStore *badgerstore.Store
	classSeg   *shm.Segment
	classRows  int
	classErr   error
)

func classCorpus(b *testing.B, pol *policy.Policy) {
	// FRESHQ_SWEEP_BENCH_RANKED=1 files every row with a rank interval of its own.
	ranked := os.Getenv("FRESHQ_SWEEP_BENCH_RANKED") != ""
	classOnce.Do(func() {
		classRows = benchRows
		if v := os.Getenv("FRESHQ_SWEEP_BENCH_ROWS"); v != "" {
			if _, classErr = fmt.Sscan(v, &classRows); classErr != nil {
				return
			}
		}
		if classDir, classErr = os.MkdirTemp("", "freshq-sweep-class-bench-"); classErr != nil {
			return
		}
		if classSeg, classErr = shm.Create(filepath.Join(classDir, "seg"), shm.Options{EpochMs: benchBase}); classErr != nil {
			return
		}
		classStore, classErr = badgerstore.Open(filepath.Join(classDir, "db"), &badgerstore.Options{Floor: classSeg.Floor(), Classifier: NewClassifier(pol)})
		if classErr != nil {
			return
		}
		ws := make([]store.Write, 0, 10_000)
		for i := range classRows {
			carried := int64(0)
			if i%2 == 0 {
				carried = int64(6+6*(i%4)) * 3_600_000
			}
			sch, err := store.NewSchedule(benchKey(i), benchBase+int64(i), i%3 != 0, carried,
				store.Lanes{Failing: i%97 == 0, Urgent: i%1001 == 0})
			if err == nil && ranked {
				// Each row a rank interval of its own, as queue.policy freshness files them:
				// spread log-uniformly over 1 minute to 100 days, so the classes are as many
				// as the buckets.
				sch, err = sch.WithRankInterval(int64(60_000 * math.Pow(144_000, float64(uint32(i)*2654435761)/(1<<32))))
			}
			if err != nil {
				classErr = err
				return
			}
			ws = append(ws, store.Write{Schedule: sch})
			if len(ws) == cap(ws) {
				if classErr = classStore.WriteSchedules(ws); classErr != nil {
					return
				}
				ws = ws[:0]
			}
		}
		if classErr = classStore.WriteSchedules(ws); classErr != nil {
			return
		}
		classErr = classStore.Compact()
	})
	if classErr != nil {
		b.Fatal(classErr)
	}
}

// dropClassCorpus closes and removes the corpus classCorpus built, so that the next benchmark
// builds its own.
func dropClassCorpus() {
	classStore.Close()
	classSeg.Close()
	os.RemoveAll(classDir)
	classOnce = sync.Once{}
}

// BenchmarkSweepClasses measures one whole sweep by the class merge, publishing K = 5,000 from
// due sets of growing size: its time should not grow with the due set.
func BenchmarkSweepClasses(b *testing.B) {
	pol := benchPolicy(b)
	classCorpus(b, pol)
	defer dropClassCorpus()
	for _, rows := range []int{100_000, 1_000_000, 10_000_000} {
		if rows > classRows {
			continue
		}
		b.Run(fmt.Sprintf("due=%dk", rows/1000), func(b *testing.B) {
			now := benchBase + int64(rows) - 1
			w, _ := classSeg.Worker(0)
			s := qtest.Must(New(Options{Store: FromStore(classStore, nil), Changes: NewChanges(), Segment: classSeg, Worker: w,
				Policy: func() *policy.Policy { return pol }, Settings: benchSettings(b, pol), Now: func() int64 { return now }}))(b)
			read := 0
			for b.Loop() {
				res, err := s.Sweep(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if !res.Classes || res.Published != 5000 {
					b.Fatalf("sweep by classes %v published %d: %+v", res.Classes, res.Published, res)
				}
				read = res.Rows
			}
			b.ReportMetric(float64(read), "rows-read")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/sweep")
		})
	}
}

// BenchmarkSweepOneCappedHost is BenchmarkSweepClasses's corpus (one host) under the default
// host limit, 4 renders at once of the node's render slots: the host may hold only its share
// of the set, the set never fills, and the class merge can stop only because the store lists
// its hosts and every one of them is at its cap (hosts.Shaper.Settled). read-on runs the same
// sweep with that stop switched off, side by side: it reads the whole due set.
func BenchmarkSweepOneCappedHost(b *testing.B) {
	pol := benchPolicy(b)
	classCorpus(b, pol)
	defer dropClassCorpus()
	set := SweepSettingsOf(benchConfigHostLimit(b, config.HostsMaxConcurrencyDefault), pol)
	for _, rows := range []int{100_000, 1_000_000} {
		if rows > classRows {
			continue
		}
		for _, readOn := range []bool{false, true} {
			name := fmt.Sprintf("due=%dk/settled", rows/1000)
			if readOn {
				name = fmt.Sprintf("due=%dk/read-on", rows/1000)
			}
			b.Run(name, func(b *testing.B) {
				now := benchBase + int64(rows) - 1
				w, _ := classSeg.Worker(0)
				s := qtest.Must(New(Options{Store: FromStore(classStore, nil), Changes: NewChanges(), Segment: classSeg, Worker: w,
					Policy: func() *policy.Policy { return pol }, Settings: func() *Settings { return &set }, Now: func() int64 { return now }}))(b)
				s.readOn = readOn
				read := 0
				for b.Loop() {
					res, err := s.Sweep(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if !res.Classes || res.HostsSettled == readOn || res.Published == 0 || res.Published >= set.Capacity {
						b.Fatalf("by classes %v, settled %v, published %d of %d: the host is not capped as meant", res.Classes, res.HostsSettled, res.Published, set.Capacity)
					}
					read = res.Rows
				}
				b.ReportMetric(float64(read), "rows-read")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/sweep")
			})
		}
	}
}
