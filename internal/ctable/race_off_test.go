//go:build !race

package ctable_test

const raceEnabled = false
