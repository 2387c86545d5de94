package dist

// A collection's bad input on one rank fails every rank's call, changes no shard, and leaves
// the ranks in step.

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["bags-bad"] = scenarioBagsBad
}

// On 2 ranks, rank 1 gives a collection (pooled or not) bad input, through its Forward and
// through CollectionPrefetches and TrainStep; every rank's call fails, no shard changes, and
// the next good step succeeds on both ranks: they are still in step.
func TestShardedCollectionsBadInput(t *testing.T) {
	for _, kind := range []string{"bags", "seq"} {
		t.Run(kind, func(t *testing.T) {
			res := runSharded(t, "bags-bad", 2, time.Minute, "GOREC_SHARD_COLLECTION="+kind)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// badCollectionInputs spoil a collection's input: those the collection refuses before it
// knows the features' ids (a missing key, both or neither bounds, closed values; weights or
// values not [N] of an unpooled collection), and those the exchange's checks refuse (the lengths' sum, float
// values, a pooled collection's weights of another length than the ids).
var badCollectionInputs = []struct {
	name  string
	only  string // "bags" or "seq": a pooled or unpooled collection's case only
	spoil func(*nn.KeyedJagged)
}{
	{"missing key", "", func(in *nn.KeyedJagged) { in.Keys = []string{"candidate", "user", "historyz"} }},
	{"lengths and offsets", "", func(in *nn.KeyedJagged) { in.Offsets = in.Lengths }},
	{"no bounds", "", func(in *nn.KeyedJagged) { in.Lengths = nil }},
	{"lengths sum", "", func(in *nn.KeyedJagged) {
		l, _ := cgotorch.ToSlice[int64](in.Lengths)
		l[len(l)-1]++
		in.Lengths = cgotorch.MustFromSlice(l)
	}},
	{"float values", "", func(in *nn.KeyedJagged) {
		in.Values = cgotorch.MustFromSlice(make([]float32, in.Values.Numel()))
	}},
	{"closed values", "", func(in *nn.KeyedJagged) {
		in.Values = cgotorch.MustFromSlice([]int64{1})
		in.Values.Close()
	}},
	{"short weights", "bags", func(in *nn.KeyedJagged) { in.Weights = cgotorch.MustFromSlice([]float32{1}) }},
	{"2-d values", "seq", func(in *nn.KeyedJagged) { in.Values = in.Values.Reshape(1, -1) }},
	{"weights", "seq", func(in *nn.KeyedJagged) {
		in.Weights = cgotorch.MustFromSlice(make([]float32, in.Values.Numel()))
	}},
}

// scenarioBagsBad: rank 1 spoils each of badCollectionInputs, given to the collection's
// Forward (and, unpooled, a ForwardEach with ids for fewer tables) and to CollectionPrefetches
// for TrainStep. Every rank's call must fail (ErrInvalidArgument on rank 1, ErrMismatch on
// rank 0), no shard may change, and a good step after each must succeed on both ranks.
func scenarioBagsBad(o Options) error {
	return withPair(o, func(g *Group, users, items *ShardedTable) error {
		return bagsBad(g, users, items, os.Getenv("GOREC_SHARD_COLLECTION") == "seq")
	})
}

func bagsBad(g *Group, users, items *ShardedTable, seq bool) error {
	m, err := newBagsModel(users, items, seq)
	if err != nil {
		return err
	}
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	bad, per := g.Rank() == 1, trainBatch/g.WorldSize()
	step := 0
	good := func() error { // a plain step on this rank's slice of the next batch
		b := globalBatch(step)[g.Rank()*per : (g.Rank()+1)*per]
		step++
		opt.ZeroGrad()
		if err := cgotorch.TryWithScope(func() error { l, err := m.loss(b); l.Backward(); return err }); err != nil {
			return err
		}
		return opt.Step()
	}
	if err := good(); err != nil { // some rows in every shard
		return err
	}
	calls := map[string]func(in nn.KeyedJagged) error{
		"forward": func(in nn.KeyedJagged) error {
			return cgotorch.TryWithScope(func() error { m.forward(in); return nil })
		},
		"train step": func(in nn.KeyedJagged) error {
			lookups, err := CollectionPrefetches(m.collection(), in)
			if err != nil {
				return fmt.Errorf("CollectionPrefetches: %w (want the refusal in its lookups)", err)
			}
			_, err = TrainStep(opt, func([]sample) []Prefetch { return lookups }, func([]sample) (*cgotorch.Tensor, error) {
				return nil, errors.New("the loss ran")
			}, nil)
			return err
		},
	}
	type badCall struct {
		name string
		call func() error
	}
	var cases []badCall
	for _, c := range badCollectionInputs {
		for _, via := range []string{"forward", "train step"} {
			if c.only != "" && (c.only == "seq") != seq {
				continue
			}
			in := bagsInput(globalBatch(100 + len(cases)))
			if bad {
				c.spoil(&in)
			}
			cases = append(cases, badCall{c.name + " (" + via + ")", func() error { return calls[via](in) }})
		}
	}
	if seq {
		cases = append(cases, badCall{"forward each with ids for fewer tables", func() error {
			ids := []*cgotorch.Tensor{cgotorch.MustFromSlice([]int64{trainID(1)}), cgotorch.MustFromSlice([]int64{trainID(2)})}
			if bad {
				ids = ids[:1]
			}
			_, err := users.ForwardEach([]nn.EmbeddingTable{users, items}, ids, embedding.ForwardOptions{Train: true, Padding: true, PaddingID: bagsPadding})
			return err
		}})
	}
	for _, c := range cases {
		before, err := shardStates(users, items)
		if err != nil {
			return err
		}
		err = c.call()
		switch {
		case bad && !errors.Is(err, ErrInvalidArgument):
			return fmt.Errorf("%s: %v, want ErrInvalidArgument", c.name, err)
		case !bad && !errors.Is(err, ErrMismatch):
			return fmt.Errorf("%s: %v, want ErrMismatch", c.name, err)
		}
		fmt.Printf("rank %d: %s: %v\n", g.Rank(), c.name, err)
		if after, err := shardStates(users, items); err != nil || after != before {
			return fmt.Errorf("%s: a shard changed (%v)", c.name, err)
		}
		if err := good(); err != nil {
			return fmt.Errorf("%s: the next good step: %w", c.name, err)
		}
	}
	return nil
}

// shardStates is shardState of each table, joined.
func shardStates(tables ...*ShardedTable) (string, error) {
	out := ""
	for _, t := range tables {
		s, err := shardState(t)
		if err != nil {
			return "", err
		}
		out += s + "\n"
	}
	return out, nil
}
