package main

import (
	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// featureNames are the keys of a batch's features, in the order of the model's output columns:
// the fields' embeddings (fieldNames: each single-valued field a bag of one id, then the tags),
// then their first-order weights (the same ids tagged with their field, from the shared
// "linear" table).
var featureNames = func() []string {
	out := append([]string(nil), fieldNames[:]...)
	for _, f := range fieldNames {
		out = append(out, "linear_"+f)
	}
	return out
}()

// Batch holds a batch of samples as tensors: its features (featureNames, B bags each) as the
// input of the model's EmbeddingBagCollection, on the CPU, and the labels float32 [B, 1].
type Batch struct {
	KJT    nn.KeyedJagged
	Labels *nn.Tensor
}

// NewBatch converts samples to a batch, its labels on device d. The ids stay on the CPU: the
// tables look them up and pool their bags on the host (embedding.ForwardBags), and the model
// moves the pooled rows to d.
func NewBatch(samples []Sample, d cgotorch.Device) (*Batch, error) {
	n := len(samples)
	values := make([]int64, 0, 2*n*(numFields+3))
	lengths := make([]int64, 0, 2*n*len(fieldNames))
	for _, linear := range []bool{false, true} {
		key := func(id int64, field int) int64 { return id }
		if linear {
			key = tagged
		}
		for f := range numFields {
			for _, s := range samples {
				values = append(values, key(s.IDs[f], f))
				lengths = append(lengths, 1)
			}
		}
		for _, s := range samples {
			for _, t := range s.Tags {
				values = append(values, key(t, numFields))
			}
			lengths = append(lengths, int64(len(s.Tags)))
		}
	}
	labels := make([]float32, n)
	for i, s := range samples {
		if s.Click {
			labels[i] = 1
		}
	}
	l, err := cgotorch.MustFromSlice(labels, int64(n), 1).To(d, cgotorch.KeepDType)
	if err != nil {
		return nil, err
	}
	kjt := nn.KeyedJagged{Keys: featureNames, Values: cgotorch.MustFromSlice(values), Lengths: cgotorch.MustFromSlice(lengths)}
	return &Batch{KJT: kjt, Labels: l}, nil
}

// tagged returns id with field's number in the high bits, which keeps the fields apart in the
// shared first-order table.
func tagged(id int64, field int) int64 { return int64(field+1)<<48 ^ id }
