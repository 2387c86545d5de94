// Package tests holds gorec's end-to-end tests: whole training and serving flows through the
// public packages (embedding, nn, cgotorch) together, as a user's program runs them, where each
// package's own tests check its parts. It has no code of its own; run it with
// `go test ./tests/`.
//
//   - resume_test.go: a model of three hash tables (growing, with admission, eviction and
//     compaction, three sparse optimizers) and dense layers with dropout and AdamW, all rates
//     on one cosine schedule, trained from a stream, checkpointed mid-stream with
//     SaveTrainingCheckpoint (the scheduler's state as a file of the caller's) and resumed: the
//     resumed run gives the uninterrupted run's losses and final state to the bit.
//   - serve_test.go: the trained tables pushed to a serving store with ExportEach, and
//     ReadInto answering from many goroutines while training goes on, both checked against
//     the tables.
//   - examples_copy_test.go: each example's folder, copied into a module of its own, builds on
//     gorec's public API alone.
package tests
