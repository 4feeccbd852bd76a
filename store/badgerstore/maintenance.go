package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// maxRewritesPerGC bounds one GC run: each rewrite copies a value-log file's live entries, and
// a run must not monopolise the disk. The next tick continues.
const maxRewritesPerGC = 8

// StartGC starts value-log garbage collection every Options.GCInterval, on the ticker
// Options.NewTicker makes. It is a no-op if GC is running or the store is closed.
func (s *Store) StartGC() {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if s.gcStop != nil || s.closed.Load() {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	s.gcStop, s.gcDone = stop, done
	t := s.opts.NewTicker(s.opts.GCInterval)
	go func() {
		defer close(done)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C():
				_, _ = s.RunGC()
			}
		}
	}()
}

// StopGC stops the GC loop and waits for a run in progress to finish. It is safe to call
// twice, and before StartGC.
func (s *Store) StopGC() {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if s.gcStop == nil {
		return
	}
	close(s.gcStop)
	<-s.gcDone
	s.gcStop, s.gcDone = nil, nil
}

// RunGC runs one value-log GC: it rewrites value-log files whose garbage fraction is at least
// Options.GCDiscardRatio, up to a bound per run, and returns how many it rewrote. Finding
// nothing to rewrite is not an error. It logs one line.
func (s *Store) RunGC() (rewrites int, err error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	start := time.Now()
	// A rewrite deletes a value-log file once its values are moved, and the read view, taken
	// before the move, points into it: while GC runs, reads open their own transactions, and
	// a fresh view is published after it (readview.go).
	s.gcRunning.Add(1)
	defer func() {
		s.publishView()
		s.gcRunning.Add(-1)
	}()
	for rewrites < maxRewritesPerGC {
		if err = s.db.RunValueLogGC(s.opts.GCDiscardRatio); err != nil {
			break
		}
		rewrites++
	}
	if errors.Is(err, badger.ErrNoRewrite) || rewrites == maxRewritesPerGC {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("store: value-log gc: %w", err)
	}
	lsm, vlog := s.db.Size()
	ev := s.log.Info()
	if err != nil {
		ev = s.log.Warn().Err(err)
	}
	ev.Int("rewrites", rewrites).Int64("lsm_bytes", lsm).Int64("vlog_bytes", vlog).
		Dur("took", time.Since(start)).Msg("value-log gc")
	if s.opts.TestSignals.AfterGC != nil {
		s.opts.TestSignals.AfterGC(rewrites, err)
	}
	return rewrites, err
}

// reconcileBatch is how many repairs Reconcile sends through the funnel per call.
const reconcileBatch = 1024

// Reconcile finds targets whose schedule row is missing and files them again through the
// funnel: due at nowMs, submitted from the target's source (sitemap or API), the effective
// interval from the target's stored interval, never-rendered and failing from its record. It
// returns how many rows it restored. A row written by someone else between the scan and the
// repair is left alone (the repair is put-if-absent). A target that does not decode is
// skipped and counted in the log line, not repaired.
//
// It merges the t/ and s/ key ranges of one snapshot, reading only the values of the targets
// it repairs.
func (s *Store) Reconcile(nowMs int64) (restored int, err error) {
	if nowMs < 0 {
		return 0, fmt.Errorf("%w: negative now %d", store.ErrInvalidArgument, nowMs)
	}
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	start := time.Now()
	var checked, missing, corrupt int
	defer func() {
		ev := s.log.Info()
		if err != nil {
			ev = s.log.Error().Err(err)
		}
		ev.Int("targets", checked).Int("missing", missing).Int("restored", restored).
			Int("corrupt", corrupt).Dur("took", time.Since(start)).Msg("reconcile")
	}()

	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	s.catchUpView(txn.ReadTs())
	tit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(keyspace.PrefixTarget)})
	defer tit.Close()
	sit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(keyspace.PrefixSchedule)})
	defer sit.Close()
	sit.Rewind()

	var pending []store.Write
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		n, err := s.refileIfAbsent(pending)
		restored += n
		pending = pending[:0]
		return err
	}
	for tit.Rewind(); tit.Valid(); tit.Next() {
		checked++
		ck := tit.Item().Key()[len(keyspace.PrefixTarget):]
		for sit.Valid() && bytes.Compare(sit.Item().Key()[len(keyspace.PrefixSchedule):], ck) < 0 {
			sit.Next()
		}
		if sit.Valid() && bytes.Equal(sit.Item().Key()[len(keyspace.PrefixSchedule):], ck) {
			continue
		}
		missing++
		var t store.Target
		if err := tit.Item().Value(t.UnmarshalBinary); err != nil {
			corrupt++
			continue
		}
		sch, err := store.NewSchedule(ck, nowMs, t.Source.Submitted(), t.StoredIntervalMs, store.Lanes{
			NeverRendered: t.LastRender.Status == 0,
			Failing:       t.Failures.Count > 0,
		})
		if err != nil {
			corrupt++
			continue
		}
		pending = append(pending, store.Write{Schedule: sch, Target: &t})
		if len(pending) == reconcileBatch {
			if err := flush(); err != nil {
				return restored, err
			}
		}
	}
	return restored, flush()
}

// Compact flattens the LSM tree so that scans merge as few tables as possible. Background
// compaction gets there on its own over time; Compact is for a maintenance window, or for a
// benchmark that must measure the steady state rather than a freshly loaded tree.
func (s *Store) Compact() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := s.db.Flatten(2); err != nil {
		return fmt.Errorf("store: compact: %w", err)
	}
	return nil
}
