package lkg

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func src(uid, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "cfg-" + uid, UID: types.UID(uid), ResourceVersion: rv, KubeletConfigKey: "kubelet",
	}}
}

// loader returns a Loader that records its calls and returns err.
func loader(calls *int, err error) Loader {
	return func() error { *calls++; return err }
}

func TestDecide(t *testing.T) {
	cur, lkg := src("cur", "1"), src("lkg", "7")
	errSync := errors.New("invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil")
	errLoad := &ConfigError{Stage: StageLoad, Err: errors.New("checksum mismatch")}
	errDecode := &ConfigError{Stage: StageDecode, Err: errors.New(`unknown field "foo"`)}
	errValidate := &ConfigError{Stage: StageValidate, Err: errors.New("kubeAPIQPS: Invalid value")}
	plain := errors.New("no such file")
	bad := &Entry{Reason: "failed to validate current (UID: cur)"}

	tests := []struct {
		name             string
		in               Input
		curErr, lkgErr   error
		want             Decision
		wantCurLoads     int
		wantLKGLoads     int
		wantLKGUnusable  bool
		wantCauseMessage string
	}{
		{
			name: "local current, local lkg",
			in:   Input{},
			want: Decision{},
		},
		{
			name: "local current resets remote lkg",
			in:   Input{LastKnownGood: lkg},
			want: Decision{ResetLastKnownGood: true},
		},
		{
			name:         "good current runs",
			in:           Input{Current: cur, LastKnownGood: lkg},
			want:         Decision{Run: cur},
			wantCurLoads: 1,
		},
		{
			name:         "a startup never promotes (promotion needs uptime: Promotion)",
			in:           Input{Current: cur, LastKnownGood: src("cur", "0")},
			want:         Decision{Run: cur},
			wantCurLoads: 1,
		},
		{
			name:             "unreadable marks roll back, current might be marked",
			in:               Input{MarksError: plain, Current: cur, LastKnownGood: lkg},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemStateUnreadable},
			wantLKGLoads:     1,
			wantCauseMessage: plain.Error(),
		},
		{
			name:             "unreadable marks where lkg is current still run it",
			in:               Input{MarksError: plain, Current: cur, LastKnownGood: src("cur", "1")},
			want:             Decision{Run: cur, UsingLastKnownGood: true, Problem: ProblemStateUnreadable},
			wantLKGLoads:     1,
			wantCauseMessage: plain.Error(),
		},
		{
			name:             "an unreadable last-known-good pointer: a rollback runs local and says why",
			in:               Input{SyncError: errSync, Current: cur, LastKnownGoodError: plain},
			want:             Decision{UsingLastKnownGood: true, Problem: ProblemSyncFailed},
			wantLKGUnusable:  true,
			wantCauseMessage: errSync.Error(),
		},
		{
			name:         "an unreadable last-known-good pointer does not matter while current runs",
			in:           Input{Current: cur, LastKnownGoodError: plain},
			want:         Decision{Run: cur},
			wantCurLoads: 1,
		},
		{
			name: "an unreadable last-known-good pointer with a local current is reset",
			in:   Input{LastKnownGoodError: plain},
			want: Decision{ResetLastKnownGood: true},
		},
		{
			name:             "uncountable crash restarts of current on trial roll back, no mark",
			in:               Input{CrashCountError: plain, Current: cur, LastKnownGood: lkg},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemCrashCountUnknown},
			wantCurLoads:     1,
			wantLKGLoads:     1,
			wantCauseMessage: plain.Error(),
		},
		{
			name:         "uncountable crash restarts of a current that is last-known-good: it runs",
			in:           Input{CrashCountError: plain, Current: cur, LastKnownGood: src("cur", "1")},
			want:         Decision{Run: cur},
			wantCurLoads: 1,
		},
		{
			name:         "a crash loop seen in what could be counted wins over the uncounted rest",
			in:           Input{CrashCountError: plain, CurrentCrashLooping: true, Current: cur, LastKnownGood: lkg},
			want:         Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemCrashLoop, MarkBad: true},
			wantCurLoads: 1,
			wantLKGLoads: 1,
		},
		{
			name:             "current the component refused to apply in process is marked bad, lkg runs",
			in:               Input{ApplyError: errors.New("cannot apply value 2"), Current: cur, LastKnownGood: lkg},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemApplyFailed, MarkBad: true},
			wantLKGLoads:     1,
			wantCauseMessage: "cannot apply value 2",
		},
		{
			name: "dead end after a crash-loop mark",
			in: Input{Current: cur, LastKnownGood: lkg, CurrentBad: &Entry{Reason: "crash loop detected with current (UID: cur)", CrashLoop: true},
				LastKnownGoodCrashLooping: true},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemMarkedBad, DeadEnd: true, DeadEndAfterCrashLoop: true},
			wantLKGLoads:     1,
			wantCauseMessage: "crash loop detected with current (UID: cur)",
		},
		{
			name:             "sync failure at startup uses remote lkg",
			in:               Input{SyncError: errSync, Current: cur, LastKnownGood: lkg},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemSyncFailed},
			wantLKGLoads:     1,
			wantCauseMessage: errSync.Error(),
		},
		{
			name:             "sync failure with local lkg uses local",
			in:               Input{SyncError: errSync, Current: cur},
			want:             Decision{UsingLastKnownGood: true, Problem: ProblemSyncFailed},
			wantCauseMessage: errSync.Error(),
		},
		{
			name:             "sync failure where lkg is current still uses it",
			in:               Input{SyncError: errSync, Current: cur, LastKnownGood: src("cur", "1")},
			want:             Decision{Run: cur, UsingLastKnownGood: true, Problem: ProblemSyncFailed},
			wantLKGLoads:     1,
			wantCauseMessage: errSync.Error(),
		},
		{
			name:             "decode failure marks bad and rolls back",
			in:               Input{Current: cur, LastKnownGood: lkg},
			curErr:           errDecode,
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemDecodeFailed, MarkBad: true},
			wantCurLoads:     1,
			wantLKGLoads:     1,
			wantCauseMessage: errDecode.Error(),
		},
		{
			name:             "validation failure marks bad and rolls back to local",
			in:               Input{Current: cur},
			curErr:           errValidate,
			want:             Decision{UsingLastKnownGood: true, Problem: ProblemValidateFailed, MarkBad: true},
			wantCurLoads:     1,
			wantCauseMessage: errValidate.Error(),
		},
		{
			name:             "corrupt checkpoint rolls back without a mark",
			in:               Input{Current: cur, LastKnownGood: lkg},
			curErr:           errLoad,
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemLoadFailed},
			wantCurLoads:     1,
			wantLKGLoads:     1,
			wantCauseMessage: errLoad.Error(),
		},
		{
			name:             "an untyped loader error is a load failure",
			in:               Input{Current: cur, LastKnownGood: lkg},
			curErr:           plain,
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemLoadFailed},
			wantCurLoads:     1,
			wantLKGLoads:     1,
			wantCauseMessage: plain.Error(),
		},
		{
			name:         "crash loop in trial marks bad and rolls back",
			in:           Input{Current: cur, LastKnownGood: lkg, CurrentCrashLooping: true},
			want:         Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemCrashLoop, MarkBad: true},
			wantCurLoads: 1,
			wantLKGLoads: 1,
		},
		{
			name:         "decode failure wins over crash loop",
			in:           Input{Current: cur, CurrentCrashLooping: true},
			curErr:       errDecode,
			want:         Decision{UsingLastKnownGood: true, Problem: ProblemDecodeFailed, MarkBad: true},
			wantCurLoads: 1,
			// The cause is the decode error, not the crash loop.
			wantCauseMessage: errDecode.Error(),
		},
		{
			name:             "marked bad is never loaded",
			in:               Input{Current: cur, LastKnownGood: lkg, CurrentBad: bad},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemMarkedBad},
			wantLKGLoads:     1,
			wantCauseMessage: bad.Reason,
		},
		{
			name:             "marked bad and lkg crash-loops: dead end",
			in:               Input{Current: cur, LastKnownGood: lkg, CurrentBad: bad, LastKnownGoodCrashLooping: true},
			want:             Decision{Run: lkg, UsingLastKnownGood: true, Problem: ProblemMarkedBad, DeadEnd: true},
			wantLKGLoads:     1,
			wantCauseMessage: bad.Reason,
		},
		{
			name:             "lkg corrupt falls back to local and says so",
			in:               Input{Current: cur, LastKnownGood: lkg},
			curErr:           errValidate,
			lkgErr:           errLoad,
			want:             Decision{UsingLastKnownGood: true, Problem: ProblemValidateFailed, MarkBad: true},
			wantCurLoads:     1,
			wantLKGLoads:     1,
			wantLKGUnusable:  true,
			wantCauseMessage: errValidate.Error(),
		},
		{
			name:             "lkg that is the rejected current is not used",
			in:               Input{Current: cur, LastKnownGood: src("cur", "1"), CurrentBad: bad},
			want:             Decision{UsingLastKnownGood: true, Problem: ProblemMarkedBad},
			wantLKGUnusable:  true,
			wantCauseMessage: bad.Reason,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var curLoads, lkgLoads int
			in := tc.in
			in.LoadCurrent = loader(&curLoads, tc.curErr)
			in.LoadLastKnownGood = loader(&lkgLoads, tc.lkgErr)
			got, err := Decide(in)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if (got.LastKnownGoodUnusable != nil) != tc.wantLKGUnusable {
				t.Errorf("LastKnownGoodUnusable = %v, want set=%v", got.LastKnownGoodUnusable, tc.wantLKGUnusable)
			}
			gotCause := ""
			if got.Cause != nil {
				gotCause = got.Cause.Error()
			}
			if gotCause != tc.wantCauseMessage {
				t.Errorf("Cause = %q, want %q", gotCause, tc.wantCauseMessage)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Decision{}, "Cause", "LastKnownGoodUnusable")); diff != "" {
				t.Errorf("Decision (-want +got):\n%s", diff)
			}
			if curLoads != tc.wantCurLoads || lkgLoads != tc.wantLKGLoads {
				t.Errorf("loads: current %d lkg %d, want %d and %d", curLoads, lkgLoads, tc.wantCurLoads, tc.wantLKGLoads)
			}
		})
	}
}

