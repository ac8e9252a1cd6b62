// Package statusfile is the JSON form of a ConfigOK report that the example
// components write to their --status-file (and serve in /configz), and its
// reader, shared by the components and the tests that watch them.
package statusfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	corev1 "k8s.io/api/core/v1"
)

// Condition is a ConfigOK report as the status file holds it.
type Condition struct {
	Status  corev1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
	// PID is the process that made the report (status file only).
	PID int `json:"pid,omitempty"`
}

// Read reads the status file at path; ok is false while there is none.
func Read(path string) (c Condition, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Condition{}, false, nil
	}
	if err != nil {
		return Condition{}, false, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return Condition{}, false, fmt.Errorf("status file %s: %q: %w", path, data, err)
	}
	return c, true, nil
}
