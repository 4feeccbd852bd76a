package intake

// TestSignals are the moments of intake's writes a test can wait on, so that a test of an
// interleaving (a result racing an upsert, a delete racing a commit) places one operation
// inside another's window without any timing. Each is a named hook, called when set, in the
// goroutine that reaches the moment; the structs that have moments (Applier, KeyLocks) hold a
// *TestSignals in their Test field, and a test shares one between them. Production leaves Test
// nil, and then no signal costs more than a nil check.
type TestSignals struct {
	// AfterDecide is called between an Applier batch's reads and its commit, with the batch's
	// keys locked: an operation started here is either inside the window (it finishes before
	// the commit) or serialised behind the batch (it waits for a key, and LockWait says so).
	AfterDecide func()
	// LockWait is called, once per Lock, when KeyLocks.Lock finds one of its keys held and is
	// about to wait for it.
	LockWait func()
}
