package main

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/nn"
)

// stepper trains on the batches of the stream, one step per batch: step returns the summed loss
// (a batch's mean loss times its samples) and the samples of the batches it finished training
// (last: samples is the stream's last batch).
type stepper interface {
	step(samples []Sample, last bool) (lossSum float64, n int, err error)
}

// plainSteps trains each batch when it comes: the plain loop, or, with fetch, through
// dist.TrainStep, whose lookups fetch their rows in one exchange before the forward pass
// (-fetch).
type plainSteps struct {
	m     *DeepFM
	opt   *nn.Optimizer
	rk    ranks
	d     cgotorch.Device
	fetch bool
}

func (s plainSteps) step(samples []Sample, _ bool) (lossSum float64, n int, err error) {
	var loss float64
	err = cgotorch.TryWithScope(func() (err error) {
		b, err := NewBatch(s.rk.slice(samples), s.d)
		if err != nil {
			return err
		}
		lossOf := func(b *Batch) (*cgotorch.Tensor, error) { return batchLoss(s.m, b, len(samples)) }
		if s.fetch {
			lookups, err := dist.CollectionPrefetches(s.m.bags, b.KJT)
			if err != nil {
				return err
			}
			loss, err = dist.TrainStep(s.opt, func(*Batch) []dist.Prefetch { return lookups }, lossOf, b)
			return err
		}
		s.opt.ZeroGrad()
		l, err := lossOf(b)
		if err != nil {
			return err
		}
		l.Backward()
		if loss, err = l.Item(); err != nil {
			return err
		}
		return s.opt.Step()
	})
	return loss * float64(len(samples)), len(samples), err
}

// batchLoss is the loss of b, this rank's slice of a batch of n samples: summed over the
// slice and divided by n, so that the ranks' gradients add up to those of the batch's mean
// loss.
func batchLoss(m *DeepFM, b *Batch, n int) (*cgotorch.Tensor, error) {
	logits, err := m.Logits(b)
	if err != nil {
		return nil, err
	}
	return cgotorch.BCEWithLogitsLoss(logits, b.Labels, cgotorch.ReduceSum).DivScalar(float64(n)), nil
}

// pipelinedSteps trains through a dist.TrainPipeline: each step fetches the rows of a batch,
// on a fork of the group, while it trains on the one before (-pipeline).
type pipelinedSteps struct {
	p     *dist.TrainPipeline[*pipeBatch]
	fetch *dist.Group // the fork the pipeline fetches on
	m     *DeepFM
	rk    ranks
	prev  int // the samples of the batch in the pipeline
}

// pipeBatch is a batch in the pipeline: this rank's slice, its lookups, and the samples of the
// whole batch.
type pipeBatch struct {
	b       *Batch
	lookups []dist.Prefetch
	n       int
}

func newPipelinedSteps(m *DeepFM, opt *nn.Optimizer, rk ranks) (*pipelinedSteps, error) {
	fetch, err := rk.g.Fork("pipeline")
	if err != nil {
		return nil, err
	}
	p, err := dist.NewTrainPipeline(opt, func(b *pipeBatch) []dist.Prefetch { return b.lookups },
		func(b *pipeBatch) (*cgotorch.Tensor, error) { return batchLoss(m, b.b, b.n) },
		dist.TrainPipelineOptions{FetchGroup: fetch})
	if err != nil {
		return nil, errors.Join(err, fetch.Close())
	}
	return &pipelinedSteps{p: p, fetch: fetch, m: m, rk: rk}, nil
}

// Close closes the pipeline and its fork of the group.
func (s *pipelinedSteps) Close() error {
	s.p.Close()
	return s.fetch.Close()
}

func (s *pipelinedSteps) step(samples []Sample, last bool) (lossSum float64, n int, err error) {
	b, err := NewBatch(s.rk.slice(samples), cgotorch.CPU) // kept until trained: outside a scope
	if err != nil {
		return 0, 0, err
	}
	lookups, err := dist.CollectionPrefetches(s.m.bags, b.KJT)
	if err != nil {
		return 0, 0, err
	}
	loss, trained, err := s.p.Progress(&pipeBatch{b, lookups, len(samples)})
	if err != nil {
		return 0, 0, err
	}
	if trained {
		lossSum, n = loss*float64(s.prev), s.prev
	}
	s.prev = len(samples)
	if last {
		if loss, _, err = s.p.Flush(); err != nil {
			return 0, 0, err
		}
		lossSum, n = lossSum+loss*float64(s.prev), n+s.prev
	}
	return lossSum, n, nil
}

// newStepper is the training loop's stepper: pipelined (cfg.Pipeline) or fetched (cfg.Fetch),
// both for a distributed run, or plain.
func newStepper(m *DeepFM, opt *nn.Optimizer, rk ranks, cfg Config) (stepper, error) {
	switch {
	case !cfg.Pipeline && !cfg.Fetch:
		return plainSteps{m, opt, rk, cfg.Device, false}, nil
	case cfg.Pipeline && cfg.Fetch:
		return nil, fmt.Errorf("-pipeline and -fetch are two ways to fetch: choose one")
	case rk.g == nil:
		return nil, fmt.Errorf("-pipeline and -fetch need -dist: they fetch the rows of sharded tables")
	case cfg.Fetch:
		return plainSteps{m, opt, rk, cfg.Device, true}, nil
	}
	return newPipelinedSteps(m, opt, rk)
}
