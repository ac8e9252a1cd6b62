// Package components holds what every component profile shares: the trial
// settings a remote config carries on its ConfigMap.
//
// A config being tried is watched for crash loops for a trial period; if the
// component restarts more than a threshold number of times in that period, the
// config is marked bad and the last-known-good config is used again. The
// upstream config types no longer carry these two numbers, so dynconfig reads
// them from annotations on the ConfigMap that holds the config:
//
//	metadata:
//	  annotations:
//	    dynconfig.io/trial-duration: "15m"     # time.ParseDuration syntax, (0, 24h]
//	    dynconfig.io/crash-loop-threshold: "5"  # decimal integer, 0..10
//
// A missing annotation falls back to the caller's default (normally
// [DefaultTrial]: 10m and 3).
//
// Guarantees: [TrialFromAnnotations] is a pure function; it never returns a
// Trial outside the documented ranges together with a nil error, and every
// error names the annotation and the rejected value. Both annotations are
// checked on every call, so one call reports both when both are bad.
//
// Not provided: the per-component profiles themselves (see the kubelet and
// kubeproxy sub-packages), and any reading of the ConfigMap; callers pass the
// annotation map.
package components
