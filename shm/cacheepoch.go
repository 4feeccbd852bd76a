package shm

// BumpCacheEpoch raises the cache epoch in worker 0's block (CounterCacheEpoch) and returns the
// new epoch. Worker 0 calls it for an operator's rush or recache.
func (s *Segment) BumpCacheEpoch() uint64 {
	w, err := s.Worker(0)
	if err != nil {
		return 0 // a segment always has worker 0
	}
	w.Add(CounterCacheEpoch, 1)
	return w.Load(CounterCacheEpoch)
}

// CacheEpoch is the cache epoch in worker 0's block: what a render worker passes to its
// renderer before each render.
func (s *Segment) CacheEpoch() uint64 {
	w, err := s.Worker(0)
	if err != nil {
		return 0
	}
	return w.Load(CounterCacheEpoch)
}
