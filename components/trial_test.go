package components

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultTrial(t *testing.T) {
	got := DefaultTrial()
	want := Trial{Duration: 10 * time.Minute, CrashLoopThreshold: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DefaultTrial() mismatch (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("DefaultTrial().Validate() = %v, want nil", err)
	}
}

func TestTrialFromAnnotations(t *testing.T) {
	def := Trial{Duration: 7 * time.Minute, CrashLoopThreshold: 2}
	tests := []struct {
		name string
		ann  map[string]string
		def  Trial
		want Trial
		// wantErrs lists substrings every one of which must be in the error;
		// nil means no error.
		wantErrs []string
		// wantAnnotations lists the annotations the *AnnotationErrors name.
		wantAnnotations []string
	}{
		{name: "nil map falls back to default", ann: nil, def: def, want: def},
		{name: "unrelated annotations are ignored", ann: map[string]string{"other": "x"}, def: def, want: def},
		{
			name: "both set",
			ann:  map[string]string{TrialDurationAnnotation: "15m", CrashLoopThresholdAnnotation: "5"},
			def:  def,
			want: Trial{Duration: 15 * time.Minute, CrashLoopThreshold: 5},
		},
		{
			name: "only duration set keeps default threshold",
			ann:  map[string]string{TrialDurationAnnotation: "1h30m"},
			def:  def,
			want: Trial{Duration: 90 * time.Minute, CrashLoopThreshold: 2},
		},
		{
			name: "only threshold set keeps default duration",
			ann:  map[string]string{CrashLoopThresholdAnnotation: "0"},
			def:  def,
			want: Trial{Duration: 7 * time.Minute, CrashLoopThreshold: 0},
		},
		{
			name: "surrounding white space is ignored",
			ann:  map[string]string{TrialDurationAnnotation: " 30s\n", CrashLoopThresholdAnnotation: "\t10 "},
			def:  def,
			want: Trial{Duration: 30 * time.Second, CrashLoopThreshold: 10},
		},
		{
			name: "upper bounds are inclusive",
			ann:  map[string]string{TrialDurationAnnotation: "24h", CrashLoopThresholdAnnotation: "10"},
			def:  def,
			want: Trial{Duration: 24 * time.Hour, CrashLoopThreshold: 10},
		},
		{
			name:            "duration not parseable",
			ann:             map[string]string{TrialDurationAnnotation: "ten minutes"},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, `"ten minutes"`},
			wantAnnotations: []string{TrialDurationAnnotation},
		},
		{
			name:            "duration without unit",
			ann:             map[string]string{TrialDurationAnnotation: "600"},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, `"600"`, "missing unit"},
			wantAnnotations: []string{TrialDurationAnnotation},
		},
		{
			name:            "duration zero",
			ann:             map[string]string{TrialDurationAnnotation: "0s"},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, `"0s"`, "out of range"},
			wantAnnotations: []string{TrialDurationAnnotation},
		},
		{
			name:            "duration negative",
			ann:             map[string]string{TrialDurationAnnotation: "-5m"},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, `"-5m"`, "out of range"},
			wantAnnotations: []string{TrialDurationAnnotation},
		},
		{
			name:            "duration above maximum",
			ann:             map[string]string{TrialDurationAnnotation: "24h0m1s"},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, `"24h0m1s"`, "out of range"},
			wantAnnotations: []string{TrialDurationAnnotation},
		},
		{
			name:            "duration empty",
			ann:             map[string]string{TrialDurationAnnotation: ""},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, "empty value"},
			wantAnnotations: []string{TrialDurationAnnotation},
		},
		{
			name:            "threshold not a number",
			ann:             map[string]string{CrashLoopThresholdAnnotation: "three"},
			def:             def,
			wantErrs:        []string{CrashLoopThresholdAnnotation, `"three"`, "not a decimal integer"},
			wantAnnotations: []string{CrashLoopThresholdAnnotation},
		},
		{
			name:            "threshold fractional",
			ann:             map[string]string{CrashLoopThresholdAnnotation: "2.5"},
			def:             def,
			wantErrs:        []string{CrashLoopThresholdAnnotation, `"2.5"`},
			wantAnnotations: []string{CrashLoopThresholdAnnotation},
		},
		{
			name:            "threshold above maximum",
			ann:             map[string]string{CrashLoopThresholdAnnotation: "11"},
			def:             def,
			wantErrs:        []string{CrashLoopThresholdAnnotation, `"11"`, "out of range"},
			wantAnnotations: []string{CrashLoopThresholdAnnotation},
		},
		{
			name:            "threshold negative",
			ann:             map[string]string{CrashLoopThresholdAnnotation: "-1"},
			def:             def,
			wantErrs:        []string{CrashLoopThresholdAnnotation, `"-1"`, "out of range"},
			wantAnnotations: []string{CrashLoopThresholdAnnotation},
		},
		{
			name:            "threshold overflows int",
			ann:             map[string]string{CrashLoopThresholdAnnotation: "99999999999999999999999"},
			def:             def,
			wantErrs:        []string{CrashLoopThresholdAnnotation, "out of range"},
			wantAnnotations: []string{CrashLoopThresholdAnnotation},
		},
		{
			name:            "threshold empty",
			ann:             map[string]string{CrashLoopThresholdAnnotation: "  "},
			def:             def,
			wantErrs:        []string{CrashLoopThresholdAnnotation, "empty value"},
			wantAnnotations: []string{CrashLoopThresholdAnnotation},
		},
		{
			name:            "both bad are both reported",
			ann:             map[string]string{TrialDurationAnnotation: "soon", CrashLoopThresholdAnnotation: "many"},
			def:             def,
			wantErrs:        []string{TrialDurationAnnotation, `"soon"`, CrashLoopThresholdAnnotation, `"many"`},
			wantAnnotations: []string{TrialDurationAnnotation, CrashLoopThresholdAnnotation},
		},
		{
			name:     "invalid default duration is an error even with annotations",
			ann:      map[string]string{TrialDurationAnnotation: "5m", CrashLoopThresholdAnnotation: "1"},
			def:      Trial{Duration: 0, CrashLoopThreshold: 1},
			wantErrs: []string{"invalid default trial settings", "trial duration"},
		},
		{
			name:     "invalid default threshold",
			ann:      nil,
			def:      Trial{Duration: time.Minute, CrashLoopThreshold: 11},
			wantErrs: []string{"invalid default trial settings", "crash-loop threshold 11"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TrialFromAnnotations(tc.ann, tc.def)
			if tc.wantErrs == nil {
				if err != nil {
					t.Fatalf("TrialFromAnnotations() error = %v, want nil", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("TrialFromAnnotations() mismatch (-want +got):\n%s", diff)
				}
				if verr := got.Validate(); verr != nil {
					t.Errorf("result does not validate: %v", verr)
				}
				return
			}
			if err == nil {
				t.Fatalf("TrialFromAnnotations() = %+v, nil; want error", got)
			}
			if diff := cmp.Diff(Trial{}, got); diff != "" {
				t.Errorf("on error the Trial must be zero (-want +got):\n%s", diff)
			}
			for _, s := range tc.wantErrs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if tc.wantAnnotations != nil {
				if diff := cmp.Diff(tc.wantAnnotations, annotationsIn(err)); diff != "" {
					t.Errorf("annotations named by *AnnotationError (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// annotationsIn returns the Annotation of every *AnnotationError joined in err.
func annotationsIn(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		var ae *AnnotationError
		if errors.As(e, &ae) && e == error(ae) {
			out = append(out, ae.Annotation)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				walk(inner)
			}
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}

func TestAnnotationErrorUnwrap(t *testing.T) {
	_, err := TrialFromAnnotations(map[string]string{CrashLoopThresholdAnnotation: "42"}, DefaultTrial())
	if !errors.Is(err, ErrOutOfRange) {
		t.Errorf("errors.Is(%v, ErrOutOfRange) = false, want true", err)
	}
	var ae *AnnotationError
	if !errors.As(err, &ae) {
		t.Fatalf("errors.As(%v, *AnnotationError) = false", err)
	}
	if ae.Value != "42" || ae.Annotation != CrashLoopThresholdAnnotation {
		t.Errorf("AnnotationError = %+v, want value 42 on %s", ae, CrashLoopThresholdAnnotation)
	}
}

func TestTrialValidate(t *testing.T) {
	tests := []struct {
		name    string
		trial   Trial
		wantErr string
	}{
		{name: "minimum", trial: Trial{Duration: time.Nanosecond, CrashLoopThreshold: 0}},
		{name: "maximum", trial: Trial{Duration: MaxTrialDuration, CrashLoopThreshold: MaxCrashLoopThreshold}},
		{name: "zero duration", trial: Trial{Duration: 0, CrashLoopThreshold: 3}, wantErr: "trial duration 0s"},
		{name: "long duration", trial: Trial{Duration: 25 * time.Hour, CrashLoopThreshold: 3}, wantErr: "trial duration 25h0m0s"},
		{name: "negative threshold", trial: Trial{Duration: time.Minute, CrashLoopThreshold: -1}, wantErr: "crash-loop threshold -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.trial.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.wantErr)
			}
			if !errors.Is(err, ErrOutOfRange) {
				t.Errorf("Validate() error %v does not wrap ErrOutOfRange", err)
			}
		})
	}
}

// FuzzTrialFromAnnotations checks that untrusted annotation values never
// yield a Trial outside the documented ranges, and that accepted values are
// the ones time.ParseDuration and strconv.Atoi would give.
func FuzzTrialFromAnnotations(f *testing.F) {
	f.Add("10m", "3")
	f.Add("", "")
	f.Add("24h", "10")
	f.Add("-1s", "-1")
	f.Add("1e3h", "0x3")
	f.Add(" 90s ", "+2")
	f.Add("9223372036854775807ns", "9223372036854775808")
	f.Fuzz(func(t *testing.T, duration, threshold string) {
		ann := map[string]string{TrialDurationAnnotation: duration, CrashLoopThresholdAnnotation: threshold}
		got, err := TrialFromAnnotations(ann, DefaultTrial())
		if err != nil {
			if got != (Trial{}) {
				t.Fatalf("error %v with non-zero Trial %+v", err, got)
			}
			return
		}
		if verr := got.Validate(); verr != nil {
			t.Fatalf("accepted %q/%q as %+v which does not validate: %v", duration, threshold, got, verr)
		}
		d, perr := time.ParseDuration(strings.TrimSpace(duration))
		if perr != nil || d != got.Duration {
			t.Fatalf("duration %q accepted as %v, time.ParseDuration gives %v, %v", duration, got.Duration, d, perr)
		}
	})
}
