//go:build race

package nn_test

// raceEnabled: the race detector's own memory grows with the number of goroutines and
// synchronisation events a test makes, so resident-size bounds are checked without it.
const raceEnabled = true
