package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// WriteSynced creates path (it must not exist), writes it with f and fsyncs it. On error the
// partial file is left for the caller to remove (it knows whether the name was its own).
func WriteSynced(path string, f func(io.Writer) error) error {
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return writeAndClose(file, f)
}

// writeAndClose writes file with f, fsyncs and closes it: the first error is returned.
func writeAndClose(file *os.File, f func(io.Writer) error) error {
	err := f(file)
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir fsyncs the directory dir, which makes the renames and creations in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Replace writes path with f through a temporary file of its own in the same directory
// (path's name + ".tmp-" + a random suffix), renamed over path once complete and synced. The file
// gets mode 0666 less the process's umask, as os.Create gives (0644 under the usual umask 022).
// On any error path is as it was (absent, or its old contents) and the temporary file is
// removed. Calls at once on one path never see each other's temporary files: each leaves path
// holding its own contents in full when it returns nil (the last rename wins). A temporary file
// left behind by a crash keeps its name; nothing reads it.
func Replace(path string, f func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	file, err := createTemp(dir, base+".tmp-")
	if err != nil {
		return err
	}
	tmp := file.Name()
	err = writeAndClose(file, f)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

// createTemp creates a new file dir/prefix<random> with mode 0666 less the umask (the kernel
// applies it; os.CreateTemp asks for 0600, and reading the umask means setting it, for every
// goroutine at once).
func createTemp(dir, prefix string) (*os.File, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			return f, err
		}
	}
}
