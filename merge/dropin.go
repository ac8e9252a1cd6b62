package merge

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
)

// DropInSuffix is the file name suffix of drop-in files.
const DropInSuffix = ".conf"

// ReadDropIns reads a drop-in directory with the kubelet's --config-dir
// rules: the directory is walked in lexical order (subdirectories included,
// symlinked directories not followed) and every file whose name ends in
// ".conf" is read with ReadFile (a FIFO, a device or a file larger than
// MaxDocumentSize is an error naming it, never a hang); other files are
// skipped and logged. Each document is named
// by its path. An empty directory gives no documents; a missing one is an
// error. Decoding happens in Merge, where an empty drop-in or one without
// apiVersion/kind is an error naming the file.
func (p *Pipeline[T]) ReadDropIns(dir string) ([]Document, error) {
	return readDropIns(dir, p.log)
}

func readDropIns(dir string, log logr.Logger) ([]Document, error) {
	// The directory itself (a symbolic link to one is followed, as the
	// kubelet does) must be one: a file, FIFO or device given as the
	// drop-in directory is an error, not an empty list.
	fi, err := os.Lstat(dir)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		fi, err = os.Stat(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("merge: reading drop-in directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("merge: reading drop-in directory %s: not a directory (%s)", dir, fi.Mode().Type())
	}
	var docs []Document
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != DropInSuffix {
			log.Info("Skipping file in the drop-in directory: only *.conf files are read", "path", path)
			return nil
		}
		data, err := ReadFile(path)
		if err != nil {
			return err
		}
		docs = append(docs, Document{Name: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("merge: reading drop-in directory %s: %w", dir, err)
	}
	return docs, nil
}
