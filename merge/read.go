package merge

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxDocumentSize is the largest config document ReadFile reads: four
// times the 1 MiB the API server stores in a ConfigMap (a remote config is
// never larger than that), far above any real component config. A larger
// file is refused, so that a mistaken or hostile path cannot grow the
// component by its size.
const MaxDocumentSize = 4 << 20

// ErrNotRegular is matched (errors.Is) by ReadFile's error for a path that is
// not a regular file: a directory, a FIFO, a device (such as /dev/zero), a
// socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is matched by ReadFile's error for a file larger than
// MaxDocumentSize.
var ErrTooLarge = errors.New("larger than a config document may be")

// ReadFile reads one config document, the one reader of every local config
// path (a component's --config and instance file, each drop-in of
// ReadDropIns, dynconfigctl's files). Symbolic links are followed (config
// files are often links into a ConfigMap volume); what they lead to must
// be a regular file of at most MaxDocumentSize bytes. A FIFO is never
// waited on (it is opened non-blocking and refused before any read), a
// device such as /dev/zero is refused before any read, and a file that
// grows past the limit while it is read is refused too.
//
// Errors are *fs.PathError naming the file: "read PATH: is a directory",
// "read PATH: not a regular file (p---------)", "read PATH: larger than a
// config document may be: 5000000 bytes, limit 4194304", or the open's
// error (a missing file matches fs.ErrNotExist).
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fail := func(err error) error { return &fs.PathError{Op: "read", Path: path, Err: err} }
	switch {
	case fi.IsDir():
		return nil, fail(isDirError{})
	case !fi.Mode().IsRegular():
		return nil, fail(fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type()))
	case fi.Size() > MaxDocumentSize:
		return nil, fail(fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, fi.Size(), MaxDocumentSize))
	}
	// Sized by the stat, one byte over to see the end at once; a file that
	// grows meanwhile is read on, up to one byte past the limit.
	data := make([]byte, 0, fi.Size()+1)
	for len(data) <= MaxDocumentSize {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(cap(data), MaxDocumentSize+1)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fail(err)
		}
	}
	if len(data) > MaxDocumentSize {
		return nil, fail(fmt.Errorf("%w: grew beyond the limit of %d bytes while it was read", ErrTooLarge, MaxDocumentSize))
	}
	return data, nil
}

// isDirError says "is a directory", as the kernel's EISDIR does, and
// matches ErrNotRegular.
type isDirError struct{}

func (isDirError) Error() string        { return "is a directory" }
func (isDirError) Is(target error) bool { return target == ErrNotRegular || target == syscall.EISDIR }
