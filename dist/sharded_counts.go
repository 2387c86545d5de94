package dist

import "slices"

// A sharded table counts lookups as one table does: an owner receives each rank's distinct
// ids, so for a table that counts, each id travels with how often the rank's batch holds it,
// and the owner's shard counts it that often (embedding.Table.LookupCounted). Tables that count
// nothing send the ids alone.

// counting says whether the owners' training lookups of the table count: in the rows' access
// frequencies (Config.TrackAccess) or in admission counts (a threshold above 1). Every rank
// holds the same Config and threshold (SetAdmission and the loads set it on every shard), so
// the ranks agree on it; route's digest checks that they do.
func (s *ShardedTable) counting() bool {
	return s.cfg.TrackAccess || s.admitting()
}

// uniqueCounted is uniqueIDs and, when count, how often ids holds each of them (nil otherwise).
func uniqueCounted(ids []int64, padding bool, paddingID int64, count bool) (u, counts []int64) {
	if !count {
		return uniqueIDs(ids, padding, paddingID), nil
	}
	u = slices.Clone(ids)
	slices.Sort(u)
	n := 0 // u[:n] holds the distinct ids so far (written behind the reads)
	for i := 0; i < len(u); {
		j := i + 1
		for j < len(u) && u[j] == u[i] {
			j++
		}
		if !padding || u[i] != paddingID {
			u[n] = u[i]
			counts = append(counts, int64(j-i))
			n++
		}
		i = j
	}
	return u[:n], counts
}

// occurrences returns how often each of n distinct ids occurs in a batch whose k-th id is the
// pos[k]-th of them (distinct's positions), or nil when pos is nil (the batch holds each once).
func occurrences(pos []int64, n int) []int64 {
	if pos == nil {
		return nil
	}
	counts := make([]int64, n)
	for _, k := range pos {
		counts[k]++
	}
	return counts
}
