package dist

import "github.com/gorec/gorec/cgotorch"

// BytesSent is the payload this rank has handed to the group's collectives since it started:
// an all-reduce's or an all-gather's input tensor, a broadcast's on its root, the rows of an
// all-to-all that go to other ranks. It leaves out the agreement every collective begins with
// (a small header) and the copies of the algorithms (a ring all-reduce sends its input about
// twice). Benchmarks report it per step.
func (g *Group) BytesSent() int64 { return g.sent.Load() }

// Collectives is how many collectives this rank has called on the group since it started
// (each one an exchange of the ranks' agreement headers, and most one of data as well).
// Benchmarks report it per step.
func (g *Group) Collectives() int64 { return g.calls.Load() }

// count adds the bytes of t to BytesSent (nothing for an invalid tensor: the collective
// refuses it).
func (g *Group) count(t *cgotorch.Tensor) {
	if t != nil && !t.Closed() {
		g.sent.Add(t.Numel() * int64(t.DType().Size()))
	}
}

// countRows adds to BytesSent the rows of t that an all-to-all of splits send sends to other
// ranks.
func (g *Group) countRows(t *cgotorch.Tensor, send []int64) {
	if t == nil || t.Closed() || len(send) != g.WorldSize() {
		return
	}
	rows := int64(0)
	for j, n := range send {
		if j != g.Rank() {
			rows += n
		}
	}
	sh := t.Shape()
	if len(sh) == 0 || sh[0] == 0 {
		return
	}
	g.sent.Add(rows * t.Numel() / sh[0] * int64(t.DType().Size()))
}
