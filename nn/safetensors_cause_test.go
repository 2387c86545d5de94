package nn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// Malformed or missing state keeps its cause next to the sentinel: the reader's error, the
// JSON decoder's, the OS error.

func TestReadSafetensorsKeepsTheCause(t *testing.T) {
	valid := validFile(t)
	for name, data := range map[string][]byte{
		"cut in the length": valid[:5],
		"cut in the header": valid[:20],
		"cut in the data":   valid[:len(valid)-1],
	} {
		_, _, err := nn.ReadSafetensors(bytes.NewReader(data))
		if !errors.Is(err, nn.ErrFormat) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v; want ErrFormat and io.ErrUnexpectedEOF", name, err)
		}
	}
	var syn *json.SyntaxError
	err := nn.LoadState(bytes.NewReader(stFile(`{"a":{"dtype":`, nil)), interopModel())
	if !errors.Is(err, nn.ErrFormat) || !errors.As(err, &syn) {
		t.Errorf("bad JSON: %v; want ErrFormat and a *json.SyntaxError", err)
	}
}

// A file that fails at its second entry leaves no tensor behind: the first entry's is closed
// at once, not left to the finalizer.
func TestReadSafetensorsClosesWhatItBuiltOnFailure(t *testing.T) {
	data := stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"BOOL","shape":[1],"data_offsets":[4,5]}}`,
		[]byte{0, 0, 128, 63, 2})
	base := cgotorch.LiveTensors()
	if _, _, err := nn.ReadSafetensors(bytes.NewReader(data)); !errors.Is(err, nn.ErrFormat) {
		t.Fatalf("%v; want ErrFormat (bool byte 2)", err)
	}
	if n := cgotorch.LiveTensors(); n > base { // (a finalizer may free an older test's tensor meanwhile)
		t.Errorf("%d live tensors after the failed read, %d before", n, base)
	}
}

func TestLoadCheckpointOfAMissingDirectory(t *testing.T) {
	err := nn.LoadCheckpoint(context.Background(), filepath.Join(t.TempDir(), "missing"), interopModel())
	if !errors.Is(err, embedding.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v; want embedding.ErrNotFound and fs.ErrNotExist", err)
	}
}
