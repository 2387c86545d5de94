package main

import (
	"math"
	"slices"
)

// auc is the area under the ROC curve of scores against labels: the probability that a random
// positive scores above a random negative, ties counting one half (the rank-sum formula with
// average ranks). It is NaN when one class is absent or a score is NaN (which has no rank).
func auc(scores []float64, labels []bool) float64 {
	if slices.ContainsFunc(scores, math.IsNaN) {
		return math.NaN()
	}
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case scores[a] < scores[b]:
			return -1
		case scores[a] > scores[b]:
			return 1
		}
		return 0
	})
	var rankSum float64
	var pos int
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks i+1 .. j, averaged
		for _, k := range idx[i:j] {
			if labels[k] {
				rankSum += avg
				pos++
			}
		}
		i = j
	}
	neg := len(scores) - pos
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return (rankSum - float64(pos)*float64(pos+1)/2) / (float64(pos) * float64(neg))
}

// logLoss is the mean binary cross-entropy of probabilities p against labels.
func logLoss(p []float64, labels []bool) float64 {
	var s float64
	for i, q := range p {
		q = min(max(q, 1e-7), 1-1e-7)
		if labels[i] {
			s -= math.Log(q)
		} else {
			s -= math.Log(1 - q)
		}
	}
	return s / float64(len(p))
}
