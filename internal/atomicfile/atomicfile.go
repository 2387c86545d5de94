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
	err = f(file)
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

// Replace writes path (mode 0644) with f through path + ".tmp", renamed over path once
// complete and synced. On any error path is as it was (absent, or its old contents) and the
// temporary file is removed; one left behind by a crash is removed by the next Replace.
func Replace(path string, f func(io.Writer) error) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	err := WriteSynced(tmp, f)
	if err == nil {
		err = os.Chmod(tmp, 0o644) // whatever the umask
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}
