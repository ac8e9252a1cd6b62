package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Errors of ReadRegular that say the path holds something other than a
// regular file of the allowed size. Callers report them as corruption.
var (
	// ErrSymlink: the path is a symbolic link (it is never followed).
	ErrSymlink = errors.New("is a symbolic link")
	// ErrNotRegular: the path is a directory, FIFO, device or socket.
	ErrNotRegular = errors.New("is not a regular file")
	// ErrTooLarge: the file is larger than the limit.
	ErrTooLarge = errors.New("is larger than allowed")
)

// ReadRegular reads the regular file at path, of at most max bytes, with
// raw system calls (open, fstat, read, close): no symbolic link is
// followed, a FIFO cannot block the open, and nothing is registered with
// the runtime's poller, which keeps small reads on a startup path cheap. A
// missing file is an error matching fs.ErrNotExist.
func ReadRegular(path string, max int64) ([]byte, error) {
	fd, err := openNoFollow(path)
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
			return nil, fmt.Errorf("%s %w", path, ErrSymlink)
		case errors.Is(err, unix.ENOENT):
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s %w (mode %o)", path, ErrNotRegular, st.Mode)
	}
	if st.Size > max {
		return nil, fmt.Errorf("%s %w: %d bytes, limit %d", path, ErrTooLarge, st.Size, max)
	}
	// One byte more than the size, to see growth in the same read.
	buf := make([]byte, 0, st.Size+1)
	for {
		if int64(len(buf)) > max {
			return nil, fmt.Errorf("%s %w: grew beyond %d bytes while being read", path, ErrTooLarge, max)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) < cap(buf) && int64(len(buf)) == st.Size {
			// A short read that ends at the size fstat gave: end of file
			// (a regular file is read in full unless it ends), without
			// a second read to see it.
			return buf, nil
		}
	}
}

func openNoFollow(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}
