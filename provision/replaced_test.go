package provision

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/merge"
)

// TestValidateUserValueReplacedByPlatform is the regression test for a
// user's invalid value in a field whose value the platform replaces
// (PlatformWins, the alternate solution's managed fields): it used to pass
// with a warning, the rendered configuration carrying the platform's value.
// A user's invalid value is an error under every policy, named by document
// and field path, and the message says it is the user's value.
func TestValidateUserValueReplacedByPlatform(t *testing.T) {
	const name = "spec.workerNodeGroupConfigurations[0].kubeletConfiguration"
	const note = `; the user's value must be valid even though the platform's replaces it (owner: "eks-a")`
	tests := []struct {
		name     string
		provider Provider
		doc      string
		want     string
	}{{
		name:     "eviction threshold out of range",
		provider: ProviderDocker,
		doc:      header + "evictionHard:\n  memory.available: 150%\n",
		want:     name + `: evictionHard[memory.available]: Invalid value: "150%": a percentage threshold must be at most 100%` + note,
	}, {
		name:     "misspelt eviction signal",
		provider: ProviderNutanix,
		doc:      header + "evictionHard:\n  memory.availble: 100Mi\n",
		want:     name + `: evictionHard[memory.availble]: Unsupported value: "memory.availble": supported values: "memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available"` + note,
	}, {
		name:     "readOnlyPort out of range",
		provider: ProviderVSphere,
		doc:      header + "readOnlyPort: 70000\n",
		want:     name + `: readOnlyPort: Invalid value: 70000: must be 0 (disabled) or between 1 and 65535, inclusive` + note,
	}, {
		name:     "unknown cipher suite",
		provider: ProviderSnow,
		doc:      header + "tlsCipherSuites: [TLS_NOT_A_SUITE]\n",
		want:     name + `: tlsCipherSuites[0]: Invalid value: "TLS_NOT_A_SUITE": not a cipher suite name known to crypto/tls` + note,
	}, {
		name:     "the user's other invalid values are reported with it, all at once",
		provider: ProviderDocker,
		doc:      header + "maxPods: -3\nevictionHard:\n  memory.available: 150%\n",
		want: name + `: maxPods: Invalid value: -3: must not be negative` + "\n" +
			name + `: evictionHard[memory.available]: Invalid value: "150%": a percentage threshold must be at most 100%` + note,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := eksaValidator(t, EKSAAlternatePolicy, tt.provider, EKSAOptions{})
			res, err := v.Validate([]byte(tt.doc), name)
			if err == nil {
				t.Fatalf("Validate succeeded with %s, warnings %q; want an error", res.Document, res.Warnings)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
			var me *merge.Error
			if !errors.As(err, &me) || me.Validation == nil {
				t.Errorf("error %T is not a *merge.Error with validation errors", err)
			}
		})
	}
}

// TestValidateReplacedValidValueWarns checks that the fix keeps legitimate
// precedence as it was: a valid user value the platform replaces is a
// warning and the result carries the platform's value.
func TestValidateReplacedValidValueWarns(t *testing.T) {
	v := eksaValidator(t, EKSAAlternatePolicy, ProviderVSphere, EKSAOptions{})
	res, err := v.Validate([]byte(header+"readOnlyPort: 10255\nmaxPods: 30\n"), "kubelet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`kubelet.yaml: readOnlyPort: value replaced by the platform's (owner: "eks-a")`}, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(res.Document), `"readOnlyPort":0`) || res.Config.MaxPods != 30 {
		t.Errorf("document %s: want the platform's readOnlyPort and the user's maxPods", res.Document)
	}
}

// TestValidatorConcurrentAlternate shares a validator with PlatformWins
// fields (and so a second pipeline for the user's values) between
// goroutines; run with -race.
func TestValidatorConcurrentAlternate(t *testing.T) {
	v := eksaValidator(t, EKSAAlternatePolicy, ProviderDocker, EKSAOptions{})
	docs := []string{
		header + "evictionHard:\n  memory.available: 150%\n",
		header + "evictionHard:\n  memory.available: 1Gi\n",
		header + "maxPods: 10\n",
	}
	want := make([]string, len(docs))
	result := func(d string) string {
		res, err := v.Validate([]byte(d), "kubelet.yaml")
		if err != nil {
			return err.Error()
		}
		return string(res.Document) + strings.Join(res.Warnings, ";")
	}
	for i, d := range docs {
		want[i] = result(d)
	}
	got := make([]string, len(docs)*6)
	done := make(chan struct{})
	for i := range got {
		go func() {
			defer func() { done <- struct{}{} }()
			got[i] = result(docs[i%len(docs)])
		}()
	}
	for range got {
		<-done
	}
	for i := range got {
		if got[i] != want[i%len(docs)] {
			t.Errorf("goroutine %d: got %s, want %s", i, got[i], want[i%len(docs)])
		}
	}
}
