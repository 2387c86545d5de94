package dist

// The scenarios a rank process runs (see ranks_test.go): each returns an error when the rank
// sees anything but what it expects.

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/gorec/gorec/cgotorch"
)

var scenarios = map[string]func(Options) error{
	"collectives": scenarioCollectives,
	"concurrent":  scenarioConcurrent,
}

// values returns t's elements as float64s (int64 and float32 tensors).
func values(t *cgotorch.Tensor, err error) ([]float64, error) {
	if err != nil {
		return nil, err
	}
	defer t.Close()
	var out []float64
	switch t.DType() {
	case cgotorch.Int64:
		v, err := cgotorch.ToSlice[int64](t)
		if err != nil {
			return nil, err
		}
		for _, x := range v {
			out = append(out, float64(x))
		}
	default:
		v, err := cgotorch.ToSlice[float32](t)
		if err != nil {
			return nil, err
		}
		for _, x := range v {
			out = append(out, float64(x))
		}
	}
	return out, nil
}

// expect compares a collective's result with what the rank expects.
func expect(what string, got []float64, err error, want []float64) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: got %v, want %v", what, got, want)
	}
	return nil
}

func tensor[T cgotorch.Element](v []T, shape ...int64) *cgotorch.Tensor {
	t, err := cgotorch.FromSlice(v, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// sendCount is how many rows rank r sends rank j in the uneven all-to-all (0 for some pairs).
func sendCount(r, j int) int64 { return int64((r + 2*j) % 3) }

// scenarioCollectives checks every collective's result on int64 and float32 tensors.
func scenarioCollectives(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, w := g.Rank(), g.WorldSize()
	var errs []error
	check := func(what string, got []float64, err error, want []float64) {
		errs = append(errs, expect(what, got, err, want))
	}

	// all-reduce: rank r holds r+1+i (float32 [2, 3]) and (r*5+i)%7 (int64 [6])
	f := make([]float32, 6)
	n := make([]int64, 6)
	sum, avg, imax, isum := make([]float64, 6), make([]float64, 6), make([]float64, 6), make([]float64, 6)
	for i := range f {
		f[i], n[i] = float32(r+1+i), int64((r*5+i)%7)
		for q := 0; q < w; q++ {
			sum[i] += float64(q + 1 + i)
			v := float64((q*5 + i) % 7)
			isum[i] += v
			imax[i] = max(imax[i], v)
		}
		avg[i] = sum[i] / float64(w)
	}
	ft, nt := tensor(f, 2, 3), tensor(n)
	defer ft.Close()
	defer nt.Close()
	got, err := values(g.AllReduce(ft, Sum))
	check("all-reduce sum float32", got, err, sum)
	got, err = values(g.AllReduce(ft, Avg))
	check("all-reduce average float32", got, err, avg)
	got, err = values(g.AllReduce(nt, Sum))
	check("all-reduce sum int64", got, err, isum)
	got, err = values(g.AllReduce(nt, Max))
	check("all-reduce max int64", got, err, imax)
	if v, _ := cgotorch.ToSlice[float32](ft); !reflect.DeepEqual(v, f) {
		errs = append(errs, fmt.Errorf("all-reduce modified its input: %v", v))
	}

	// broadcast from the last rank (not 0): rank r holds 10r+i
	b := make([]int64, 4)
	want := make([]float64, 4)
	for i := range b {
		b[i], want[i] = int64(10*r+i), float64(10*(w-1)+i)
	}
	bt := tensor(b, 2, 2)
	defer bt.Close()
	got, err = values(g.Broadcast(bt, w-1))
	check("broadcast from the last rank", got, err, want)

	// all-gather: rank r holds [r, 100r] (float32)
	at := tensor([]float32{float32(r), float32(100 * r)}, 1, 2)
	defer at.Close()
	want = nil
	for q := 0; q < w; q++ {
		want = append(want, float64(q), float64(100*q))
	}
	got, err = values(g.AllGather(at))
	check("all-gather", got, err, want)

	// uneven all-to-all: rank r sends rank j sendCount(r, j) rows of 1000r+10j+k; int64 [N]
	// with the receive splits from ExchangeSplits, float32 [N, 2] with them given
	var ids []int64
	var rows []float32
	send := make([]int64, w)
	for j := 0; j < w; j++ {
		send[j] = sendCount(r, j)
		for k := 0; k < int(send[j]); k++ {
			ids = append(ids, int64(1000*r+10*j+k))
			rows = append(rows, float32(1000*r+10*j+k), -float32(k))
		}
	}
	recv, err := g.ExchangeSplits(send)
	wantRecv := make([]int64, w)
	var wantIDs, wantRows []float64
	for j := 0; j < w; j++ {
		wantRecv[j] = sendCount(j, r)
		for k := 0; k < int(wantRecv[j]); k++ {
			wantIDs = append(wantIDs, float64(1000*j+10*r+k))
			wantRows = append(wantRows, float64(1000*j+10*r+k), -float64(k))
		}
	}
	if err != nil || !reflect.DeepEqual(recv, wantRecv) {
		return errors.Join(append(errs, fmt.Errorf("exchange splits: got %v, %v, want %v", recv, err, wantRecv))...)
	}
	it, rt := tensor(ids, int64(len(ids))), tensor(rows, int64(len(ids)), 2)
	defer it.Close()
	defer rt.Close()
	got, err = values(g.AllToAll(it, send, recv))
	check("all-to-all int64", got, err, wantIDs)
	got, err = values(g.AllToAll(rt, send, wantRecv))
	check("all-to-all float32 rows", got, err, wantRows)

	errs = append(errs, g.Barrier())
	return errors.Join(errs...)
}

// scenarioConcurrent runs all-reduces from several goroutines at once: the group serialises
// them, and since every call reduces the same shape, any pairing across ranks sums the same.
func scenarioConcurrent(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	w := g.WorldSize()
	want := float64(w*(w+1)) / 2
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := tensor([]float32{float32(g.Rank() + 1), float32(g.Rank() + 1)})
			defer x.Close()
			for range 10 {
				got, err := values(g.AllReduce(x, Sum))
				if err = expect("concurrent all-reduce", got, err, []float64{want, want}); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, g.Barrier())...)
}
