package crashloop

import "fmt"

// CorruptError reports a startups file that exists but cannot be used: its
// content does not decode, it is too large, or it is not a regular file.
// Callers treat such a file as holding no startups; see the package
// documentation. Test for it with errors.As.
type CorruptError struct {
	// Path is the startups file.
	Path string
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt startups file %s: %v", e.Path, e.Err)
}

// Unwrap returns e.Err.
func (e *CorruptError) Unwrap() error { return e.Err }
