package main

import (
	"math"
	"math/rand/v2"
)

// The fields of a click-log sample: five single-valued categorical fields and a bag of tags.
const (
	fUser = iota
	fItem
	fCategory
	fHour
	fDevice
	numFields // single-valued fields
)

var fieldNames = [...]string{"user", "item", "category", "hour", "device", "tags"}

// Sample is one impression: the ids of the single-valued fields, the item's tags (1 to 3) and
// whether it was clicked. Truth is the click probability of the hidden model.
type Sample struct {
	IDs   [numFields]int64
	Tags  []int64
	Click bool
	Truth float64
}

// GenConfig shapes the synthetic log.
type GenConfig struct {
	Seed         uint64
	Users, Items int     // sizes of the established populations, drawn with Zipf frequencies
	Zipf         float64 // exponent (> 1): P(rank k) is proportional to (k+1)^-Zipf
	// Every Launch samples a new item is launched; a FreshShare of the impressions go to one of
	// the Fresh most recently launched items, uniformly.
	Launch, Fresh int
	FreshShare    float64
}

// Generator draws samples in time order. Each user and established item has a fixed Zipf
// rank, and its raw id is a 62-bit hash of the rank (as raw feature ids look: large and
// sparse). New ids keep appearing: users and items from the long tail (Heaps' law) and freshly
// launched items. The labels come from a hidden logistic model whose per-id weights are pure
// functions of (seed, field, id), so the id space is unbounded:
//
//	logit = -1.6 + b_user + b_item + b_category + b_hour + b_device + mean(b_tag)
//	        + <u_user, v_item> + <c_category, d_device>
type Generator struct {
	cfg        GenConfig
	rng        *rand.Rand
	user, item *rand.Zipf
	t          int64
}

// NewGenerator returns a generator at time 0.
func NewGenerator(cfg GenConfig) *Generator {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	return &Generator{
		cfg:  cfg,
		rng:  rng,
		user: rand.NewZipf(rng, cfg.Zipf, 1, uint64(cfg.Users-1)),
		item: rand.NewZipf(rng, cfg.Zipf, 1, uint64(cfg.Items-1)),
	}
}

// Next draws the next sample.
func (g *Generator) Next() Sample {
	var s Sample
	seed := g.cfg.Seed
	s.IDs[fUser] = rawID(seed, 4, int64(g.user.Uint64()))
	if launched := g.t / int64(g.cfg.Launch); launched > 0 && g.rng.Float64() < g.cfg.FreshShare {
		s.IDs[fItem] = rawID(seed, 5, -1-max(0, launched-1-g.rng.Int64N(int64(g.cfg.Fresh))))
	} else {
		s.IDs[fItem] = rawID(seed, 5, int64(g.item.Uint64()))
	}
	s.IDs[fCategory] = int64(mix(seed, 1, s.IDs[fItem], 0) % 200)
	s.IDs[fHour] = (g.t / 2000) % 24
	s.IDs[fDevice] = int64(g.rng.IntN(6))
	for j := range 1 + mix(seed, 2, s.IDs[fItem], 0)%3 {
		s.Tags = append(s.Tags, int64(mix(seed, 3, s.IDs[fItem], int64(j))%1000))
	}
	s.Truth = g.probability(&s)
	s.Click = g.rng.Float64() < s.Truth
	g.t++
	return s
}

// rawID is the raw id of rank k (established, k >= 0) or of launched item -1-k.
func rawID(seed, stream uint64, k int64) int64 {
	return int64(mix(seed, stream, k, 0) >> 2)
}

// The hidden model's scales: the standard deviations of the biases per field and of the
// latent vectors' entries.
var biasStd = [numFields]float64{0.5, 0.6, 0.4, 0.3, 0.3}

const (
	tagStd    = 0.5
	latentDim = 4
	latentStd = 0.6
)

func (g *Generator) probability(s *Sample) float64 {
	seed := g.cfg.Seed
	logit := -1.6
	for f, id := range s.IDs {
		logit += biasStd[f] * gauss(seed, uint64(10+f), id, 0)
	}
	var tags float64
	for _, t := range s.Tags {
		tags += gauss(seed, 20, t, 0)
	}
	logit += tagStd * tags / float64(len(s.Tags))
	for k := range int64(latentDim) {
		logit += latentStd * latentStd * gauss(seed, 30, s.IDs[fUser], k) * gauss(seed, 31, s.IDs[fItem], k)
		logit += latentStd * latentStd * gauss(seed, 32, s.IDs[fCategory], k) * gauss(seed, 33, s.IDs[fDevice], k)
	}
	return 1 / (1 + math.Exp(-logit))
}

// mix hashes (seed, stream, id, k) with SplitMix64's finaliser.
func mix(seed, stream uint64, id, k int64) uint64 {
	z := seed ^ stream*0xbf58476d1ce4e5b9 ^ uint64(id)*0x94d049bb133111eb ^ uint64(k)*0x9e3779b97f4a7c15
	for range 2 {
		z += 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
	}
	return z
}

// gauss is a standard normal value that depends only on its arguments (Box-Muller).
func gauss(seed, stream uint64, id, k int64) float64 {
	h := mix(seed, stream, id, k)
	u1 := (float64(h>>40) + 0.5) / (1 << 24)
	u2 := float64(h&(1<<24-1)) / (1 << 24)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
