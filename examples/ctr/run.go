package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// Config is the example's configuration; main fills it from flags.
type Config struct {
	Gen         GenConfig
	Train, Test int             // samples: the first Train of the log train the model, the next Test evaluate it
	BatchSize   int             // samples per step
	Dim         int             // width of the field embeddings
	Hidden      []int           // the MLP's hidden layers
	LR          float64         // SparseAdam's learning rate for the tables
	DenseLR     float64         // Adam's learning rate for the MLP
	ReportEvery int             // samples between two progress lines
	Device      cgotorch.Device // where the tables, the MLP and the batches live
	// Group, when not nil, runs the example as one rank of a distributed job: the tables are
	// sharded across the ranks, the MLP is replicated (dist.DataParallel), and each rank trains
	// on its slice of every batch. Every rank runs run with the same Config.
	Group *dist.Group
	// Pipeline trains a distributed run through a dist.TrainPipeline that fetches on a fork of
	// the group: the rows of the next batch come while the current one trains and steps, and
	// the training is the same, bit for bit.
	Pipeline bool
	// Fetch trains a distributed run through dist.TrainStep: each batch's lookups fetch their
	// rows in one exchange before the forward pass.
	Fetch bool
}

// DefaultConfig is the configuration of `go run ./examples/ctr`.
func DefaultConfig() Config {
	return Config{
		Gen:   GenConfig{Seed: 1, Users: 1_000_000, Items: 200_000, Zipf: 1.1, Launch: 20, Fresh: 1000, FreshShare: 0.1},
		Train: 1_000_000, Test: 100_000, BatchSize: 1024, Dim: 16, Hidden: []int{64, 32},
		LR: 0.002, DenseLR: 0.0003, ReportEvery: 200_000, Device: cgotorch.CPU,
	}
}

// Result holds the held-out metrics of a run.
type Result struct {
	AUC, LogLoss             float64 // the model's
	OracleAUC, OracleLogLoss float64 // of the hidden model's true probabilities
	BaseLogLoss              float64 // of the training click rate as a constant prediction
	SamplesPerSec            float64 // training throughput (of all ranks together), generation included
	TableLen                 map[string]int
	TableBytes               int64
	// UnseenUsers and UnseenItems are the shares of held-out samples whose user (item) id is
	// not in the table: never seen in training.
	UnseenUsers, UnseenItems float64
	// CollectivesPerStep is how many collectives a training step called on the group, on
	// average (the steps' own: the tables' and the DataParallel's; a TrainPipeline's fetches
	// run on a fork, not counted); 0 in one process.
	CollectivesPerStep float64
}

