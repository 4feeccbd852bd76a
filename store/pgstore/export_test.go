package pgstore

// SetBeforeReclassifyUpdateForTest makes Reclassify call f between reading a batch and moving
// it: a test changes a row there, as a concurrent write would.
func SetBeforeReclassifyUpdateForTest(s *Store, f func()) { s.testBeforeReclassifyUpdate = f }

// ScanRereadsForTest is how many scans needed their second, full read of every shard.
func ScanRereadsForTest(s *Store) uint64 { return s.scanRereads.Load() }

// VacuumLoopRunningForTest reports whether s's vacuum loop (vacuum.go) is running: started by
// Open and not yet ended by Close.
func VacuumLoopRunningForTest(s *Store) bool {
	if s.vacuumDone == nil {
		return false
	}
	select {
	case <-s.vacuumDone:
		return false
	default:
		return true
	}
}

// ListScheduleQueryForTest is the query and arguments ListSchedule runs, for a test to EXPLAIN.
func ListScheduleQueryForTest(prefix, after []byte, limit int) (string, []any) {
	return scheduleRangeQuery(prefix, after, limit)
}
