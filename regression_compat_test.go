package dynconfig

import (
	"testing"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// forgetBad forgets every bad mark of the ConfigMap uid, as dynconfigctl
// forget-bad does.
func forgetBad(t *testing.T, stateDir, version, uid string) {
	t.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: stateDir, ComponentVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if forgotten, err := s.ForgetBad(uid); err != nil || len(forgotten) == 0 {
		t.Fatalf("ForgetBad(%s) = %v, %v", uid, forgotten, err)
	}
}
