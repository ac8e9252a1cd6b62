package dynconfig

import (
	"syscall"
	"testing"
	"time"
)

// processCPUTime is the user and system CPU time of this process so far.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the process CPU time per operation to a benchmark's
// results (cpu-ns/op): on a shared machine wall time includes waiting for
// a CPU, CPU time does not. Use it as `defer reportCPU(b)()` before the
// loop.
func reportCPU(b *testing.B) func() {
	start := processCPUTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPUTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
