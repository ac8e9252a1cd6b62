package status

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// TestWording pins every message and reason to the proposal's text.
func TestWording(t *testing.T) {
	cause := errors.New("invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil")
	for _, tc := range []struct{ got, want string }{
		{CurrentMessage(Ref{UID: "cur-uid"}, LocalInit), "using current (UID: cur-uid)"},
		{CurrentMessage(Ref{}, LocalInit), "using current (init)"},
		{CurrentMessage(Ref{}, LocalDefault), "using current (default)"},
		{LastKnownGoodMessage(Ref{UID: "lkg-uid"}, LocalInit), "using last known good: (UID: lkg-uid)"},
		{LastKnownGoodMessage(Ref{}, LocalInit), "using last-known-good (init)"},
		{LastKnownGoodMessage(Ref{}, LocalDefault), "using last-known-good (default)"},
		{SyncFailedReason(cause), "failed to sync, desired config unclear, cause: invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{ValidateFailedReason("cur-uid"), "failed to validate current (UID: cur-uid)"},
		{DecodeFailedReason("cur-uid"), "failed to decode current (UID: cur-uid)"},
		{LoadFailedReason("cur-uid", errors.New("checksum mismatch")), "failed to load current (UID: cur-uid), cause: checksum mismatch"},
		{CrashLoopReason("cur-uid"), "crash loop detected with current (UID: cur-uid)"},
		{ReasonAllChecksPassed, "all checks passed"},
		{ReasonLocalInit, "current is set to the local default, and an init config was provided"},
		{ReasonLocalDefault, "current is set to the local default, and no init config was provided"},
		{DeadEndReason("crash loop detected with current (UID: c)", true), "dead end: still crash-looping after rolling back (crash loop detected with current (UID: c)); the crash is likely not caused by config: repair the node, then forget the bad mark"},
		{DeadEndReason("failed to validate current (UID: c)", false), "dead end: still crash-looping after rolling back (failed to validate current (UID: c)); the rollback target crashes too: repair the node or the component; current stays bad"},
		{ApplyFailedReason("c"), "failed to apply current (UID: c)"},
		{StateUnreadableReason(errors.New("EIO")), "failed to read the state dir, desired config unclear, cause: EIO"},
		{WithUnusableLastKnownGood("failed to validate current (UID: c)", "l", errors.New("not found")), "failed to validate current (UID: c); last-known-good (UID: l) is unusable, using local config, cause: not found"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

func TestConfigOKHeartbeatAndTransition(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(time.Minute))
	ok := Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (UID: a)"}
	first := ConfigOK(nil, ok, t1)
	want := corev1.NodeCondition{Type: "ConfigOK", Status: "True", Reason: ok.Reason, Message: ok.Message, LastHeartbeatTime: t1, LastTransitionTime: t1}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("first report (-want +got):\n%s", diff)
	}

	tests := []struct {
		name           string
		r              Report
		wantTransition metav1.Time
	}{
		{"same report keeps transition", ok, t1},
		{"status change", Report{Status: corev1.ConditionFalse, Reason: ok.Reason, Message: ok.Message}, t2},
		{"reason change", Report{Status: ok.Status, Reason: "other", Message: ok.Message}, t2},
		{"message change", Report{Status: ok.Status, Reason: ok.Reason, Message: "using current (UID: b)"}, t2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ConfigOK(&first, tc.r, t2)
			if !got.LastHeartbeatTime.Equal(&t2) {
				t.Errorf("heartbeat %v, want %v (moves on every report)", got.LastHeartbeatTime, t2)
			}
			if !got.LastTransitionTime.Equal(&tc.wantTransition) {
				t.Errorf("transition %v, want %v", got.LastTransitionTime, tc.wantTransition)
			}
		})
	}

	// A previous condition of another type, or without a transition time,
	// does not donate its transition time.
	other := first
	other.Type = "Ready"
	if got := ConfigOK(&other, ok, t2); !got.LastTransitionTime.Equal(&t2) {
		t.Errorf("transition taken from a %s condition", other.Type)
	}
	noTime := first
	noTime.LastTransitionTime = metav1.Time{}
	if got := ConfigOK(&noTime, ok, t2); !got.LastTransitionTime.Equal(&t2) {
		t.Error("zero previous transition time kept")
	}
}

func TestFind(t *testing.T) {
	conds := []corev1.NodeCondition{{Type: corev1.NodeReady}, {Type: nodeapi.ConditionType, Reason: "x"}}
	if c := Find(conds); c == nil || c.Reason != "x" {
		t.Fatalf("Find = %v", c)
	}
	if c := Find(conds[:1]); c != nil {
		t.Fatalf("Find without ConfigOK = %v", c)
	}
}
