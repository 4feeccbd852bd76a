package shm

import "sync/atomic"

// HostRendersBefore counts the node's renders in flight (live host tokens, of every host and
// every process: Leases.AdmitHost) and, of them, those whose token was taken before sinceMs.
// Worker 0 confirms a new division of the hosts' limits when none was taken before it used
// the division (package hosts, farmnode.go). A token's acquiredAt is written after it is
// taken, so a scan racing a take may read the slot's previous one: always older, which only
// delays a confirmation. It scans the whole table once.
func (l *Leases) HostRendersBefore(sinceMs, nowMs int64) (before, total int) {
	relNow := l.rel(nowMs)
	for i := range l.capacity {
		sl := l.slot(i)
		st := atomic.LoadUint64(&sl.state)
		if atomic.LoadUint64(&sl.holder)&HostSlotMark == 0 || st&releasedBit != 0 || st>>expiryShift <= relNow {
			continue
		}
		total++
		if int64(atomic.LoadUint64(&sl.acquiredAt)) < sinceMs {
			before++
		}
	}
	return before, total
}
