package kubeletdropin

import "github.com/dynconfig/dynconfig"

// Preflight implements dynconfig.PreflightLayers, for the run role's
// answer to a rollout's pre-flight request: the merge, the strict decode
// of candidate and the validation of Build, with candidate in dynconfig's
// place among the node's drop-ins, and the fields a node drop-in that
// sorts after dynconfig's file sets again, each "path (by FILE)". Unlike
// Build, it neither logs that warning nor records the ConfigOverridden
// Event: the candidate is not applied, only checked.
func (l *layers) Preflight(candidate *dynconfig.Document) ([]string, error) {
	_, over, err := l.build(candidate)
	return over, err
}

var _ dynconfig.PreflightLayers = (*layers)(nil)
