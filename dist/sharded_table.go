package dist

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// ShardedTable is an embedding table sharded by id across the ranks of a group: every id is
// owned by one rank (Owner), whose shard, an ordinary embedding.Table, holds its row and
// optimizer state. A row's initial value depends on the table's name, Config.Seed and the id
// only, as in a table of that name in one process (embedding.Config.Seed), so it does not
// depend on the world size.
//
// Its operations are collective: every rank calls them, in the same order (a rank's ids may
// differ, and may be none). Each rank deduplicates its ids, sends them to their owners, and
// gets their rows back; gradients go to the owners, which sum them per id and step their
// optimizer. Input is validated on every rank and the ranks agree before any shard changes:
// bad input on one rank (embedding.ErrBadInput there) makes every other rank return an error
// wrapping ErrMismatch, and no shard changes. A failed peer or a timeout breaks the group
// (ErrBroken). Save and LoadShardedTable checkpoint it, into any world size.
//
// nn.Embedding and nn.EmbeddingBag take it as their table (it is an nn.EmbeddingTable): the
// rows a training Forward returns are cached on this rank, a backward pass leaves their
// gradients pending here, and Step (the optimizer's) sends them to the owners. Fused
// optimizers and MaxNorm in training are not supported (ErrBadInput).
//
// Its methods are safe from any goroutine, but collectives run in the order the ranks call
// them: call them from one goroutine, or in an order every rank repeats.
type ShardedTable struct {
	g     *Group
	name  string
	cfg   embedding.Config
	shard *embedding.Table // the rows this rank owns
	// cache holds the rows of this rank's training lookups since the last step (their gradients
	// pending in it), but of the ids the owners kept out (it admits none: sharded_kept_out.go);
	// view those of one inference lookup.
	cache, view  *embedding.Table
	pipe         *tablePipe // the rows a TrainPipeline fetched for this step's lookups, while it runs them
	stepping     *stepHook  // while a TrainPipeline steps: where this owner's update records its ids
	held         int        // TrainPipelines holding rows fetched for a batch not trained yet
	fault        fault      // a deliberate defect, set by tests only
	beforeCommit func()     // run by Save on rank 0 before it commits (tests: a crash there)
}

// fault is a deliberate defect of the gradient exchange, which the equivalence tests inject
// to show that they catch it.
type fault int

const (
	noFault           fault = iota
	faultWrongOwner         // gradients go to the next rank after the owner
	faultLostGradient       // the first pending id's gradient is not sent
	faultNoSum              // an owner keeps one rank's gradient per id instead of their sum
)

// Owner returns the rank that owns id in a group of worldSize ranks: the splitmix64 finalizer
// of the id (as an unsigned 64-bit integer) modulo worldSize:
//
//	z = id + 0x9e3779b97f4a7c15
//	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
//	z = (z ^ z>>27) * 0x94d049bb133111eb
//	owner = (z ^ z>>31) % worldSize
//
// The mix spreads strided ids (all even, all multiples of the world size) over the ranks. It is
// part of the format of sharded tables: it never changes.
func Owner(id int64, worldSize int) int {
	z := uint64(id) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int((z ^ z>>31) % uint64(worldSize))
}

