//go:build race

package ctable_test

// raceEnabled: the race detector keeps shadow memory for what a test allocates, so
// resident-size bounds are checked without it (make gotest runs them again so).
const raceEnabled = true
