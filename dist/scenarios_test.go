package dist

// The scenarios a rank process runs (see ranks_test.go): each returns an error when the rank
// sees anything but what it expects.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

var scenarios = map[string]func(Options) error{
	"collectives": scenarioCollectives,
	"concurrent":  scenarioConcurrent,
	"killed":      scenarioKilled,
	"skip":        scenarioSkip,
	"other-job":   scenarioOtherJob,
	"other-world": scenarioOtherWorld,
	"disagree":    scenarioDisagree,
	"bench":       scenarioBench,
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

// placed returns t on g's device: the GPU of an NCCL group (t moves there and is closed), else
// t itself.
func placed(g *Group, t *cgotorch.Tensor) *cgotorch.Tensor {
	d := g.Device()
	if d.Type != cgotorch.DeviceCUDA {
		return t
	}
	out, err := t.To(d, cgotorch.KeepDType)
	t.Close()
	if err != nil {
		panic(err)
	}
	return out
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
	// values, and an error unless the result is on the group's device as its input was
	values := func(t *cgotorch.Tensor, err error) ([]float64, error) {
		if err == nil && t.Device() != g.Device() {
			err = fmt.Errorf("the result is on %v, want %v", t.Device(), g.Device())
		}
		return values(t, err)
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
	ft, nt := placed(g, tensor(f, 2, 3)), placed(g, tensor(n))
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
	// small and large sums (reduced directly, and by Gloo's ring on the CPU), the same bits on
	// every rank: rank r holds (r+1)/3 + i/7 at i
	for _, size := range []int{1000, 400_000} {
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(r+1)/3 + float32(i%100)/7
		}
		errs = append(errs, sameSumEverywhere(g, placed(g, tensor(v, int64(size)))))
	}

	// broadcast from the last rank (not 0): rank r holds 10r+i
	b := make([]int64, 4)
	want := make([]float64, 4)
	for i := range b {
		b[i], want[i] = int64(10*r+i), float64(10*(w-1)+i)
	}
	bt := placed(g, tensor(b, 2, 2))
	defer bt.Close()
	got, err = values(g.Broadcast(bt, w-1))
	check("broadcast from the last rank", got, err, want)

	// all-gather: rank r holds [r, 100r] (float32)
	at := placed(g, tensor([]float32{float32(r), float32(100 * r)}, 1, 2))
	defer at.Close()
	want = nil
	for q := 0; q < w; q++ {
		want = append(want, float64(q), float64(100*q))
	}
	got, err = values(g.AllGather(at))
	check("all-gather", got, err, want)

	// empty tensors ([0, 3]): empty results, with their shapes
	errs = append(errs, emptyCollectives(g))

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
	wantRecv := make([]int64, w)
	var wantIDs, wantRows []float64
	for j := 0; j < w; j++ {
		wantRecv[j] = sendCount(j, r)
		for k := 0; k < int(wantRecv[j]); k++ {
			wantIDs = append(wantIDs, float64(1000*j+10*r+k))
			wantRows = append(wantRows, float64(1000*j+10*r+k), -float64(k))
		}
	}
	it, rt := placed(g, tensor(ids, int64(len(ids)))), placed(g, tensor(rows, int64(len(ids)), 2))
	defer it.Close()
	defer rt.Close()
	for _, c := range []struct {
		what string
		in   *cgotorch.Tensor
		want []float64
	}{{"all-to-all int64", it, wantIDs}, {"all-to-all float32 rows", rt, wantRows}} {
		out, recv, err := g.AllToAll(c.in, send)
		got, err := values(out, err)
		check(c.what, got, err, c.want)
		if err == nil && !reflect.DeepEqual(recv, wantRecv) {
			errs = append(errs, fmt.Errorf("%s: received splits %v, want %v", c.what, recv, wantRecv))
		}
	}
	// integers in the agreement headers: rank r sends [r, -r, 7]
	ints, err := g.allGatherInts([]int64{int64(r), -int64(r), 7})
	var wantInts []int64
	for q := 0; q < w; q++ {
		wantInts = append(wantInts, int64(q), -int64(q), 7)
	}
	if err != nil || !reflect.DeepEqual(ints, wantInts) {
		errs = append(errs, fmt.Errorf("all-gather of integers: got %v, %v, want %v", ints, err, wantInts))
	}
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

// failsWithin checks that err wraps kind and ErrBroken, and came within the group's timeout
// (plus a margin for a loaded machine).
func failsWithin(what string, err error, kind error, start time.Time, o Options) error {
	took := time.Since(start)
	if !errors.Is(err, kind) || !errors.Is(err, ErrBroken) {
		return fmt.Errorf("%s: got %v, want an error wrapping %v and %v", what, err, kind, ErrBroken)
	}
	if limit := o.Timeout + 5*time.Second; took > limit {
		return fmt.Errorf("%s: the error took %v, more than %v", what, took, limit)
	}
	fmt.Printf("rank %d: %s: %v after %v\n", o.Rank, what, err, took.Round(time.Millisecond))
	return nil
}

// afterFailure checks that a broken group fails at once with ErrBroken, and closes it in time.
func afterFailure(g *Group, o Options) error {
	x := tensor([]float32{1})
	defer x.Close()
	start := time.Now()
	if _, err := g.AllReduce(x, Sum); !errors.Is(err, ErrBroken) || time.Since(start) > time.Second {
		return fmt.Errorf("after a failure: got %v after %v, want %v at once", err, time.Since(start), ErrBroken)
	}
	if err := g.Barrier(); !errors.Is(err, ErrBroken) {
		return fmt.Errorf("barrier after a failure: got %v, want %v", err, ErrBroken)
	}
	start = time.Now()
	g.Close()
	if took := time.Since(start); took > o.Timeout+5*time.Second {
		return fmt.Errorf("close took %v", took)
	}
	return nil
}

// scenarioKilled: rank $GOREC_DIST_KILL kills itself (SIGKILL) in the middle of a stream of
// 16 MB broadcasts from rank 0: the others get ErrPeer (or ErrTimeout) within the timeout, and
// live on, although rank 0 may be writing to the dead rank's socket (SIGPIPE on a Gloo thread).
// Rank 0 is the root and serves the store.
func scenarioKilled(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Barrier(); err != nil {
		return err
	}
	if strconv.Itoa(g.Rank()) == os.Getenv("GOREC_DIST_KILL") {
		go func() {
			time.Sleep(100 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}()
	}
	x := placed(g, tensor(make([]float32, 4<<20)))
	defer x.Close()
	var start time.Time
	for i := 0; i < 1000 && err == nil; i++ { // until the death is seen
		start = time.Now()
		var y *cgotorch.Tensor
		y, err = g.Broadcast(x, 0)
		y.Close()
	}
	kind := ErrPeer // the dead peer's connection closed, or
	if errors.Is(err, ErrTimeout) {
		kind = ErrTimeout // Gloo waited on it until the timeout
	}
	return errors.Join(failsWithin("broadcast with a killed peer", err, kind, start, o), afterFailure(g, o))
}

// scenarioSkip: the last rank skips an all-reduce (and lives on past the timeout): the others
// get ErrTimeout within the timeout.
func scenarioSkip(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Barrier(); err != nil {
		return err
	}
	if g.Rank() == g.WorldSize()-1 {
		time.Sleep(o.Timeout + 3*time.Second)
		return nil
	}
	x := placed(g, tensor([]float32{1, 2}))
	defer x.Close()
	start := time.Now()
	_, err = g.AllReduce(x, Sum)
	return errors.Join(failsWithin("all-reduce that a rank skipped", err, ErrTimeout, start, o), afterFailure(g, o))
}

// refusedEverywhere starts a group whose last rank is changed by other: every rank's New
// must fail with ErrRefused, within the timeout.
func refusedEverywhere(o Options, other func(*Options)) error {
	if o.Rank == o.WorldSize-1 {
		other(&o)
	}
	start := time.Now()
	g, err := New(o)
	if err == nil {
		g.Close()
		return fmt.Errorf("a group started with a rank of another job or world size")
	}
	if !errors.Is(err, ErrRefused) || time.Since(start) > o.Timeout {
		return fmt.Errorf("got %v after %v, want %v within %v", err, time.Since(start), ErrRefused, o.Timeout)
	}
	fmt.Printf("rank %d: %v\n", o.Rank, err)
	return nil
}

func scenarioOtherJob(o Options) error {
	return refusedEverywhere(o, func(o *Options) { o.Job = "another job" })
}

func scenarioOtherWorld(o Options) error {
	return refusedEverywhere(o, func(o *Options) { o.WorldSize++ })
}

// scenarioDisagree: calls that do not match across ranks (shapes, dtypes, reductions, roots,
// collectives, splits of another trailing shape, a rank's own bad arguments) fail on every
// rank with ErrMismatch or ErrInvalidArgument, and the group stays usable.
func scenarioDisagree(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, last := g.Rank(), g.Rank() == g.WorldSize()-1
	pick := func(mine, lasts *cgotorch.Tensor) *cgotorch.Tensor {
		if last {
			return lasts
		}
		return mine
	}
	f4, f8, i4 := tensor(make([]float32, 4)), tensor(make([]float32, 8)), tensor(make([]int64, 4))
	f22, f24 := tensor(make([]float32, 4), 2, 2), tensor(make([]float32, 8), 2, 4)
	bf := cgotorch.Zeros([]int64{4}, cgotorch.WithDType(cgotorch.BFloat16))
	defer func() {
		for _, t := range []*cgotorch.Tensor{f4, f8, i4, f22, f24, bf} {
			t.Close()
		}
	}()
	closed := tensor([]float32{1})
	closed.Close()
	w := g.WorldSize()
	ones := make([]int64, w)
	for i := range ones {
		ones[i] = 4 / int64(w)
	}
	ones[0] += 4 % int64(w)
	two := make([]int64, w) // two rows to rank 0
	two[0] = 2
	var errs []error
	for _, c := range []struct {
		what string
		call func() error
		own  error // the last rank's error (the others get ErrMismatch)
	}{
		{"all-reduce of other lengths", func() error { _, err := g.AllReduce(pick(f4, f8), Sum); return err }, ErrMismatch},
		{"all-reduce of other dtypes", func() error { _, err := g.AllReduce(pick(f4, i4), Sum); return err }, ErrMismatch},
		{"all-reduce of other shapes", func() error { _, err := g.AllReduce(pick(f4, f22), Sum); return err }, ErrMismatch},
		{"all-reduce with other reductions", func() error {
			_, err := g.AllReduce(f4, map[bool]ReduceOp{false: Sum, true: Max}[last])
			return err
		}, ErrMismatch},
		{"broadcast from other roots", func() error { _, err := g.Broadcast(f4, map[bool]int{false: 0, true: 1}[last]); return err }, ErrMismatch},
		{"all-gather of other lengths", func() error { _, err := g.AllGather(pick(f4, f8)); return err }, ErrMismatch},
		{"all-to-all of other row widths", func() error { _, _, err := g.AllToAll(pick(f22, f24), two); return err }, ErrMismatch},
		{"other collectives", func() error {
			if last {
				return g.Barrier()
			}
			_, err := g.AllReduce(f4, Sum)
			return err
		}, ErrMismatch},
		{"all-gather of integers, other counts", func() error {
			_, err := g.allGatherInts(map[bool][]int64{false: {1}, true: {1, 2}}[last])
			return err
		}, ErrMismatch},
		{"all-gather of integers against an all-gather", func() error {
			if last {
				_, err := g.allGatherInts([]int64{1, 2})
				return err
			}
			_, err := g.AllGather(i4)
			return err
		}, ErrMismatch},
		{"all-gather of too many integers", func() error {
			_, err := g.allGatherInts(make([]int64, map[bool]int{false: 1, true: 9}[last]))
			return err
		}, ErrInvalidArgument},
		{"a dtype Gloo lacks", func() error { _, err := g.AllReduce(pick(f4, bf), Sum); return err }, ErrInvalidArgument},
		{"an average of integers", func() error { _, err := g.AllReduce(pick(f4, i4), Avg); return err }, ErrInvalidArgument},
		{"a root out of range", func() error { _, err := g.Broadcast(f4, map[bool]int{false: 0, true: w}[last]); return err }, ErrInvalidArgument},
		{"a closed tensor", func() error { _, err := g.AllGather(pick(f4, closed)); return err }, ErrClosed},
		{"splits that miss rows", func() error {
			send := append([]int64(nil), ones...)
			if last {
				send[0]++
			}
			_, _, err := g.AllToAll(f4, send)
			return err
		}, ErrInvalidArgument},
		{"too few splits", func() error {
			send := append([]int64(nil), ones...)
			if last {
				send = send[:w-1]
			}
			_, _, err := g.AllToAll(f4, send)
			return err
		}, ErrInvalidArgument},
		{"a negative split", func() error {
			send := append([]int64(nil), ones...)
			if last {
				send[0] = -1
			}
			_, _, err := g.AllToAll(f4, send)
			return err
		}, ErrInvalidArgument},
	} {
		want := ErrMismatch
		if last {
			want = c.own
		}
		if err := c.call(); !errors.Is(err, want) || errors.Is(err, ErrBroken) {
			errs = append(errs, fmt.Errorf("%s: rank %d got %v, want %v (the group unbroken)", c.what, r, err, want))
		} else if r == 0 {
			fmt.Printf("rank 0: %s: %v\n", c.what, err)
		}
	}
	// still usable
	got, err := values(g.AllReduce(f4, Sum))
	errs = append(errs, expect("all-reduce after the refused calls", got, err, []float64{0, 0, 0, 0}))
	return errors.Join(errs...)
}

// sameSumEverywhere checks that the all-reduce sum of t (closed after) is the sum of every
// rank's t within float32 rounding, and the same bits on every rank.
func sameSumEverywhere(g *Group, t *cgotorch.Tensor) error {
	defer t.Close()
	what := fmt.Sprintf("all-reduce sum of %d floats", t.Numel())
	sum, err := g.AllReduce(t, Sum)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer sum.Close()
	all, err := g.AllGather(sum.Reshape(1, -1))
	if err != nil {
		return fmt.Errorf("%s: gathering the results: %w", what, err)
	}
	defer all.Close()
	rows, _ := cgotorch.ToSlice[float32](all)
	n, w := int(t.Numel()), g.WorldSize()
	for i := 0; i < n; i += 997 {
		want := 0.0
		for q := 0; q < w; q++ {
			want += float64(q+1)/3 + float64(i%100)/7
		}
		if d := math.Abs(float64(rows[i]) - want); d > 1e-5*math.Abs(want) {
			return fmt.Errorf("%s: [%d] = %v, want %v", what, i, rows[i], want)
		}
	}
	for q := 1; q < w; q++ {
		for i := 0; i < n; i++ {
			if math.Float32bits(rows[q*n+i]) != math.Float32bits(rows[i]) {
				return fmt.Errorf("%s: rank %d has %v at %d, rank 0 %v", what, q, rows[q*n+i], i, rows[i])
			}
		}
	}
	return nil
}

// emptyCollectives checks the collectives of tensors with no elements: they give empty results
// of the right shape ([0, 3], and [0, 3] gathered from every rank).
func emptyCollectives(g *Group) error {
	e := placed(g, cgotorch.Zeros([]int64{0, 3}))
	defer e.Close()
	for _, c := range []struct {
		what string
		f    func() (*cgotorch.Tensor, error)
	}{
		{"all-reduce", func() (*cgotorch.Tensor, error) { return g.AllReduce(e, Sum) }},
		{"broadcast", func() (*cgotorch.Tensor, error) { return g.Broadcast(e, 0) }},
		{"all-gather", func() (*cgotorch.Tensor, error) { return g.AllGather(e) }},
	} {
		got, err := c.f()
		if err != nil {
			return fmt.Errorf("%s of an empty tensor: %w", c.what, err)
		}
		if sh := got.Shape(); fmt.Sprint(sh) != "[0 3]" {
			return fmt.Errorf("%s of an empty tensor: shape %v, want [0 3]", c.what, sh)
		}
		got.Close()
	}
	return nil
}
