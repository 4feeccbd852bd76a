package badgerstore

import (
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
)

// manualTicker is a Ticker the test drives.
type manualTicker struct {
	c       chan time.Time
	stopped chan struct{}
}

func (m *manualTicker) C() <-chan time.Time { return m.c }
func (m *manualTicker) Stop()               { close(m.stopped) }

func TestGCLifecycle(t *testing.T) {
	tk := &manualTicker{c: make(chan time.Time), stopped: make(chan struct{})}
	ran := make(chan error, 4)
	var interval time.Duration
	st := openTest(t, &Options{
		GCInterval:  time.Hour,
		NewTicker:   func(d time.Duration) Ticker { interval = d; return tk },
		TestSignals: store.TestSignals{AfterGC: func(_ int, err error) { ran <- err }},
	})
	st.StopGC() // before start: a no-op
	st.StartGC()
	st.StartGC() // twice: still one loop
	if interval != time.Hour {
		t.Fatalf("ticker made with %v", interval)
	}
	tk.c <- time.Time{}
	if err := <-ran; err != nil {
		t.Fatalf("gc on an empty store: %v", err)
	}
	tk.c <- time.Time{} // the loop is still there
	<-ran
	st.StopGC()
	<-tk.stopped // the loop stopped its ticker
	st.StopGC()  // twice: a no-op
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st.StartGC() // after Close: a no-op
	st.StopGC()
	if _, err := st.RunGC(); !isErr(err, store.ErrClosed) {
		t.Fatalf("RunGC after Close: %v", err)
	}
}

// GC reclaims value-log space held by overwritten pages.
func TestRunGCRewrites(t *testing.T) {
	dir := t.TempDir()
	o := &Options{ValueLogFileSize: 1 << 20, MemTableSize: 1 << 20, GCDiscardRatio: 0.1,
		NumLevelZeroTables: 1, NumLevelZeroTablesStall: 8} // so Flatten finds L0 worth compacting
	st, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("x", 2<<10)) // in the value log
	const rounds = 30                          // enough flushes for compaction to drop versions
	for round := range rounds {
		var ws []store.Write
		for i := range 200 {
			pg := store.Page{Status: 200, Body: body, RenderedAtMs: int64(round)}
			ws = append(ws, store.Write{Schedule: mustSchedule(t, urlKey(i), int64(round), false, 0, store.Lanes{}), Page: &pg})
		}
		mustWrite(t, st, ws...)
	}
	// Discard statistics come from compaction: close (flushing the memtable to L0), reopen,
	// and flatten, so the overwritten values are counted as garbage.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(dir, o); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.db.Flatten(2); err != nil {
		t.Fatal(err)
	}
	total := 0
	for range 4 {
		n, err := st.RunGC()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	t.Logf("value-log files rewritten: %d", total)
	if total == 0 {
		t.Fatal("GC rewrote nothing after 29 of 30 page versions became garbage")
	}
	for i := range 200 {
		pg, err := st.GetPage([]byte(urlKey(i)))
		if err != nil || pg.RenderedAtMs != rounds-1 || len(pg.Body) != len(body) {
			t.Fatalf("page %d after gc: %v", i, err)
		}
	}
}

// The repair is put-if-absent: a row the funnel wrote meanwhile is kept.
func TestRefileIfAbsentKeepsNewerRow(t *testing.T) {
	st := openTest(t, nil)
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "k", 7, true, 5, store.Lanes{})})
	tg := sampleTarget()
	n, err := st.refileIfAbsent([]store.Write{
		{Schedule: mustSchedule(t, "k", 100, false, 0, store.Lanes{}), Target: &tg},
		{Schedule: mustSchedule(t, "new", 100, false, 0, store.Lanes{}), Target: &tg},
	})
	if err != nil || n != 1 {
		t.Fatalf("refiled %d, %v", n, err)
	}
	if r, _ := st.GetSchedule([]byte("k")); r.DueAtMs != 7 {
		t.Fatalf("existing row overwritten: %+v", r)
	}
	if r, _ := st.GetSchedule([]byte("new")); r.StoredIntervalMs != tg.StoredIntervalMs {
		t.Fatalf("refiled row: %+v", r)
	}
	if _, err := st.GetTarget([]byte("new")); !isErr(err, store.ErrNotFound) {
		t.Fatalf("refile rewrote the target: %v", err)
	}
}

