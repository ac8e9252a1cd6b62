//go:build !unix

package merge

import "time"

// processCPUTime is not measured on this platform.
func processCPUTime() time.Duration { return 0 }
