package main

// The per-epoch progress bar: rows done, rows per second and the estimated time left, redrawn
// in place on a terminal, one line at the end of the epoch otherwise.

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar tracks one pass over Total rows. Create it with newBar, call Add after each batch and Done
// at the end.
type Bar struct {
	out         io.Writer
	label       string
	total, done int
	live        bool
	start, last time.Time
}

// redraw is the shortest interval between two redraws of a live bar.
const redraw = 100 * time.Millisecond

// newBar starts a bar over total rows. live redraws it in place with carriage returns (for a
// terminal); otherwise only Done writes, once.
func newBar(out io.Writer, label string, total int, live bool) *Bar {
	now := time.Now()
	return &Bar{out: out, label: label, total: total, live: live, start: now, last: now}
}

// Add records n more rows done.
func (b *Bar) Add(n int) {
	b.done += n
	if b.live && time.Since(b.last) >= redraw {
		b.last = time.Now()
		fmt.Fprintf(b.out, "\r%s", b.Line())
	}
}

// Rate is the rows per second so far.
func (b *Bar) Rate() float64 {
	s := time.Since(b.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(b.done) / s
}

// Elapsed is the time since newBar.
func (b *Bar) Elapsed() time.Duration { return time.Since(b.start) }

// Done writes the final state of the bar followed by suffix and a newline.
func (b *Bar) Done(suffix string) {
	prefix := ""
	if b.live {
		prefix = "\r"
	}
	fmt.Fprintf(b.out, "%s%s %s\n", prefix, b.Line(), suffix)
}

const width = 24

// Line is the bar as text: label, bar, percentage, rows done, rows per second, ETA, elapsed.
func (b *Bar) Line() string {
	frac := 1.0
	if b.total > 0 {
		frac = min(float64(b.done)/float64(b.total), 1)
	}
	filled := int(frac * width)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	rate := b.Rate()
	eta := "-"
	if rate > 0 && b.done < b.total {
		eta = time.Duration(float64(b.total-b.done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	return fmt.Sprintf("%s [%s] %3.0f%% %d/%d  %.0f rows/s  ETA %s  %s",
		b.label, bar, 100*frac, b.done, b.total, rate, eta, b.Elapsed().Round(100*time.Millisecond))
}
