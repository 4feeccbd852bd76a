package funnel

import (
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

type opKind uint8

const (
	opPut opKind = iota
	opPutIfAbsent
	opPutIfUnchanged // applies only over a row equal to op.was
	opDelete
	opModify // decide turns the key's current row and target into a put (Modify)
)

// op is one prepared funnel write. Keys and encoded values are built by the caller's
// goroutine, so the committer only reads the old row, encodes 44 bytes and calls Badger.
type op struct {
	kind      opKind
	key       []byte // cacheKey
	sKey      []byte
	tKey      []byte
	pKey      []byte
	row       store.Row
	was       store.Row // opPutIfUnchanged: the row it may replace
	hasMirror bool      // mirror overrides what the row carries over (store.Mirror)
	mirror    store.Mirror
	target    []byte // encoded target, or nil
	page      []byte // encoded page, or nil
	dropPage  bool   // delete p/ (puts)
	applied   bool   // set by the committer: staged in a transaction that committed
	failed    bool   // set by the committer: refused, excluded from its transaction
	// opModify: the Change's Decide, and the earliest due time it may return, which the
	// batch registers for the floor protocol before Decide has run.
	decide func(store.Current) (store.Write, bool, error)
	minDue int64
}

// setKeys builds the keys o writes: always the schedule row's, the target's and page's only
// when o writes them (most writes are bare reschedules).
func (o *op) setKeys(cacheKey []byte, target, page bool) {
	o.key = cacheKey
	o.sKey = keyspace.Schedule(cacheKey)
	if target {
		o.tKey = keyspace.Target(cacheKey)
	}
	if page {
		o.pKey = keyspace.Page(cacheKey)
	}
}

func (o *op) preparePut(w *store.Write) error {
	sch := w.Schedule
	if sch.Key() == nil { // the zero Schedule: NewSchedule never makes a nil key
		return store.ErrScheduleUnset
	}
	*o = op{kind: opPut, row: sch.Row()}
	o.setKeys(sch.Key(), w.Target != nil, w.Page != nil || w.DropPage)
	o.dropPage = w.DropPage && w.Page == nil
	if w.Target != nil {
		v, err := w.Target.MarshalBinary()
		if err != nil {
			return err
		}
		o.target, o.hasMirror, o.mirror = v, true, store.MirrorOf(w.Target)
	}
	if w.Page != nil {
		v, err := w.Page.MarshalBinary()
		if err != nil {
			return err
		}
		o.page = v
	}
	return nil
}

// request is one caller's submission, acknowledged on done.
type request struct {
	ops  []op
	err  error // first error of any of its ops or transactions; committer-owned until done
	done chan error
}

// submit enqueues ops as one request and waits for its acknowledgement. It returns how many
// ops were applied (opPutIfAbsent skips existing rows).
func (f *Funnel) submit(ops []op) (int, error) {
	req := &request{ops: ops, done: make(chan error, 1)}
	f.sendMu.RLock()
	if f.sendClosed {
		f.sendMu.RUnlock()
		return 0, store.ErrClosed
	}
	f.reqs <- req
	f.sendMu.RUnlock()
	err := <-req.done
	n := 0
	for i := range ops {
		if ops[i].applied {
			n++
		}
	}
	return n, err
}
