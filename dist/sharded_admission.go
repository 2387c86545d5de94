package dist

import "fmt"

// SetAdmission is embedding.Table.SetAdmission on every shard (collective: every rank passes
// the same k): a new id gets a row at its k-th training lookup; until then its lookups give zero
// rows and the gradients sent for it are dropped. k <= 1 admits every id at once and forgets the
// counts. An owner counts each rank's lookup of an id once per batch (a rank sends its distinct
// ids): an id twice in one rank's batch counts once, where one table counts it twice, and an id
// in the batches of two ranks counts twice. Ranks passing another k fail with ErrMismatch and
// no shard changes.
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
