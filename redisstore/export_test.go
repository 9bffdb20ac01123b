package redisstore

// AlwaysCoalesce makes s (made with Options.Coalesce) send every claim and fenced write in a
// pipeline, a call alone too.
func (s *Store) AlwaysCoalesce() {
	s.claims.Always, s.fences.Always = true, true
}

// CoalesceStats returns the claim and fenced-write pipelines sent so far and the calls they
// carried.
func (s *Store) CoalesceStats() (claimPipelines, claims, fencePipelines, fences int64) {
	return s.claims.Requests.Load(), s.claims.Calls.Load(), s.fences.Requests.Load(), s.fences.Calls.Load()
}

// GrantReads returns how many grants the grant listing scripts of s have read so far.
func (s *Store) GrantReads() int64 { return s.grantReads.Load() }
