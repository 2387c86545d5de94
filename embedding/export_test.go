package embedding

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/crc32"
	"strconv"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// LoadTableBytes loads data as the table file of a dim-3 Adagrad table whose manifest entry
// agrees with data's header (rows, counts, step and checksums taken from it when it parses),
// so that fuzzed bytes reach every check of the loader, and closes the table again.
func LoadTableBytes(data []byte) error {
	e := tableEntry{Name: "fuzz", Dim: 3, BlockRows: 4, Layout: "separate", Initializer: "zeros",
		Optimizer: "adagrad", OptParams: [8]float64{0.01, 0, 0, 1e-10}, ReadDefault: "zeros",
		Size: int64(len(data)), Checksums: map[string]uint32{}}
	if l, err := readLayout(bytes.NewReader(data), int64(len(data))); err == nil {
		if r, ok := l.Tensor("ids"); ok && len(r.Shape) == 1 {
			e.Rows = r.Shape[0]
		}
		if r, ok := l.Tensor("admission.ids"); ok && len(r.Shape) == 1 {
			e.Counts = r.Shape[0]
		}
		e.Step, _ = strconv.ParseInt(l.Meta["step"], 10, 64)
		for _, r := range l.Tensors {
			e.Checksums[r.Name] = crc32.Checksum(data[l.DataStart+r.Begin:l.DataStart+r.End], castagnoli)
		}
	}
	_, cc := configOf(e, cgotorch.CPU, false, e.TrackAccess)
	t, err := ctable.New("", cc) // unnamed
	if err != nil {
		return err
	}
	defer t.Close()
	return readTable(context.Background(), bytes.NewReader(data), int64(len(data)), e, t)
}

// ParseManifest exposes the manifest parser to the fuzz target.
func ParseManifest(b []byte) error {
	_, err := parseManifest(b)
	return err
}

// DefaultBlockRows is the BlockRows a table on device gets when its Config leaves it 0.
func DefaultBlockRows(device cgotorch.Device) (int, error) {
	cfg, _, err := Config{Dim: 1, Device: device}.resolve("block-rows")
	return cfg.BlockRows, err
}

// SealManifest sets the checksum of the manifest b (JSON) to what its contents give, as a save
// does: tests that edit a manifest on purpose reach the checks after it.
func SealManifest(b []byte) ([]byte, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	sum, err := manifestSum(m)
	if err != nil {
		return nil, err
	}
	m.Checksum = &sum
	return json.MarshalIndent(m, "", "  ")
}
