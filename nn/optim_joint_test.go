package nn

import (
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// jointFake is a JointTable over a local table that records the StepTables calls of its group.
type jointFake struct {
	*embedding.Table
	group string
	calls *[][]string // each call's tables, by name
}

func (j *jointFake) StepGroup() any { return j.group }

func (j *jointFake) StepTables(ts []EmbeddingTable) error {
	var names []string
	for _, t := range ts {
		names = append(names, t.Name())
		if err := t.Step(); err != nil {
			return err
		}
	}
	*j.calls = append(*j.calls, names)
	return nil
}

// Optimizer.Step steps the JointTables of one StepGroup in one StepTables call with each table
// once (two modules share "a"), a group per key, and the other tables by their own Step.
func TestOptimizerStepsJointTablesTogether(t *testing.T) {
	var calls [][]string
	table := func(name, group string) EmbeddingTable {
		tb, err := embedding.NewNamed(name, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tb.Close() })
		if group == "" {
			return tb
		}
		return &jointFake{Table: tb, group: group, calls: &calls}
	}
	a, b, c, local := table("joint-a", "g1"), table("joint-b", "g1"), table("joint-c", "g2"), table("joint-local", "")
	m := &Container{}
	m.Add("a", NewEmbedding(a, EmbeddingOptions{}))
	m.Add("local", NewEmbedding(local, EmbeddingOptions{}))
	m.Add("c", NewEmbeddingBag(c, embedding.Sum, EmbeddingOptions{}))
	m.Add("b", NewEmbedding(b, EmbeddingOptions{}))
	m.Add("a-again", NewEmbeddingBag(a, embedding.Sum, EmbeddingOptions{}))
	opt, err := NewSGD(m, SGDOptions{LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids := cgotorch.MustFromSlice([]int64{1, 2})
	defer ids.Close()
	for _, tb := range []EmbeddingTable{a, b, c, local} {
		out, err := tb.Forward(ids, embedding.ForwardOptions{Train: true})
		if err != nil {
			t.Fatal(err)
		}
		out.Sum().Backward()
		out.Close()
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"joint-a", "joint-b"}, {"joint-c"}}; !slices.EqualFunc(calls, want, slices.Equal) {
		t.Errorf("StepTables calls %v, want %v", calls, want)
	}
	for _, tb := range []EmbeddingTable{a, b, c, local} {
		if st, err := tb.Stats(); err != nil || st.Step != 1 {
			t.Errorf("table %q: %d steps (%v), want 1", tb.Name(), st.Step, err)
		}
	}
}