// run trains DeepFM on a stream of synthetic clicks, one pass in time order, then evaluates it
// on the samples that follow.
func run(cfg Config, out io.Writer) (res Result, err error) {
	if cfg.Train <= 0 || cfg.Test <= 0 || cfg.BatchSize <= 0 || cfg.Dim <= 0 || cfg.ReportEvery <= 0 ||
		!(cfg.Gen.Zipf > 1) || cfg.Gen.Users < 2 || cfg.Gen.Items < 2 || cfg.Gen.Launch <= 0 || cfg.Gen.Fresh <= 0 ||
		!(cfg.Gen.FreshShare >= 0 && cfg.Gen.FreshShare <= 1) {
		return res, fmt.Errorf("bad configuration %+v", cfg)
	}
	rk := ranks{cfg.Group}
	if err := rk.check(cfg); err != nil {
		return res, err
	}
	cgotorch.ManualSeed(cfg.Gen.Seed) // the MLP's initial weights
	m, err := NewDeepFM(rk.newTable, "ctr-", cfg.Dim, cfg.Hidden, embedding.SparseAdam{LR: cfg.LR}, cfg.Gen.Seed, cfg.Device)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	o := nn.DefaultAdamOptions()
	o.LR = cfg.DenseLR
	opt, err := rk.optimizer(m, o)
	if err != nil {
		return res, err
	}
	if rk.world() > 1 {
		fmt.Fprintf(out, "distributed: %d ranks, the tables sharded by id, the MLP replicated; each rank trains on %d samples of every batch\n",
			rk.world(), cfg.BatchSize/rk.world())
	}

	fmt.Fprintf(out, "synthetic click log: %d users and %d items with Zipf(%.2f) frequencies; a new item every %d samples, %.0f%% of impressions on the %d newest\n",
		cfg.Gen.Users, cfg.Gen.Items, cfg.Gen.Zipf, cfg.Gen.Launch, 100*cfg.Gen.FreshShare, cfg.Gen.Fresh)
	fmt.Fprintf(out, "DeepFM on %v: %d fields (tags a mean bag), %d features of one EmbeddingBagCollection, dim %d, MLP %v; SparseAdam lr %g on the tables, Adam lr %g on the MLP\n",
		cfg.Device, numTables, len(featureNames), cfg.Dim, cfg.Hidden, cfg.LR, cfg.DenseLR)
	fmt.Fprintf(out, "training: one pass over %d samples in time order, batch %d; held out: the next %d samples\n\n",
		cfg.Train, cfg.BatchSize, cfg.Test)

	gen := NewGenerator(cfg.Gen)
	clicks, err := train(m, opt, gen, rk, cfg, out, &res)
	if err != nil {
		return res, err
	}
	if err := evaluate(m, gen, cfg.Test, cfg.Device, float64(clicks)/float64(cfg.Train), &res); err != nil {
		return res, err
	}
	if err := rk.agree(m, res); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "\nheld-out (%d samples after the training stream; %.1f%% with a user and %.1f%% with an item unseen in training):\n",
		cfg.Test, 100*res.UnseenUsers, 100*res.UnseenItems)
	fmt.Fprintf(out, "  model      AUC %.4f   log-loss %.4f\n", res.AUC, res.LogLoss)
	fmt.Fprintf(out, "  oracle     AUC %.4f   log-loss %.4f   (the hidden model's true probabilities)\n", res.OracleAUC, res.OracleLogLoss)
	fmt.Fprintf(out, "  click rate AUC 0.5000   log-loss %.4f   (the training click rate for everyone)\n", res.BaseLogLoss)
	fmt.Fprintf(out, "  training: %.0f samples/s\n", res.SamplesPerSec)
	if rk.world() > 1 {
		fmt.Fprintf(out, "  collectives: %.1f a training step on the group\n", res.CollectivesPerStep)
		fmt.Fprintf(out, "  the %d ranks agree: equal MLP weights and held-out AUC on every rank\n", rk.world())
	}
	return res, nil
}

// train runs one pass over the first cfg.Train samples and returns the number of clicks. Each
// rank draws every sample and trains on its slice of each batch (batchLoss).
func train(m *DeepFM, opt *nn.Optimizer, gen *Generator, rk ranks, cfg Config, out io.Writer, res *Result) (clicks int, err error) {
	steps, err := newStepper(m, opt, rk, cfg)
	if err != nil {
		return 0, err
	}
	if c, ok := steps.(io.Closer); ok {
		defer func() { err = errors.Join(err, c.Close()) }()
	}
	start := time.Now()
	samples := make([]Sample, 0, cfg.BatchSize)
	var lossSum float64
	var lossN, nextReport, stepsN int
	var calls int64 // the steps' collectives
	nextReport = cfg.ReportEvery
	for done := 0; done < cfg.Train; {
		samples = samples[:0]
		for len(samples) < cfg.BatchSize && done+len(samples) < cfg.Train {
			s := gen.Next()
			if s.Click {
				clicks++
			}
			samples = append(samples, s)
		}
		before := rk.collectives()
		sum, n, err := steps.step(samples, done+len(samples) == cfg.Train)
		if err != nil {
			return 0, fmt.Errorf("step at sample %d: %w", done, err)
		}
		calls, stepsN = calls+rk.collectives()-before, stepsN+1
		done += len(samples)
		lossSum += sum
		lossN += n
		if done >= nextReport || done == cfg.Train {
			nextReport += cfg.ReportEvery
			line := fmt.Sprintf("train %d/%d samples, %.0f samples/s", done, cfg.Train, rate(done, start))
			total, err := rk.sum(lossSum) // of every rank's slice
			if err != nil {
				return 0, err
			}
			if err := report(m, line, total/float64(lossN), out, res); err != nil {
				return 0, err
			}
			lossSum, lossN = 0, 0
		}
	}
	res.SamplesPerSec = rate(cfg.Train, start)
	res.CollectivesPerStep = float64(calls) / float64(stepsN)
	return clicks, nil
}

