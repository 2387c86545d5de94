package embedding

// SegmentSpans returns where each of segments segments of bags starts and ends among n ids
// ([start, end)), from the bags' bounds in the form kind says, as ForwardBags takes them; bounds
// that do not fit the ids are ErrBadInput.
func SegmentSpans(n int64, bounds []int64, kind BagBounds, segments int) ([][2]int64, error) {
	const op = "segment spans"
	m := len(bounds)
	if kind == OffsetsIncludeLast {
		m--
	}
	if segments <= 0 || m < 0 || m%segments != 0 {
		return nil, badInput(op, "", "%d bounds do not make %d segments of bags", len(bounds), segments)
	}
	b := m / segments
	spans := make([][2]int64, segments)
	if kind == Lengths {
		var at int64
		for k := range spans {
			start := at
			for _, l := range bounds[k*b : (k+1)*b] {
				if l < 0 {
					return nil, badInput(op, "", "a bag of length %d", l)
				}
				at += l
			}
			spans[k] = [2]int64{start, at}
		}
		if at != n {
			return nil, badInput(op, "", "the bags' lengths add up to %d, not to the %d ids", at, n)
		}
		return spans, nil
	}
	for i, o := range bounds {
		if o < 0 || o > n || (i > 0 && o < bounds[i-1]) {
			return nil, badInput(op, "", "offset %d is %d: offsets rise from 0 to at most the %d ids", i, o, n)
		}
	}
	edge := func(i int) int64 { // the offset of bag i; the last bag ends at n
		if i < len(bounds) {
			return bounds[i]
		}
		return n
	}
	for k := range spans {
		spans[k] = [2]int64{edge(k * b), edge((k + 1) * b)}
	}
	return spans, nil
}
