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
	return writeSyncClose(file, f)
}

// writeSyncClose writes file with f, fsyncs and closes it (closed on error too).
func writeSyncClose(file *os.File, f func(io.Writer) error) error {
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

// Replace writes path (mode 0644) with f through a temporary file in the same directory,
// renamed over path once complete and synced. On any error path is as it was (absent, or its
// old contents) and the temporary file is removed.
func Replace(path string, f func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	err = tmp.Chmod(0o644)
	if err == nil {
		err = writeSyncClose(tmp, f)
	} else {
		tmp.Close()
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	return SyncDir(dir)
}
