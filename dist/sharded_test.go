package dist

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Owner's values are part of the format: these were computed by an independent implementation
// of the documented formula (Python, with 64-bit wrap-around).
func TestOwnerGolden(t *testing.T) {
	ids := []int64{0, 1, 2, 6, 12, -1, 1 << 40}
	want := map[int][]int{
		2: {1, 1, 0, 0, 1, 0, 1},
		3: {1, 2, 1, 2, 0, 2, 0},
		7: {2, 2, 4, 3, 1, 0, 5},
	}
	for w, owners := range want {
		for i, id := range ids {
			if got := Owner(id, w); got != owners[i] {
				t.Errorf("Owner(%d, %d) = %d, want %d", id, w, got, owners[i])
			}
		}
	}
}

// Strided ids (multiples of the world size, which a raw modulo puts on one rank) spread evenly.
func TestOwnerSpreadsStridedIDs(t *testing.T) {
	for _, w := range []int{2, 3, 4, 8} {
		counts := make([]int, w)
		const n = 8000
		for i := int64(0); i < n; i++ {
			counts[Owner(i*int64(w)*16, w)]++
		}
		for r, c := range counts {
			if c < n/w*9/10 || c > n/w*11/10 {
				t.Errorf("world %d: rank %d owns %d of %d strided ids", w, r, c, n)
			}
		}
	}
}

// runSharded runs a sharded scenario on world ranks over a FileStore; env adds variables.
func runSharded(t *testing.T, scenario string, world int, timeout time.Duration, env ...string) []rankResult {
	return launch(t, scenario, world, store(t, "file"), timeout, func(int) []string { return env })
}

// Training over a sharded table on 1, 2 and 3 ranks (each rank its slice of every global batch)
// ends with the rows, optimizer states and step of one process trained on the whole batches,
// within the tolerance equalAbs + equalRel*|want|, for SGD (with momentum), Adagrad and
// SparseAdam tables; every rank's shard holds only the ids it owns.
func TestShardedEquivalence(t *testing.T) { runEquivalence(t, "sharded-train") }

// runEquivalence runs an equivalence scenario on 1, 2 and 3 ranks, for each table optimizer.
func runEquivalence(t *testing.T, scenario string) {
	for _, opt := range []string{"sgd", "adagrad", "sparseadam"} {
		for _, world := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/%d", opt, world), func(t *testing.T) {
				res := runSharded(t, scenario, world, 30*time.Second, "GOREC_SHARD_OPT="+opt)
				requirePassed(t, res)
				t.Log(res[0].output)
			})
		}
	}
}

// The equivalence test catches a defective exchange: gradients sent to the wrong rank, one
// gradient lost, or an owner keeping one rank's gradient instead of the sum (each rank
// fails unless its comparison finds the difference).
func TestShardedEquivalenceCatchesDefects(t *testing.T) {
	for _, f := range []string{"wrong-owner", "lost-gradient", "no-sum"} {
		t.Run(f, func(t *testing.T) {
			res := runSharded(t, "sharded-train", 2, 30*time.Second, "GOREC_SHARD_OPT=sgd", "GOREC_SHARD_FAULT="+f)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// A row's initial value depends on (name, seed, id) only: a sharded table on 2 and 3 ranks gives
// the rows of a table of one process, bit for bit, also with the default seed (derived from the
// name).
func TestShardedInitialRows(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			requirePassed(t, runSharded(t, "sharded-init", world, 30*time.Second))
		})
	}
}

// Write, Read, Update, Delete, Len, Stats and Export give what one table given every rank's
// calls gives.
func TestShardedOps(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			requirePassed(t, runSharded(t, "sharded-ops", world, 30*time.Second))
		})
	}
}

// Ranks creating a table with another dim, seed, optimizer, learning rate or initializer all
// fail, with ErrMismatch.
func TestShardedConfigMismatch(t *testing.T) {
	res := runSharded(t, "sharded-config", 2, 30*time.Second)
	requirePassed(t, res)
	t.Log(res[0].output)
}

// Bad input on one rank fails the operation on every rank, and no shard changes.
func TestShardedBadInput(t *testing.T) {
	res := runSharded(t, "sharded-bad", 2, 30*time.Second)
	requirePassed(t, res)
	t.Log(res[0].output, res[1].output)
}

// A rank killed between its backward pass and its step: the others' step fails within the
// timeout.
func TestShardedKilledRank(t *testing.T) {
	for _, c := range []struct{ world, kill int }{{2, 1}, {3, 0}} {
		t.Run(fmt.Sprintf("%d/kill%d", c.world, c.kill), func(t *testing.T) {
			res := runSharded(t, "sharded-killed", c.world, 5*time.Second, fmt.Sprint("GOREC_DIST_KILL=", c.kill))
			for _, r := range res {
				if r.rank != c.kill {
					requirePassed(t, []rankResult{r})
				}
			}
			t.Log(res[(c.kill+1)%c.world].output)
		})
	}
}

// A rank whose shard fails to apply an agreed change (closed under the table): every rank
// gets an error, not only that one.
func TestShardedOwnerFails(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			res := runSharded(t, "sharded-closed", world, 30*time.Second)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// A table saved by 2 ranks loads into 3, 2 and 1 (and one saved by 3 into 2) with the same
// ids, rows, optimizer states, step and rate, bit for bit, for SGD with momentum (lazy
// momentum stamps) and SparseAdam, and training resumed from it matches one process trained
// without interruption. A generation left by a save that crashed before its commit is
// ignored.
func TestShardedSaveLoad(t *testing.T) {
	for _, opt := range []string{"sgd", "sparseadam"} {
		for _, c := range []struct{ save, load int }{{2, 3}, {2, 2}, {2, 1}, {3, 2}} {
			t.Run(fmt.Sprintf("%s/%dto%d", opt, c.save, c.load), func(t *testing.T) {
				dir := t.TempDir()
				env := []string{"GOREC_SHARD_OPT=" + opt, "GOREC_SHARD_DIR=" + dir}
				requirePassed(t, runSharded(t, "sharded-save", c.save, 30*time.Second, env...))
				crashed := filepath.Join(dir, generationDir(99), "rank-00000")
				if err := os.MkdirAll(crashed, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(crashed, "junk"), []byte("torn"), 0o644); err != nil {
					t.Fatal(err)
				}
				res := runSharded(t, "sharded-load", c.load, 30*time.Second, env...)
				requirePassed(t, res)
				t.Log(res[0].output)
			})
		}
	}
}

// Rank 0 killed after every shard of a second save is written, before its commit: the other
// ranks' Save fails, and the first save loads (into 2 and 3 ranks) as it was.
func TestShardedSaveCrash(t *testing.T) {
	for _, load := range []int{2, 3} {
		t.Run(fmt.Sprint(load), func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"GOREC_SHARD_OPT=sparseadam", "GOREC_SHARD_DIR=" + dir}
			res := runSharded(t, "sharded-crash", 2, 5*time.Second, env...)
			if !killedBySignal(res[0].err, syscall.SIGKILL) {
				t.Fatalf("rank 0 was not killed: %v\n%s", res[0].err, res[0].output)
			}
			requirePassed(t, res[1:])
			gens, _ := filepath.Glob(filepath.Join(dir, "gen-*"))
			if len(gens) != 2 {
				t.Errorf("generations after the crash: %v, want the committed one and the torn one", gens)
			}
			requirePassed(t, runSharded(t, "sharded-load", load, 30*time.Second, env...))
		})
	}
}