func TestDecideInputContract(t *testing.T) {
	if _, err := Decide(Input{Current: src("a", "1")}); err == nil {
		t.Error("remote Current without LoadCurrent: want error")
	}
	if _, err := Decide(Input{LastKnownGood: src("a", "1")}); err == nil {
		t.Error("remote LastKnownGood without LoadLastKnownGood: want error")
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		src  *corev1.NodeConfigSource
		want string
	}{
		{nil, ""},
		{&corev1.NodeConfigSource{}, ""},
		{src("u", "5"), "u/5/kubelet"},
	} {
		if got := Key(tc.src); got != tc.want {
			t.Errorf("Key(%v) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestStrings(t *testing.T) {
	for p := ProblemNone; p <= ProblemCrashCountUnknown; p++ {
		if s := p.String(); s == "" || s[0] == 'P' {
			t.Errorf("Problem %d has no name: %q", int(p), s)
		}
	}
	for s := StageLoad; s <= StageValidate; s++ {
		if n := s.String(); n == "" || n[0] == 'S' {
			t.Errorf("Stage %d has no name: %q", int(s), n)
		}
	}
}

// The payload key is part of a config's identity.
func TestSame(t *testing.T) {
	other := src("u", "5")
	other.ConfigMap.KubeletConfigKey = "other"
	for _, tc := range []struct {
		a, b *corev1.NodeConfigSource
		want bool
	}{
		{nil, nil, true},
		{nil, &corev1.NodeConfigSource{}, true},
		{src("u", "5"), src("u", "5"), true},
		{src("u", "5"), src("u", "6"), false},
		{src("u", "5"), src("v", "5"), false},
		{src("u", "5"), other, false},
		{src("u", "5"), nil, false},
	} {
		if got := Same(tc.a, tc.b); got != tc.want {
			t.Errorf("Same(%s, %s) = %v, want %v", Key(tc.a), Key(tc.b), got, tc.want)
		}
	}
}
