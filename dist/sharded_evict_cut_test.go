package dist

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// sumRanks is an all-reduce (a sum) among world goroutines, which counts its rounds.
type sumRanks struct {
	mu     sync.Mutex
	cond   *sync.Cond
	world  int
	in     int     // the vectors added to acc this round
	acc    []int64 // this round's sum so far
	out    []int64 // the last round's sum
	rounds int
}

func newSumRanks(world int) *sumRanks {
	s := &sumRanks{world: world}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *sumRanks) sum(v []int64) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acc == nil {
		s.acc = make([]int64, len(v))
	}
	for i, x := range v {
		s.acc[i] += x
	}
	s.in++
	if round := s.rounds; s.in < s.world {
		for round == s.rounds {
			s.cond.Wait()
		}
	} else {
		s.out, s.acc, s.in = s.acc, nil, 0
		s.rounds++
		s.cond.Broadcast()
	}
	return slices.Clone(s.out), nil
}

// cutOn runs rankedCut on one goroutine per rank's keys; it returns each rank's result and the
// number of rounds.
func cutOn(keys [][]key128, n int64) (cuts []key128, nones []bool, rounds int) {
	s := newSumRanks(len(keys))
	cuts, nones = make([]key128, len(keys)), make([]bool, len(keys))
	var wg sync.WaitGroup
	for r := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cuts[r], nones[r], _ = rankedCut(keys[r], n, int64(len(keys)), s.sum)
		}()
	}
	wg.Wait()
	return cuts, nones, s.rounds
}

// rankedCut finds the (n+1)-th largest key of all the ranks' keys, the same on every rank, and
// none when they hold n or fewer: keys at random; keys that share most of their bytes (all
// ranks' keys one last step and frequency, ids below 2^33, as a table trained in one batch),
// where the shared bytes take no round; each rank's keys sharing a byte that differs between
// the ranks; ranks without keys; repeated keys. The caller's keys are left as they were.
func TestRankedCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	id := func(id int64) key128 { return keyOf(id, 7, 2, false) }
	cases := []struct {
		name      string
		keys      func(rank int) []key128
		maxRounds int
	}{
		{"random", func(int) []key128 {
			k := make([]key128, 300)
			for i := range k {
				k[i] = key128{rng.Uint64(), rng.Uint64()}
			}
			return k
		}, 16},
		{"one-step", func(rank int) []key128 {
			k := make([]key128, 2000)
			for i := range k {
				k[i] = id(int64(rng.IntN(1 << 33)))
			}
			return k
		}, 6}, // the id's 5 low bytes, and the first round
		{"byte-per-rank", func(rank int) []key128 { // byte 3 (last step's low byte) the rank's own
			k := make([]key128, 100)
			for i := range k {
				k[i] = keyOf(int64(rng.IntN(1000)), int64(rank), int64(rng.IntN(3)), false)
			}
			return k
		}, 16},
		{"empty-ranks", func(rank int) []key128 {
			if rank != 1 {
				return nil
			}
			k := make([]key128, 50)
			for i := range k {
				k[i] = id(int64(i))
			}
			return k
		}, 16},
		{"repeated", func(rank int) []key128 {
			k := make([]key128, 60)
			for i := range k {
				k[i] = key128{uint64(rng.IntN(3)), uint64(rng.IntN(4)) << 40}
			}
			return k
		}, 16},
	}
	for _, c := range cases {
		for _, world := range []int{1, 2, 3} {
			keys := make([][]key128, world)
			var all []key128
			for r := range keys {
				keys[r] = c.keys(r)
				all = append(all, keys[r]...)
			}
			given := fmt.Sprint(keys)
			slices.SortFunc(all, func(a, b key128) int { // descending
				if a == b {
					return 0
				}
				if a.less(b) {
					return 1
				}
				return -1
			})
			for _, n := range []int64{0, 1, int64(len(all)) / 2, max(int64(len(all))-1, 0), int64(len(all)), int64(len(all)) + 5} {
				cuts, nones, rounds := cutOn(keys, n)
				for r := range keys {
					if want := n >= int64(len(all)); nones[r] != want {
						t.Fatalf("%s, %d ranks, n %d: rank %d: none %v, want %v", c.name, world, n, r, nones[r], want)
					}
					if !nones[r] && cuts[r] != all[n] {
						t.Fatalf("%s, %d ranks, n %d: rank %d's cut %x, want %x", c.name, world, n, r, cuts[r], all[n])
					}
				}
				if !nones[0] && rounds > c.maxRounds {
					t.Errorf("%s, %d ranks, n %d: %d rounds, want %d at most", c.name, world, n, rounds, c.maxRounds)
				}
			}
			if fmt.Sprint(keys) != given {
				t.Errorf("%s, %d ranks: the caller's keys changed", c.name, world)
			}
		}
	}
}
