package intake

import (
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// MaxReportErrors bounds the item errors an answer lists, by index (the first few).
const MaxReportErrors = 20

// WireLease converts a lease of the table for the wire.
func WireLease(l shm.Lease) wire.Lease {
	return wire.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash}
}

// ShmLease converts a lease from the wire. It is a lease of the table only once
// shm.Leases.Valid or Check has said so.
func ShmLease(l wire.Lease) shm.Lease {
	return shm.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash}
}

// Writer is the funnel's writes that intake makes: batched puts and the read-modify-write.
type Writer interface {
	WriteSchedules([]store.Write) error
	Modify([]store.Change) ([]bool, error)
}

// FinalStatus reports whether code is a final HTTP status (200–599): the status a render ends
// with and a stored page is served with (1xx are informational, never a page; WriteHeader
// panics on a code outside 100–599). The results endpoint and GET /v1/pages both judge
// statuses with it.
func FinalStatus(code int) bool { return code >= 200 && code <= 599 }
