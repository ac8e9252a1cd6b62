package dynconfig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/status"
)

func testSource(uid string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "c", UID: types.UID(uid), ResourceVersion: "1", KubeletConfigKey: "kubelet",
	}}
}

// TestReportFor runs lkg.Decide on every seed scenario and checks the exact
// condition the node reports.
func TestReportFor(t *testing.T) {
	cur, lkgSrc := testSource("cur-UID"), testSource("lkg-UID")
	ok := func() error { return nil }
	fail := func(s lkg.Stage) lkg.Loader {
		return func() error { return &lkg.ConfigError{Stage: s, Err: errors.New("boom")} }
	}
	syncErr := errors.New("invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil")
	tests := []struct {
		name  string
		in    lkg.Input
		local status.Local
		want  status.Report
	}{
		{"config is OK", lkg.Input{Current: cur, LastKnownGood: lkgSrc, LoadCurrent: ok, LoadLastKnownGood: ok}, status.LocalInit,
			status.Report{Status: "True", Message: "using current (UID: cur-UID)", Reason: "all checks passed"}},
		{"no remote config, init", lkg.Input{}, status.LocalInit,
			status.Report{Status: "True", Message: "using current (init)", Reason: "current is set to the local default, and an init config was provided"}},
		{"no remote config, defaults", lkg.Input{}, status.LocalDefault,
			status.Report{Status: "True", Message: "using current (default)", Reason: "current is set to the local default, and no init config was provided"}},
		{"invalid assignment at startup", lkg.Input{SyncError: syncErr, Current: cur, LoadCurrent: ok}, status.LocalInit,
			status.Report{Status: "Unknown", Message: "using last-known-good (init)", Reason: "failed to sync, desired config unclear, cause: invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"}},
		{"validation fails", lkg.Input{Current: cur, LastKnownGood: lkgSrc, LoadCurrent: fail(lkg.StageValidate), LoadLastKnownGood: ok}, status.LocalInit,
			status.Report{Status: "False", Message: "using last known good: (UID: lkg-UID)", Reason: "failed to validate current (UID: cur-UID)"}},
		{"decode fails", lkg.Input{Current: cur, LoadCurrent: fail(lkg.StageDecode)}, status.LocalDefault,
			status.Report{Status: "False", Message: "using last-known-good (default)", Reason: "failed to decode current (UID: cur-UID)"}},
		{"checkpoint corrupt", lkg.Input{Current: cur, LoadCurrent: fail(lkg.StageLoad)}, status.LocalInit,
			status.Report{Status: "False", Message: "using last-known-good (init)", Reason: "failed to load current (UID: cur-UID), cause: failed to load: boom"}},
		{"crash loop", lkg.Input{Current: cur, LastKnownGood: lkgSrc, LoadCurrent: ok, LoadLastKnownGood: ok, CurrentCrashLooping: true}, status.LocalInit,
			status.Report{Status: "False", Message: "using last known good: (UID: lkg-UID)", Reason: "crash loop detected with current (UID: cur-UID)"}},
		{"marked bad earlier", lkg.Input{Current: cur, CurrentBad: &lkg.Entry{Reason: "failed to validate current (UID: cur-UID)"}, LoadCurrent: ok}, status.LocalInit,
			status.Report{Status: "False", Message: "using last-known-good (init)", Reason: "failed to validate current (UID: cur-UID)"}},
		{"dead end", lkg.Input{Current: cur, LastKnownGood: lkgSrc, CurrentBad: &lkg.Entry{Reason: "crash loop detected with current (UID: cur-UID)", CrashLoop: true}, LoadCurrent: ok, LoadLastKnownGood: ok, LastKnownGoodCrashLooping: true}, status.LocalInit,
			status.Report{Status: "False", Message: "using last known good: (UID: lkg-UID)", Reason: "dead end: still crash-looping after rolling back (crash loop detected with current (UID: cur-UID)); the crash is likely not caused by config: repair the node, then forget the bad mark"}},
		{"dead end after a certain mark", lkg.Input{Current: cur, LastKnownGood: lkgSrc, CurrentBad: &lkg.Entry{Reason: "failed to validate current (UID: cur-UID)"}, LoadCurrent: ok, LoadLastKnownGood: ok, LastKnownGoodCrashLooping: true}, status.LocalInit,
			status.Report{Status: "False", Message: "using last known good: (UID: lkg-UID)", Reason: "dead end: still crash-looping after rolling back (failed to validate current (UID: cur-UID)); the rollback target crashes too: repair the node or the component; current stays bad"}},
		{"failed to apply", lkg.Input{Current: cur, LastKnownGood: lkgSrc, CurrentBad: &lkg.Entry{Reason: "failed to apply current (UID: cur-UID)"}, LoadCurrent: ok, LoadLastKnownGood: ok}, status.LocalInit,
			status.Report{Status: "False", Message: "using last known good: (UID: lkg-UID)", Reason: "failed to apply current (UID: cur-UID)"}},
		{"bad marks unreadable", lkg.Input{Current: cur, LastKnownGood: lkgSrc, MarksError: errors.New("read bad-configs.json: input/output error"), LoadCurrent: ok, LoadLastKnownGood: ok}, status.LocalInit,
			status.Report{Status: "Unknown", Message: "using last known good: (UID: lkg-UID)", Reason: "failed to read the state dir, desired config unclear, cause: read bad-configs.json: input/output error"}},
		{"lkg unusable", lkg.Input{Current: cur, LastKnownGood: lkgSrc, LoadCurrent: fail(lkg.StageValidate), LoadLastKnownGood: fail(lkg.StageLoad)}, status.LocalInit,
			status.Report{Status: "False", Message: "using last-known-good (init)", Reason: "failed to validate current (UID: cur-UID); last-known-good (UID: lkg-UID) is unusable, using local config, cause: failed to load: boom"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := lkg.Decide(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := reportFor(d, tc.in.Current, tc.in.LastKnownGood, tc.local)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

// A live sync failure changes only the condition's status and reason; when
// the running decision could not use the remote last-known-good, the reason
// keeps saying so, in the startup's words.
func TestSyncFailedReport(t *testing.T) {
	lkgSrc := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{UID: "lkg-UID", ResourceVersion: "1", KubeletConfigKey: "kubelet"}}
	running := status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed, Message: "using current (UID: cur-UID)"}
	cause := errors.New("connection refused")
	if got, want := syncFailedReport(state{report: running}, cause), (status.Report{
		Status: corev1.ConditionUnknown, Reason: status.SyncFailedReason(cause), Message: running.Message,
	}); got != want {
		t.Errorf("plain: %+v, want %+v", got, want)
	}
	unusable := errors.New("failed to load: checksum mismatch")
	onLocal := status.Report{Status: corev1.ConditionUnknown, Message: "using last-known-good (init)"}
	got := syncFailedReport(state{report: onLocal, lastKnownGood: lkgSrc, decision: lkg.Decision{LastKnownGoodUnusable: unusable}}, cause)
	want := status.Report{Status: corev1.ConditionUnknown, Message: onLocal.Message,
		Reason: status.WithUnusableLastKnownGood(status.SyncFailedReason(cause), "lkg-UID", unusable)}
	if got != want {
		t.Errorf("with an unusable last-known-good: %+v, want %+v", got, want)
	}
}

// The bad marks checkpoint writes name their problem with lkg's names.
func TestCrashLoopProblemName(t *testing.T) {
	if got := lkg.ProblemCrashLoop.String(); got != checkpoint.CrashLoopProblem {
		t.Fatalf("lkg.ProblemCrashLoop is %q, checkpoint.CrashLoopProblem %q", got, checkpoint.CrashLoopProblem)
	}
}
