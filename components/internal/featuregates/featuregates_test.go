package featuregates

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// small is a table with a gate of each kind, and dependencies that reach
// across stages; like the real table, its defaults satisfy every dependency.
func small() *table {
	return newTable(map[string]Spec{
		AllAlpha:     {Stage: Alpha},
		AllBeta:      {Stage: Beta},
		"AlphaOff":   {Stage: Alpha},
		"BetaOn":     {Default: true, Stage: Beta},
		"BetaOff":    {Stage: Beta},
		"GAOn":       {Default: true, Stage: GA},
		"OldOn":      {Default: true, Stage: Deprecated},
		"LockedOn":   {Default: true, Locked: true, Stage: GA},
		"LockedOff":  {Locked: true, Stage: Deprecated},
		"FutureGate": {Stage: PreAlpha},
		"NeedsBeta":  {Stage: Alpha},
		"NeedsTwo":   {Default: true, Stage: GA},
	}, map[string][]string{
		"NeedsBeta": {"BetaOn"},
		"NeedsTwo":  {"BetaOn", "GAOn"},
	})
}

func TestEnabled(t *testing.T) {
	tab := small()
	for _, tc := range []struct {
		gates Gates
		name  string
		want  bool
	}{
		{nil, "AlphaOff", false},
		{nil, "BetaOn", true},
		{Gates{"AlphaOff": true}, "AlphaOff", true},
		{Gates{AllAlpha: true}, "AlphaOff", true},
		{Gates{AllAlpha: true, "AlphaOff": false}, "AlphaOff", false}, // the gate's own setting wins
		{Gates{AllBeta: true}, "AlphaOff", false},                     // AllBeta does not reach alpha gates
		{Gates{AllBeta: true}, "BetaOff", true},
		{Gates{AllBeta: false}, "BetaOn", false},
		{Gates{AllAlpha: false}, "BetaOn", true}, // nor AllAlpha beta gates
		{Gates{AllBeta: false, "BetaOn": true}, "BetaOn", true},
		{Gates{AllAlpha: false, AllBeta: false}, "GAOn", true},  // nor GA gates
		{Gates{AllAlpha: false, AllBeta: false}, "OldOn", true}, // nor deprecated ones
		{Gates{"OldOn": false}, "OldOn", false},                 // a deprecated gate can be set
		{Gates{"LockedOn": false}, "LockedOn", true},            // a locked gate stays at its default
		{Gates{"LockedOff": true}, "LockedOff", false},
		{Gates{"FutureGate": true, AllAlpha: true}, "FutureGate", false}, // not available: always off
		{Gates{"NoSuchGate": true}, "NoSuchGate", true},                  // an unknown name: its own setting
		{Gates{AllAlpha: true, AllBeta: true}, "NoSuchGate", false},
	} {
		if got := tab.enabled(tc.gates, tc.name); got != tc.want {
			t.Errorf("enabled(%v, %s) = %t, want %t", tc.gates, tc.name, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	w := Wording{Component: "the component of X", Release: "release X"}
	root := field.NewPath("featureGates")
	at := root.Key
	for _, tc := range []struct {
		name  string
		tab   *table
		gates Gates
		want  field.ErrorList
	}{
		{"no map", small(), nil, nil},
		{"defaults set explicitly", small(), Gates{"BetaOn": true, "GAOn": true, "LockedOn": true, "LockedOff": false, "NeedsTwo": true}, nil},
		{"names, in name order", small(), Gates{"lockedon": true, "Unknown": false, "LockedOn": false, "FutureGate": false, "LockedOff": false}, field.ErrorList{
			// Not available: an error even at its default.
			field.Forbidden(at("FutureGate"), "feature gate FutureGate is not available in release X"),
			field.Forbidden(at("LockedOn"), "feature gate LockedOn is locked to true"),
			field.Invalid(at("Unknown"), "Unknown", "not a feature gate of the component of X"),
			field.Invalid(at("lockedon"), "lockedon",
				"not a feature gate of the component of X (gate names are case-sensitive: did you mean LockedOn?)"),
		}},
		{"dependencies wait for the names", small(), Gates{"Unknown": true, "BetaOn": false}, field.ErrorList{
			field.Invalid(at("Unknown"), "Unknown", "not a feature gate of the component of X"),
		}},
		{"conflicts in name order, at the gate, else at the dependency", small(), Gates{"NeedsBeta": true, "BetaOn": false}, field.ErrorList{
			field.Invalid(at("NeedsBeta"), true, "feature gate NeedsBeta is enabled but depends on BetaOn, which the configuration disables"),
			field.Invalid(at("BetaOn"), false, "feature gate NeedsTwo is enabled but depends on BetaOn, which the configuration disables"),
		}},
		{"every dependency off named, at the first one set", small(), Gates{"BetaOn": false, "GAOn": false}, field.ErrorList{
			field.Invalid(at("BetaOn"), false, "feature gate NeedsTwo is enabled but depends on BetaOn, GAOn, which the configuration disables"),
		}},
		{"at the second dependency when only it is set", small(), Gates{AllBeta: false, "GAOn": false}, field.ErrorList{
			field.Invalid(at("GAOn"), false, "feature gate NeedsTwo is enabled but depends on BetaOn, GAOn, which the configuration disables"),
		}},
		{"at AllBeta", small(), Gates{AllBeta: false}, field.ErrorList{
			field.Invalid(at("AllBeta"), false, "feature gate NeedsTwo is enabled but depends on BetaOn, which the configuration disables"),
		}},
		// AllAlpha comes before AllBeta, also for NeedsTwo, which only
		// AllBeta breaks.
		{"at AllAlpha before AllBeta", small(), Gates{AllAlpha: true, AllBeta: false}, field.ErrorList{
			field.Invalid(at("AllAlpha"), false, "feature gate NeedsBeta is enabled but depends on BetaOn, which the configuration disables"),
			field.Invalid(at("AllAlpha"), false, "feature gate NeedsTwo is enabled but depends on BetaOn, which the configuration disables"),
		}},
		{"a dependency turned off with its dependents", small(), Gates{AllBeta: false, "NeedsTwo": false}, nil},
		{"at featureGates when the map sets none of them", newTable(
			map[string]Spec{"A": {Default: true}, "B": {}, "C": {}}, map[string][]string{"A": {"B"}}),
			Gates{"C": true}, field.ErrorList{
				field.Invalid(root, false, "feature gate A is enabled but depends on B, which the configuration disables"),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.gates)
			prior := field.Required(field.NewPath("earlier"), "kept")
			errs := tc.tab.validate(tc.gates, field.ErrorList{prior}, w)
			if len(errs) == 0 || errs[0] != prior {
				t.Fatalf("validate dropped the errors it was given: %v", errs)
			}
			if diff := cmp.Diff(tc.want, errs[1:], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("validate(%v) (-want +got):\n%s", tc.gates, diff)
			}
			if !maps.Equal(before, tc.gates) {
				t.Errorf("validate modified its map: %v, was %v", tc.gates, before)
			}
		})
	}
}

// TestTable checks the generated table for what the rules above rely on.
func TestTable(t *testing.T) {
	if n := len(v137.specs); n < 100 {
		t.Fatalf("only %d gates in the table", n)
	}
	for name, want := range map[string]Stage{AllAlpha: Alpha, AllBeta: Beta, LoggingAlphaOptions: Alpha, LoggingBetaOptions: Beta} {
		if spec, ok := Lookup(name); !ok || spec.Stage != want {
			t.Errorf("Lookup(%s) = %+v, %t; want stage %d", name, spec, ok, want)
		}
	}
	// The suggestion for a name in the wrong case must be the only one.
	folded := map[string]string{}
	for name := range v137.specs {
		if other, dup := folded[strings.ToLower(name)]; dup {
			t.Errorf("gates %s and %s differ only in case", name, other)
		}
		folded[strings.ToLower(name)] = name
	}
	for name, deps := range v137.deps {
		for _, gate := range append([]string{name}, deps...) {
			if _, ok := Lookup(gate); !ok {
				t.Errorf("dependency %s -> %v names %s, which is not in the table", name, deps, gate)
			}
		}
	}
	if !slices.IsSorted(v137.dependents()) || len(v137.dependents()) != len(v137.deps) {
		t.Errorf("dependents() = %v: not the sorted keys of the dependencies", v137.dependents())
	}
	// Upstream's defaults satisfy every dependency: a map that sets nothing
	// away from its default is valid.
	if errs := (Gates{AllAlpha: false}).Validate(nil, Wording{}); len(errs) != 0 {
		t.Errorf("the defaults do not satisfy the dependencies: %v", errs)
	}
	got := Dependents("GracefulNodeShutdown")
	want := []string{"GracefulNodeShutdownBasedOnPodPriority", "WindowsGracefulNodeShutdown"}
	if !slices.Equal(got, want) {
		t.Errorf("Dependents(GracefulNodeShutdown) = %v, want %v", got, want)
	}
}
