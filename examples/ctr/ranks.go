package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// ranks is this process's place in the run: the only process (g nil), or one rank of g.
type ranks struct{ g *dist.Group }

func (r ranks) rank() int {
	if r.g == nil {
		return 0
	}
	return r.g.Rank()
}

func (r ranks) world() int {
	if r.g == nil {
		return 1
	}
	return r.g.WorldSize()
}

// collectives is how many collectives this rank has called on the group (0 in one process).
func (r ranks) collectives() int64 {
	if r.g == nil {
		return 0
	}
	return r.g.Collectives()
}

// check refuses what a distributed run cannot do.
func (r ranks) check(cfg Config) error {
	if r.g == nil {
		return nil
	}
	if cfg.Device != cgotorch.CPU {
		return fmt.Errorf("a distributed run trains on the CPU (its group is Gloo's), not on %v", cfg.Device)
	}
	if cfg.BatchSize < r.world() {
		return fmt.Errorf("batch %d is smaller than the %d ranks", cfg.BatchSize, r.world())
	}
	return nil
}

// slice is this rank's part of a batch: the ranks' parts are contiguous, in rank order, and
// differ in size by one sample at most.
func (r ranks) slice(samples []Sample) []Sample {
	n, w, k := len(samples), r.world(), r.rank()
	return samples[k*n/w : (k+1)*n/w]
}

// newTable creates a table of the model: sharded across the ranks, or local.
func (r ranks) newTable(name string, cfg embedding.Config) (Table, error) {
	if r.g == nil {
		return LocalTable(name, cfg)
	}
	return dist.NewShardedTable(r.g, name, cfg)
}

// optimizer makes the model's Adam optimizer. On several ranks it is made from a
// dist.DataParallel that sums the MLP's gradients over the ranks (each rank's loss is already
// divided by the whole batch's size), as the sharded tables' owners sum theirs.
func (r ranks) optimizer(m *DeepFM, o nn.AdamOptions) (*nn.Optimizer, error) {
	if r.g == nil {
		return nn.NewAdam(m, o)
	}
	ddp, err := dist.NewDataParallel(r.g, m, dist.DataParallelOptions{SumGradients: true})
	if err != nil {
		return nil, err
	}
	return nn.NewAdam(ddp, o)
}

// sum is v summed over the ranks.
func (r ranks) sum(v float64) (float64, error) {
	if r.g == nil {
		return v, nil
	}
	t, err := cgotorch.FromSlice([]float64{v})
	if err != nil {
		return 0, err
	}
	defer t.Close()
	s, err := r.g.AllReduce(t, dist.Sum)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return s.Item()
}

// agree checks that every rank ends with the same MLP weights (a hash of their bytes) and the
// same held-out AUC, as data-parallel training over shared tables must.
func (r ranks) agree(m *DeepFM, res Result) error {
	if r.g == nil {
		return nil
	}
	h := fnv.New64a()
	for _, p := range m.mlp.Parameters() {
		v, err := cgotorch.ToSlice[float32](p.Tensor)
		if err != nil {
			return err
		}
		for _, x := range v {
			bits := math.Float32bits(x)
			h.Write([]byte{byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)})
		}
	}
	mine := []int64{int64(h.Sum64()), int64(math.Float64bits(res.AUC))}
	t, err := cgotorch.FromSlice(mine)
	if err != nil {
		return err
	}
	defer t.Close()
	all, err := r.g.AllGather(t)
	if err != nil {
		return err
	}
	defer all.Close()
	v, err := cgotorch.ToSlice[int64](all)
	if err != nil {
		return err
	}
	var errs []error
	for k := 0; k < r.world(); k++ {
		if v[2*k] != mine[0] || v[2*k+1] != mine[1] {
			errs = append(errs, fmt.Errorf("rank %d ends with other MLP weights or another AUC (%.6f) than rank %d (%.6f)",
				k, math.Float64frombits(uint64(v[2*k+1])), r.rank(), res.AUC))
		}
	}
	return errors.Join(errs...)
}
