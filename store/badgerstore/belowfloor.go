package badgerstore

// RowsBelowFloor counts, up to limit, the schedule rows due below the floor. The floor
// protocol says there are none; a node reports the count as an alarm (freshq_below_floor), the
// one the system freshq replaces lacked when rows sat below a floor for weeks.
func (s *Store) RowsBelowFloor(limit int) (int, error) {
	floor := s.floor.Load()
	if floor <= 0 {
		return 0, nil
	}
	res, err := s.ScanDue(0, floor-1, limit)
	return len(res.Rows), err
}
