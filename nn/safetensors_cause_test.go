package nn_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"testing"

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

func TestLoadCheckpointOfAMissingDirectory(t *testing.T) {
	err := nn.LoadCheckpoint(filepath.Join(t.TempDir(), "missing"), interopModel())
	if !errors.Is(err, embedding.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v; want embedding.ErrNotFound and fs.ErrNotExist", err)
	}
}
