package embedding_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// The one step rule of doc.go, against PyTorch (testdata/step_rule.py, its output in
// testdata/step_rule.txt): a gradient with no rows is a step (Update with no ids, Step after a
// backward pass over no ids), no gradient is none (Step with nothing pending, or after
// ZeroGrad), and neither changes a row or a state.
func TestStepRuleMatchesPyTorch(t *testing.T) {
	ref, err := os.ReadFile("testdata/step_rule.txt")
	if err != nil {
		t.Fatal(err)
	}
	var rowsStep, emptyStep, noneStep int64
	var unchanged string
	if _, err := fmt.Sscanf(string(ref), "rows %d\nempty %d %s\nnone %d", &rowsStep, &emptyStep, &unchanged, &noneStep); err != nil || unchanged != "unchanged" {
		t.Fatalf("testdata/step_rule.txt: %v (%q)", err, ref)
	}
	step := func(tbl *embedding.Table) int64 {
		st, err := tbl.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.Step
	}
	for _, how := range []string{"update", "backward"} {
		tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SparseAdam{LR: 0.1}}, how)
		update(t, tbl, []int64{1}, 1, 1)
		if got := step(tbl); got != rowsStep {
			t.Fatalf("%s: step %d after a gradient with rows, PyTorch %d", how, got, rowsStep)
		}
		before := dump(t, tbl)
		switch how {
		case "update": // a gradient with no rows, given directly
			update(t, tbl, nil)
		case "backward": // a gradient with no rows, from a backward pass over no ids
			sumStep(t, tbl)
		}
		after := dump(t, tbl)
		if after.Step != emptyStep {
			t.Errorf("%s: step %d after a gradient with no rows, PyTorch %d", how, after.Step, emptyStep)
		}
		after.Step = before.Step
		sameDump(t, how+": rows and states after a gradient with no rows", after, before)
		if err := tbl.Step(); err != nil { // nothing pending: no gradient
			t.Fatal(err)
		}
		if err := tbl.ZeroGrad(); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Step(); err != nil {
			t.Fatal(err)
		}
		if got := step(tbl); got != noneStep {
			t.Errorf("%s: step %d after steps with no gradient, PyTorch %d", how, got, noneStep)
		}
	}
}
