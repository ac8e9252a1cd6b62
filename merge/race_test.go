//go:build race

package merge_test

// raceEnabled: the test binary runs with the race detector.
const raceEnabled = true
