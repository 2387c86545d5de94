package dist

import "fmt"

// SetAdmission is embedding.Table.SetAdmission on every shard (collective: every rank passes
// the same k): a new id gets a row at its k-th training lookup; until then its lookups give zero
// rows and the gradients sent for it are dropped. As in one table, a lookup that keeps an id
// out carries no gradient of it, even when a later lookup of the same step (another module, a
// second Forward) admits it before the Step: only the gradients of lookups that found a row
// reach the owner (the owners tell the ranks which ids each training lookup kept out). The
// features of one table in one ForwardBags or ForwardEach call (a collection's) are one lookup,
// counted together, where one table's collection looks them up one by one. k <= 1 admits every id at once and forgets the counts. Every occurrence
// counts, as in one table fed every rank's batch: an id twice in one rank's batch and once in
// another's counts three times (a rank sends its distinct ids, each with how often its batch
// holds it, while the table counts: with k > 1 or Config.TrackAccess). Ranks passing another
// k fail with ErrMismatch and no shard changes.
func (s *ShardedTable) SetAdmission(k int) error {
	const op = "set admission"
	if err := s.agree(op, nil, int64(k), fmt.Sprint("threshold (this rank's: ", k, ")")); err != nil {
		return err
	}
	_, err := s.settleCount(op, s.shard.SetAdmission(k), 0)
	return err
}

// Admission returns the admission threshold and how many ids the shards are counting, summed
// (collective).
func (s *ShardedTable) Admission() (k, counted int, err error) {
	k, c, err := s.shard.Admission()
	total, err := s.settleCount("admission", err, c)
	return k, total, err
}

// admitting says whether the table's shards admit ids at a later lookup than their first (a
// threshold above 1, the same on every rank).
func (s *ShardedTable) admitting() bool {
	k, _, err := s.shard.Admission()
	return err == nil && k > 1
}
