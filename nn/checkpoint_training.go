package nn

import (
	"context"
	"fmt"
	"io"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// SaveTrainingCheckpoint is SaveCheckpointWith that also saves what resuming training needs
// beyond the model: opt's state (Optimizer.SaveState: moment estimates, momentum buffers, step
// counts, the groups' learning rates) and the state of libtorch's default CPU generator
// (cgotorch.RNGState: what Dropout and Rand draw next). LoadTrainingCheckpoint into a model and
// an optimizer built the same way then continues with the numbers the uninterrupted run
// gives. Save between steps (after Step, before the next ZeroGrad), from the goroutine that
// trains.
func SaveTrainingCheckpoint(ctx context.Context, dir string, m Module, opt *Optimizer, o embedding.SaveOptions) error {
	if opt == nil {
		return badCheckpoint("save", "nil optimizer")
	}
	return saveModel(ctx, dir, m, opt, o)
}

// LoadTrainingCheckpoint restores a checkpoint of SaveTrainingCheckpoint into m and opt and
// sets libtorch's default CPU generator to the saved state (it is process-wide). As
// LoadCheckpointWith, it reads and checks everything first (the tables, the dense state, the
// optimizer's state as Optimizer.LoadState checks it, the generator's state and the caller's
// files), so on error m, opt and the generator are as they were; a checkpoint of
// SaveCheckpoint, which has no optimizer state, is embedding.ErrIncompatible.
func LoadTrainingCheckpoint(ctx context.Context, dir string, m Module, opt *Optimizer, files map[string]func(io.Reader) error) error {
	if opt == nil {
		return badCheckpoint("load", "nil optimizer")
	}
	return loadModel(ctx, dir, m, opt, files)
}

// savers are the checkpoint's own files: the dense state, and with an optimizer its state and
// the generator's.
func savers(m Module, opt *Optimizer) map[string]func(io.Writer) error {
	own := map[string]func(io.Writer) error{denseFile: func(w io.Writer) error { return SaveState(w, m) }}
	if opt != nil {
		own[optimizerFile] = opt.SaveState
		own[rngFile] = writeRNG
	}
	return own
}

// modelReads holds what a model checkpoint's own files gave, read and checked, until the
// tables are in.
type modelReads struct {
	dense, opt *checkedState
	rng        *Tensor
}

func (r *modelReads) readers(m Module, opt *Optimizer) map[string]func(io.Reader) error {
	// A checkpoint's file is read whole: bytes after the safetensors data are an error.
	own := map[string]func(io.Reader) error{denseFile: func(rd io.Reader) (err error) {
		r.dense, err = readState(rd, m, true)
		return err
	}}
	if opt != nil {
		own[optimizerFile] = func(rd io.Reader) (err error) {
			r.opt, err = opt.readState(rd, true)
			return err
		}
		own[rngFile] = func(rd io.Reader) (err error) {
			r.rng, err = readRNG(rd)
			return err
		}
	}
	return own
}

// apply copies in the dense state, then the optimizer's, then sets the generator.
func (r *modelReads) apply() error {
	if err := r.dense.apply(); err != nil {
		return err
	}
	if r.opt != nil {
		if err := r.opt.apply(); err != nil {
			return err
		}
	}
	if r.rng != nil {
		return cgotorch.SetRNGState(r.rng)
	}
	return nil
}

func (r *modelReads) close() {
	for _, st := range []*checkedState{r.dense, r.opt} {
		if st != nil {
			st.close()
		}
	}
	r.rng.Close()
}

// The generator's state is stored as its bytes.
func writeRNG(w io.Writer) error {
	st, err := cgotorch.RNGState()
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := cgotorch.ToSlice[uint8](st)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// readRNG reads a generator state of the length this libtorch's has and checks its contents
// as libtorch does when it sets one (cgotorch.CheckRNGState), so that setting it, the last step
// of a load, cannot fail after the model has changed.
func readRNG(r io.Reader) (*Tensor, error) {
	cur, err := cgotorch.RNGState()
	if err != nil {
		return nil, err
	}
	n := cur.Numel()
	cur.Close()
	b, err := io.ReadAll(io.LimitReader(r, n+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("%w: the random generator's state has %d bytes, this libtorch's %d",
			cgotorch.ErrInvalidArgument, len(b), n)
	}
	st, err := cgotorch.FromSlice(b)
	if err != nil {
		return nil, err
	}
	if err := cgotorch.CheckRNGState(st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