// Schedule rows, projections and class entries stay in the LSM tree at any threshold Validate
// takes: the sweep reads them by the million and must never touch the value log.
func TestValueThresholdKeepsRowsInline(t *testing.T) {
	for name, n := range map[string]int{"row": store.RowLen, "projection": store.ProjectionLen} {
		if n >= minValueThreshold {
			t.Errorf("a %s is up to %d bytes: at the least ValueThreshold (%d) it would go to the value log", name, n, minValueThreshold)
		}
	}
	o := (&Options{ValueThreshold: minValueThreshold - 1}).EnsureDefaults()
	if err := o.Validate(); err == nil {
		t.Errorf("ValueThreshold %d validated", o.ValueThreshold)
	}
}

func TestOptions(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if o.MemTableSize != 8<<20 || o.NumMemtables != 3 || o.Compression != CompressionNone || o.Floor == nil ||
		o.ValueThreshold != minValueThreshold || o.BaseLevelSize != 32<<20 {
		t.Fatalf("defaults: %+v", o)
	}
	for _, bad := range []func(*Options){
		func(o *Options) { o.MemTableSize = 1 },
		func(o *Options) { o.NumMemtables = -1 },
		func(o *Options) { o.NumLevelZeroTablesStall = o.NumLevelZeroTables },
		func(o *Options) { o.BlockCacheSize = -1 },
		func(o *Options) { o.Compression = 9 },
		func(o *Options) { o.Compression, o.BlockCacheSize = CompressionZSTD, 0 },
		func(o *Options) { o.NumCompactors = 1 },
		func(o *Options) { o.ValueThreshold = o.MemTableSize },
		func(o *Options) { o.ValueLogFileSize = 1 },
		func(o *Options) { o.BaseLevelSize = 1 },
		func(o *Options) { o.MaxBatchWrites = -1 },
		func(o *Options) { o.GCInterval = -1 },
		func(o *Options) { o.GCDiscardRatio = 1 },
	} {
		o := Options{}
		o.EnsureDefaults()
		bad(&o)
		if err := o.Validate(); !isErr(err, store.ErrInvalidOptions) {
			t.Errorf("%+v validated: %v", o, err)
		}
		if o.BlockCacheSize == 0 {
			continue // Open's EnsureDefaults gives it a cache: valid there
		}
		if st, err := Open(t.TempDir(), &o); !isErr(err, store.ErrInvalidOptions) {
			t.Errorf("Open accepted invalid options: %v", err)
			st.Close()
		}
	}
	o = Options{Compression: CompressionSnappy}
	st := openTest(t, &o)
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "k", 1, false, 0, store.Lanes{})})
	if o.MemTableSize != 0 {
		t.Fatal("Open modified the caller's Options")
	}
	if got := st.db.Opts().BaseLevelSize; got != 32<<20 {
		t.Fatalf("Badger opened with a base level of %d bytes, want the default 32 MiB", got)
	}
	if _, err := Open(st.db.Opts().Dir, nil); err == nil {
		t.Fatal("a second Open of a locked directory succeeded")
	}
}

// Reconcile skips a target that does not decode, rather than repairing it or stopping.
func TestReconcileSkipsCorruptTarget(t *testing.T) {
	st := openTest(t, nil)
	tg := sampleTarget()
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "good", 5, false, 0, store.Lanes{}), Target: &tg})
	rawSet(t, st, targetKey([]byte("broken")), []byte{1})
	if n, err := st.Reconcile(300_000); err != nil || n != 0 {
		t.Fatalf("corrupt target: %d %v", n, err)
	}
	if _, err := st.GetSchedule([]byte("broken")); !isErr(err, store.ErrNotFound) {
		t.Fatalf("a row was filed for a corrupt target: %v", err)
	}
}

// The repair refuses an implausible due time like every other funnel path.
func TestRefileIfAbsentRefusesImplausibleDue(t *testing.T) {
	st := openTest(t, &Options{RefuseImplausibleDue: true})
	for _, due := range []int64{0, store.MinDueMs - 1, store.MaxDueMs + 1} {
		sch := mustSchedule(t, "desktop|https://a.test/", due, false, 0, store.Lanes{})
		if _, err := st.refileIfAbsent([]store.Write{{Schedule: sch}}); !isErr(err, store.ErrImplausibleDue) {
			t.Fatalf("refile if absent due %d: %v", due, err)
		}
	}
}
