package components

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TrialDurationAnnotation is the ConfigMap annotation that sets how long a new
// config is on trial before it can become the last-known-good config. Its value
// uses time.ParseDuration syntax ("90s", "15m", "1h30m").
const TrialDurationAnnotation = "dynconfig.io/trial-duration"

// CrashLoopThresholdAnnotation is the ConfigMap annotation that sets how many
// startups during the trial period are tolerated before the config is judged
// to crash-loop. Its value is a decimal integer from 0 to
// MaxCrashLoopThreshold.
const CrashLoopThresholdAnnotation = "dynconfig.io/crash-loop-threshold"

const (
	// DefaultTrialDuration is the trial period used when neither the
	// ConfigMap nor the caller says otherwise.
	DefaultTrialDuration = 10 * time.Minute
	// DefaultCrashLoopThreshold is the crash-loop threshold used when neither
	// the ConfigMap nor the caller says otherwise.
	DefaultCrashLoopThreshold = 3

	// MaxTrialDuration bounds the trial period. A trial longer than a day
	// would keep a config out of last-known-good for so long that a later
	// rollback could land on a config that is much older than the operator
	// expects; a typo such as "100h" for "100m" is far more likely than a real
	// need.
	MaxTrialDuration = 24 * time.Hour
	// MaxCrashLoopThreshold bounds the crash-loop threshold. The startups
	// record keeps threshold+1 entries, so the bound also bounds that file.
	MaxCrashLoopThreshold = 10
)

// Trial holds the trial settings of one config.
type Trial struct {
	// Duration is how long the config is on trial. Valid values are greater
	// than zero and at most MaxTrialDuration.
	Duration time.Duration
	// CrashLoopThreshold is how many startups during the trial are tolerated
	// before the config is marked bad as a crash loop. Valid values are 0 to
	// MaxCrashLoopThreshold.
	CrashLoopThreshold int
}

// DefaultTrial returns the built-in trial settings: DefaultTrialDuration and
// DefaultCrashLoopThreshold.
func DefaultTrial() Trial {
	return Trial{Duration: DefaultTrialDuration, CrashLoopThreshold: DefaultCrashLoopThreshold}
}

// Validate reports whether t is within the documented ranges. The error names
// the field at fault.
func (t Trial) Validate() error {
	var errs []error
	if err := checkDuration(t.Duration); err != nil {
		errs = append(errs, fmt.Errorf("trial duration %v: %w", t.Duration, err))
	}
	if err := checkThreshold(t.CrashLoopThreshold); err != nil {
		errs = append(errs, fmt.Errorf("crash-loop threshold %d: %w", t.CrashLoopThreshold, err))
	}
	return errors.Join(errs...)
}

// AnnotationError reports an annotation whose value cannot be used.
type AnnotationError struct {
	// Annotation is the annotation key, for example TrialDurationAnnotation.
	Annotation string
	// Value is the rejected value, exactly as found on the object.
	Value string
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: invalid value %q: %v", e.Annotation, e.Value, e.Err)
}

// Unwrap returns the underlying cause.
func (e *AnnotationError) Unwrap() error { return e.Err }

// ErrOutOfRange is wrapped by errors for values that parse but fall outside
// the allowed range.
var ErrOutOfRange = errors.New("out of range")

// TrialFromAnnotations returns the trial settings named by ann, taking each
// setting that has no annotation from def. Leading and trailing white space in
// a value is ignored; an empty value is an error, not a fallback, because it
// is most likely a mistake by whoever set it.
//
// def must itself be valid (see Trial.Validate); if it is not, an error is
// returned even when both annotations are present, because a broken default is
// a programming error that should not stay hidden.
//
// On error the returned Trial is the zero value. Every problem is reported
// (joined with errors.Join); each annotation problem is an *AnnotationError.
func TrialFromAnnotations(ann map[string]string, def Trial) (Trial, error) {
	if err := def.Validate(); err != nil {
		return Trial{}, fmt.Errorf("invalid default trial settings: %w", err)
	}
	out := def
	var errs []error
	if raw, ok := ann[TrialDurationAnnotation]; ok {
		d, err := parseTrialDuration(raw)
		if err != nil {
			errs = append(errs, &AnnotationError{Annotation: TrialDurationAnnotation, Value: raw, Err: err})
		} else {
			out.Duration = d
		}
	}
	if raw, ok := ann[CrashLoopThresholdAnnotation]; ok {
		n, err := parseThreshold(raw)
		if err != nil {
			errs = append(errs, &AnnotationError{Annotation: CrashLoopThresholdAnnotation, Value: raw, Err: err})
		} else {
			out.CrashLoopThreshold = n
		}
	}
	if len(errs) > 0 {
		return Trial{}, errors.Join(errs...)
	}
	return out, nil
}

func parseTrialDuration(raw string) (time.Duration, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return 0, errors.New("empty value, want a duration such as \"10m\"")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if err := checkDuration(d); err != nil {
		return 0, err
	}
	return d, nil
}

func parseThreshold(raw string) (int, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return 0, fmt.Errorf("empty value, want an integer from 0 to %d", MaxCrashLoopThreshold)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		var numErr *strconv.NumError
		if errors.As(err, &numErr) && errors.Is(numErr.Err, strconv.ErrRange) {
			return 0, fmt.Errorf("%w: must be from 0 to %d", ErrOutOfRange, MaxCrashLoopThreshold)
		}
		return 0, fmt.Errorf("not a decimal integer: %w", err)
	}
	if err := checkThreshold(n); err != nil {
		return 0, err
	}
	return n, nil
}

func checkDuration(d time.Duration) error {
	if d <= 0 || d > MaxTrialDuration {
		return fmt.Errorf("%w: must be greater than 0 and at most %v", ErrOutOfRange, MaxTrialDuration)
	}
	return nil
}

func checkThreshold(n int) error {
	if n < 0 || n > MaxCrashLoopThreshold {
		return fmt.Errorf("%w: must be from 0 to %d", ErrOutOfRange, MaxCrashLoopThreshold)
	}
	return nil
}
