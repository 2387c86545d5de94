package embedding_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// A capacity beyond 2^40 ids, or one whose rows and id map need more than the machine's
// physical memory, is refused at once (ErrBadInput), before anything is allocated. Before the
// fix, 2^43 spent 30 s and 6.3 GB before std::bad_alloc, and 2^29 at dim 4 was accepted with
// 24 GB of Stats().Bytes on a 23 GB machine.
func TestCapacityRefused(t *testing.T) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	phys := uint64(si.Totalram) * uint64(si.Unit)
	// Dim 4, Adagrad: 32 bytes of row and state and 32 of id map an id.
	overRAM := int(phys/64) + 1
	for _, c := range []struct {
		capacity int
		why      string
	}{{1 << 43, "limit of 2^40"}, {1<<40 + 1, "limit of 2^40"}, {overRAM, "memory"}} {
		tbl, err := embedding.NewNamed("capacity", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}, Capacity: c.capacity})
		if !errors.Is(err, embedding.ErrBadInput) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Capacity %d: %v, want ErrBadInput about the %s", c.capacity, err, c.why)
		}
		if err == nil {
			tbl.Close()
		}
	}
	tbl := newTable(t, embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}, Capacity: 1 << 16})
	if st, err := tbl.Stats(); err != nil || st.Capacity < 1<<16 {
		t.Errorf("Capacity 2^16: %+v, %v", st, err)
	}
}

// A name holding a NUL byte is refused: the C side took its prefix, so New("a\x00b") then
// blocked New("a"). Names over 255 bytes are refused too. Before the fix New("a\x00b")
// succeeded and New("a") failed with ErrNameTaken.
func TestTableNameNULAndLength(t *testing.T) {
	base := t.Name()
	if _, err := embedding.NewNamed(base+"\x00b", embedding.Config{Dim: 2}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("New with a NUL byte: %v, want ErrBadInput", err)
	}
	tbl := newTable(t, embedding.Config{Dim: 2}) // named base
	if tbl.Name() != base {
		t.Fatalf("name %q", tbl.Name())
	}
	if _, err := embedding.NewNamed(strings.Repeat("n", 256), embedding.Config{Dim: 2}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("New with a 256-byte name: %v, want ErrBadInput", err)
	}
	long := newTable(t, embedding.Config{Dim: 2}, strings.Repeat("n", 255-len(base)-1))
	if len(long.Name()) != 255 {
		t.Errorf("a 255-byte name: %q", long.Name())
	}
	if err := embedding.UpdateByName(base+"\x00", ids64(t, []int64{1}), nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("UpdateByName with a NUL byte: %v, want ErrBadInput", err)
	}
}

// Nil tables and tensors give ErrBadInput, never a nil-pointer panic: the checkpoint functions
// (before the fix, Save(dir, nil) panicked), every method of a nil *Table (Close is a no-op,
// the accessors give zero values) and nil tensors.
func TestNilTablesAndTensors(t *testing.T) {
	dir := t.TempDir()
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{}})
	if err := embedding.Save(context.Background(), dir, nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("Save(dir, nil): %v", err)
	}
	if err := embedding.SaveWith(context.Background(), dir, []*embedding.Table{tbl, nil}, nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("SaveWith with a nil table: %v", err)
	}
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{nil}, nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("LoadInto with a nil table: %v", err)
	}
	var n *embedding.Table
	calls := map[string]func() error{
		"Forward": func() error { _, err := n.Forward(nil, embedding.ForwardOptions{}); return err },
		"ForwardBag": func() error {
			_, err := n.ForwardBag(nil, nil, nil, embedding.Sum, embedding.ForwardOptions{})
			return err
		},
		"Step":         n.Step,
		"ZeroGrad":     n.ZeroGrad,
		"PendingGrad":  func() error { _, _, err := n.PendingGrad(); return err },
		"ExportEach":   func() error { return n.ExportEach(context.Background(), 1, nil) },
		"LookupIDs":    func() error { _, err := n.LookupIDs([]int64{1}); return err },
		"IndicesIDs":   func() error { _, err := n.IndicesIDs([]int64{1}, true); return err },
		"ReadIDs":      func() error { _, _, err := n.ReadIDs([]int64{1}); return err },
		"WriteIDs":     func() error { return n.WriteIDs([]int64{1}, []float32{1, 2}) },
		"UpdateIDs":    func() error { return n.UpdateIDs([]int64{1}, []float32{1, 2}) },
		"DeleteIDs":    func() error { _, err := n.DeleteIDs([]int64{1}); return err },
		"PrefetchIDs":  func() error { _, err := n.PrefetchIDs([]int64{1}); return err },
		"LookupInto":   func() error { return n.LookupInto(make([]float32, 2), []int64{1}) },
		"ReadInto":     func() error { return n.ReadInto(make([]float32, 2), make([]bool, 1), []int64{1}) },
		"Evict":        func() error { _, err := n.Evict(context.Background(), embedding.EvictPolicy{}, false); return err },
		"EvictIf":      func() error { _, err := n.EvictIf(context.Background(), nil); return err },
		"Metadata":     func() error { _, _, _, err := n.Metadata(); return err },
		"Compact":      n.Compact,
		"SetAdmission": func() error { return n.SetAdmission(2) },
		"Admission":    func() error { _, _, err := n.Admission(); return err },
		"SetLR":        func() error { return n.SetLR(0.1) },
		"Stats":        func() error { _, err := n.Stats(); return err },
		"Lookup":       func() error { _, err := n.Lookup(nil); return err },
		"Indices":      func() error { _, err := n.Indices(nil, false); return err },
		"Read":         func() error { _, _, err := n.Read(nil); return err },
		"Write":        func() error { return n.Write(nil, nil) },
		"Update":       func() error { return n.Update(nil, nil) },
		"Delete":       func() error { _, err := n.Delete(nil); return err },
		"Clear":        n.Clear,
		"Export":       func() error { _, err := n.Export(); return err },
		"Prefetch":     func() error { _, err := n.Prefetch(nil); return err },
		// a real table, nil tensors
		"Lookup(nil)":   func() error { _, err := tbl.Lookup(nil); return err },
		"Read(nil)":     func() error { _, _, err := tbl.Read(nil); return err },
		"Write(nil)":    func() error { return tbl.Write(ids64(t, []int64{1}), nil) },
		"Update(nil)":   func() error { return tbl.Update(nil, nil) },
		"Delete(nil)":   func() error { _, err := tbl.Delete(nil); return err },
		"Indices(nil)":  func() error { _, err := tbl.Indices(nil, true); return err },
		"Prefetch(nil)": func() error { _, err := tbl.Prefetch(nil); return err },
		"Forward(nil)":  func() error { _, err := tbl.Forward(nil, embedding.ForwardOptions{}); return err },
	}
	for name, f := range calls {
		if err := f(); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("%s: %v, want ErrBadInput", name, err)
		}
	}
	if n.Name() != "" || n.Dim() != 0 || n.Len() != 0 || n.LR() != 0 || n.Close() != nil || n.Config().Dim != 0 {
		t.Errorf("accessors of a nil *Table")
	}
}
