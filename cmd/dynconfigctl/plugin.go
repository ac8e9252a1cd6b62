package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// pluginBinary is the name under which kubectl finds dynconfigctl as a
// plugin: `kubectl dynconfig ...` runs `kubectl-dynconfig ...` with the
// same arguments, flags included.
const pluginBinary = "kubectl-dynconfig"

// invokedAs is how the command line names itself in help, usage and
// errors: "kubectl dynconfig" when run as the kubectl plugin (argv[0]
// kubectl-dynconfig, as kubectl execs it), else "dynconfigctl". The
// commands and flags are the same either way.
func invokedAs(arg0 string) string {
	base := strings.TrimSuffix(filepath.Base(arg0), ".exe")
	if base == pluginBinary {
		return "kubectl dynconfig"
	}
	return "dynconfigctl"
}

// setDisplayName names root name in its help and usage lines.
func setDisplayName(root *cobra.Command, name string) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = name
}
