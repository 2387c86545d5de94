//go:build !race

package embedding_test

const raceEnabled = false
