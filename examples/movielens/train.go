package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/gorec/gorec/cgotorch"
)

// fit trains m for epochs over train, printing a progress bar per epoch, and calls after with
// the epoch number and the training RMSE (before the penalty, averaged over the epoch) after
// each epoch.
func fit(m *Model, train []Rating, cfg Config, label string, out io.Writer, after func(epoch int, trainRMSE float64) error) error {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0)) // the same order for every model
	order := make([]int, len(train))
	for i := range order {
		order[i] = i
	}
	pairs := make([]int64, 0, 2*cfg.BatchSize)
	values := make([]float32, 0, cfg.BatchSize)
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		bar := newBar(out, fmt.Sprintf("%s epoch %2d/%d", label, epoch, cfg.Epochs), len(order), cfg.Live)
		var sse float64
		for start := 0; start < len(order); start += cfg.BatchSize {
			pairs, values = pairs[:0], values[:0]
			for _, k := range order[start:min(start+cfg.BatchSize, len(order))] {
				pairs = append(pairs, train[k].User, train[k].Item)
				values = append(values, train[k].Value)
			}
			mse, err := step(m, pairs, values)
			if err != nil {
				return fmt.Errorf("%s epoch %d: %w", label, epoch, err)
			}
			sse += mse * float64(len(values))
			bar.Add(len(values))
		}
		trainRMSE := math.Sqrt(sse / float64(len(order)))
		bar.Done(fmt.Sprintf("train RMSE %.4f", trainRMSE))
		if err := after(epoch, trainRMSE); err != nil {
			return err
		}
	}
	return nil
}

// step runs one training step on a batch, freeing its tensors at the end, and returns the
// batch's mean squared error.
func step(m *Model, pairs []int64, values []float32) (mse float64, err error) {
	err = cgotorch.TryWithScope(func() error {
		x := cgotorch.MustFromSlice(pairs, int64(len(values)), 2)
		y := cgotorch.MustFromSlice(values, int64(len(values)))
		m.ZeroGrad()
		loss, sq := m.Loss(x, y)
		loss.Backward()
		if mse, err = sq.Item(); err != nil {
			return err
		}
		return m.Step()
	})
	return mse, err
}

// evalBatch is the batch size of evaluation.
const evalBatch = 8192

// squaredErrors are the squared errors of m's predictions on data, in evaluation mode (ids not
// seen in training get zero rows), with predictions clipped to the rating scale [0.5, 5].
func squaredErrors(m *Model, data []Rating) ([]float64, error) {
	m.Train(false)
	defer m.Train(true)
	sq := make([]float64, 0, len(data))
	for start := 0; start < len(data); start += evalBatch {
		batch := data[start:min(start+evalBatch, len(data))]
		pairs := make([]int64, 0, 2*len(batch))
		for _, r := range batch {
			pairs = append(pairs, r.User, r.Item)
		}
		var pred []float32
		err := cgotorch.TryWithScope(func() (err error) {
			cgotorch.NoGrad(func() {
				pred, err = cgotorch.ToSlice[float32](m.Forward(cgotorch.MustFromSlice(pairs, int64(len(batch)), 2)))
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		for k, p := range pred {
			d := float64(min(max(p, 0.5), 5) - batch[k].Value)
			sq = append(sq, d*d)
		}
	}
	return sq, nil
}

// rootMean is the root of the mean of sq.
func rootMean(sq []float64) float64 {
	var s float64
	for _, v := range sq {
		s += v
	}
	return math.Sqrt(s / float64(len(sq)))
}

// pairedDiff is the mean of a[i]-b[i] and its standard error.
func pairedDiff(a, b []float64) (mean, se float64) {
	n := float64(len(a))
	var s, s2 float64
	for i := range a {
		d := a[i] - b[i]
		s += d
		s2 += d * d
	}
	mean = s / n
	return mean, math.Sqrt((s2/n - mean*mean) / (n - 1))
}

// meanRating is the mean of the ratings' values.
func meanRating(data []Rating) float64 {
	var s float64
	for _, r := range data {
		s += float64(r.Value)
	}
	return s / float64(len(data))
}

// constantRMSE is the RMSE of predicting c for every rating.
func constantRMSE(data []Rating, c float64) float64 {
	var sse float64
	for _, r := range data {
		d := float64(r.Value) - c
		sse += d * d
	}
	return math.Sqrt(sse / float64(len(data)))
}
