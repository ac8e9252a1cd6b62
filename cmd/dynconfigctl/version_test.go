package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// dynconfigctl --version prints "dynconfigctl VERSION" and exits 0, as
// every dynconfig binary does.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--version"}, &out, &errOut, testDeps(t, nil))
	if code != exitOK || !strings.HasPrefix(out.String(), "dynconfigctl v") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