// NewShardedTable creates this rank's shard of a sharded table named name (every rank calls it
// with the same name and Config). The ranks compare digests of their name and Config: a rank
// whose differ (another Dim, Optimizer or its parameters, Seed, Initializer...) makes the
// creation fail on every rank with ErrMismatch, and a rank that cannot create its shard (a
// name taken, a bad Config: its own error there) makes it fail on the others with ErrMismatch.
// The shard is an embedding table named name in this process (so that its rows start as those
// of a table of that name in one process: see embedding.Config.Seed); the rank's caches are
// unnamed tables.
func NewShardedTable(g *Group, name string, cfg embedding.Config) (*ShardedTable, error) {
	const op = "new sharded table"
	s := &ShardedTable{g: g, name: name, cfg: cfg}
	err := s.open()
	// the flag and the digest of every rank: [failed, digest words...]
	mine := append([]int64{boolInt(err != nil)}, configDigest(name, cfg)...)
	all, gerr := s.gatherInt64s(op, mine)
	if gerr != nil {
		return nil, errors.Join(gerr, err, s.Close())
	}
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	n := len(mine)
	var failed, differ []int
	for r := 0; r < g.WorldSize(); r++ {
		theirs := all[r*n : (r+1)*n]
		if theirs[0] != 0 {
			failed = append(failed, r)
		} else if !slices.Equal(theirs[1:], mine[1:]) {
			differ = append(differ, r)
		}
	}
	switch {
	case failed != nil:
		err = &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank(s) %v could not create their shard", name, failed)}
	case differ != nil:
		err = &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank(s) %v have another name or configuration "+
			"(dim, optimizer, seed, initializer...) than rank %d", name, differ, g.Rank())}
	}
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// open creates the shard and the caches.
func (s *ShardedTable) open() error {
	var err error
	if s.shard, err = embedding.NewNamed(s.name, s.cfg); err != nil {
		return err
	}
	local := embedding.Config{Dim: s.cfg.Dim, Initializer: embedding.Zeros{}}
	if s.cache, err = embedding.New(local); err != nil {
		return err
	}
	if err = s.cache.SetAdmission(cacheAdmission); err != nil {
		return err
	}
	s.view, err = embedding.New(local)
	return err
}

// configDigest is the SHA-256 of the table's name and Config, as four int64 words.
func configDigest(name string, cfg embedding.Config) []int64 {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%q %#v", name, cfg)))
	out := make([]int64, 4)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(sum[8*i:]))
	}
	return out
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Close frees this rank's shard and caches (not collective). Closing twice is fine.
func (s *ShardedTable) Close() error {
	var errs []error
	for _, t := range []*embedding.Table{s.shard, s.cache, s.view} {
		if t != nil {
			errs = append(errs, t.Close())
		}
	}
	return errors.Join(errs...)
}

// Name is the table's name.
func (s *ShardedTable) Name() string { return s.name }

// Dim is the width of a row.
func (s *ShardedTable) Dim() int { return s.cfg.Dim }

// Config is the table's configuration.
func (s *ShardedTable) Config() embedding.Config { return s.shard.Config() }

// Group is the table's process group.
func (s *ShardedTable) Group() *Group { return s.g }

// Shard is this rank's shard: the ids it owns. Change it only through the ShardedTable.
func (s *ShardedTable) Shard() *embedding.Table { return s.shard }

// LR is the learning rate of the table's optimizer.
func (s *ShardedTable) LR() float64 { return s.shard.LR() }

// SetLR sets the learning rate of this rank's shard (embedding.Table.SetLR). It is not
// collective, but every rank must set the same rate (as an optimizer's schedule does).
func (s *ShardedTable) SetLR(lr float64) error { return s.shard.SetLR(lr) }

// Len is the number of ids in the whole table (collective).
func (s *ShardedTable) Len() (int, error) {
	st, err := s.Stats()
	return st.Len, err
}

// Stats describes the whole table (collective): Len, Capacity and Bytes summed over the
// shards; Step, the steps taken (the same on every shard).
func (s *ShardedTable) Stats() (embedding.Stats, error) {
	st, err := s.shard.Stats()
	if err != nil {
		return st, err
	}
	w, err := s.sumInt64s("stats", []int64{int64(st.Len), int64(st.Capacity), st.Bytes})
	if err != nil {
		return st, err
	}
	st.Len, st.Capacity, st.Bytes = int(w[0]), int(w[1]), w[2]
	return st, nil
}

var (
	_ nn.EmbeddingTable   = (*ShardedTable)(nil)
	_ nn.JointTable       = (*ShardedTable)(nil)
	_ nn.JointLookupTable = (*ShardedTable)(nil)
)