// rate is the samples per second of n samples since start.
func rate(n int, start time.Time) float64 { return float64(n) / time.Since(start).Seconds() }

// report prints a progress line: line (samples done and throughput), recent training loss,
// table sizes and memory.
func report(m *DeepFM, line string, loss float64, out io.Writer, res *Result) error {
	names, stats, err := m.TableStats()
	if err != nil {
		return err
	}
	res.TableLen, res.TableBytes = map[string]int{}, 0
	fmt.Fprintf(out, "%s  log-loss %.4f\n  ids:", line, loss)
	for i, st := range stats {
		res.TableLen[names[i]] = st.Len
		res.TableBytes += st.Bytes
		fmt.Fprintf(out, " %s %d", names[i], st.Len)
	}
	fmt.Fprintf(out, "; tables %.1f MiB, libtorch live %.1f MiB\n", mib(res.TableBytes), mib(cgotorch.LiveBytes()))
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// evaluate scores the next n samples of gen in evaluation mode (unseen ids read as zero rows,
// nothing inserted) and fills in the held-out metrics.
func evaluate(m *DeepFM, gen *Generator, n int, d cgotorch.Device, clickRate float64, res *Result) error {
	m.Train(false)
	defer m.Train(true)
	var p, truth, base []float64
	var labels []bool
	var unseen [numFields]int
	const batch = 4096
	for len(p) < n {
		samples := make([]Sample, min(batch, n-len(p)))
		for i := range samples {
			samples[i] = gen.Next()
			truth = append(truth, samples[i].Truth)
			labels = append(labels, samples[i].Click)
			base = append(base, clickRate)
		}
		var probs []float32
		err := cgotorch.TryWithScope(func() error {
			b, err := NewBatch(samples, d)
			if err != nil {
				return err
			}
			cgotorch.NoGrad(func() {
				var logits *cgotorch.Tensor
				if logits, err = m.Logits(b); err == nil {
					probs, err = cgotorch.ToSlice[float32](logits.Sigmoid())
				}
			})
			return err
		})
		if err != nil {
			return err
		}
		for _, q := range probs {
			p = append(p, float64(q))
		}
		if err := countUnseen(m, samples, &unseen); err != nil {
			return err
		}
	}
	res.UnseenUsers, res.UnseenItems = float64(unseen[fUser])/float64(n), float64(unseen[fItem])/float64(n)
	res.AUC, res.LogLoss = auc(p, labels), logLoss(p, labels)
	res.OracleAUC, res.OracleLogLoss = auc(truth, labels), logLoss(truth, labels)
	res.BaseLogLoss = logLoss(base, labels)
	return nil
}

// countUnseen adds to unseen[f] the number of samples whose user or item id (f) is not in its
// table.
func countUnseen(m *DeepFM, samples []Sample, unseen *[numFields]int) error {
	ids := make([]int64, len(samples))
	for _, f := range []int{fUser, fItem} {
		for i, s := range samples {
			ids[i] = s.IDs[f]
		}
		var found []bool
		err := cgotorch.TryWithScope(func() error {
			_, ft, err := m.tables[f].Read(cgotorch.MustFromSlice(ids))
			if err == nil {
				found, err = cgotorch.ToSlice[bool](ft)
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, ok := range found {
			if !ok {
				unseen[f]++
			}
		}
	}
	return nil
}
