package atomicfile

import (
	"io"
	"os"
	"path/filepath"
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

// Replace writes path (mode 0644) with f through a temporary file of its own in the same
// directory (path's name + ".tmp-" + a random suffix), renamed over path once complete and
// synced. On any error path is as it was (absent, or its old contents) and the temporary file is
// removed. Calls at once on one path never see each other's temporary files: each leaves path
// holding its own contents in full when it returns nil (the last rename wins). A temporary file
// left behind by a crash keeps its name; nothing reads it.
func Replace(path string, f func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	file, err := os.CreateTemp(dir, base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := file.Name()
	err = file.Chmod(0o644) // whatever the umask: CreateTemp makes 0600
	if err != nil {
		file.Close()
	} else {
		err = writeAndClose(file, f)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}
