// Command hello prints "hello" and CGO_ENABLED as it was built: the
// program binary_test.go builds with Binary.
package main

import (
	"fmt"
	"runtime/debug"
)

func main() {
	cgo := "?"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "CGO_ENABLED" {
				cgo = s.Value
			}
		}
	}
	fmt.Printf("hello CGO_ENABLED=%s\n", cgo)
}
