package status

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/nodeapi"
)

const testNode = "node-1"

// t0 is a whole second: the API round trip keeps only seconds.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// noWait retries at once, so retry tests need no sleeps.
var noWait = wait.Backoff{Steps: 3}

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// byType compares condition lists as sets: a strategic merge may add the
// new condition at either end.
var byType = cmpopts.SortSlices(func(a, b corev1.NodeCondition) bool { return a.Type < b.Type })

// otherConditions are conditions that belong to the kubelet, not to us.
func otherConditions() []corev1.NodeCondition {
	old := metav1.NewTime(t0.Add(-time.Hour))
	return []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
			LastHeartbeatTime: old, LastTransitionTime: old},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory",
			LastHeartbeatTime: old, LastTransitionTime: old},
	}
}

func testNodeObject(conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"},
		Status:     corev1.NodeStatus{Conditions: conds},
	}
}

func getConditions(t *testing.T, c *fake.Clientset) []corev1.NodeCondition {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the node: %v", err)
	}
	return n.Status.Conditions
}

func newTestReporter(t *testing.T, c *fake.Clientset, clk *clocktesting.FakePassiveClock) *NodeReporter {
	t.Helper()
	r, err := NewNodeReporter(NodeReporterOptions{Client: c, NodeName: testNode, Clock: clk, Backoff: noWait})
	if err != nil {
		t.Fatalf("NewNodeReporter: %v", err)
	}
	return r
}

func TestNewNodeReporterValidates(t *testing.T) {
	client := fake.NewClientset()
	tests := []struct {
		name    string
		opts    NodeReporterOptions
		wantErr string // "" means valid
	}{
		{"valid with defaults", NodeReporterOptions{Client: client, NodeName: testNode}, ""},
		{"missing client", NodeReporterOptions{NodeName: testNode}, "NodeReporterOptions.Client is required"},
		{"missing node name", NodeReporterOptions{Client: client}, "NodeReporterOptions.NodeName: required"},
		{"invalid node name", NodeReporterOptions{Client: client, NodeName: "Node_1"}, `NodeReporterOptions.NodeName: "Node_1" is not a valid node name`},
		{"negative steps", NodeReporterOptions{Client: client, NodeName: testNode, Backoff: wait.Backoff{Steps: -1}}, "NodeReporterOptions.Backoff"},
		{"negative duration", NodeReporterOptions{Client: client, NodeName: testNode, Backoff: wait.Backoff{Steps: 1, Duration: -time.Second}}, "NodeReporterOptions.Backoff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewNodeReporter(tc.opts)
			if tc.wantErr == "" {
				if err != nil || r == nil {
					t.Fatalf("NewNodeReporter = %v, %v; want a reporter", r, err)
				}
				if r.backoff.Steps != DefaultReportBackoff().Steps {
					t.Errorf("default backoff steps %d, want %d", r.backoff.Steps, DefaultReportBackoff().Steps)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewNodeReporter error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestNodeReporterTimeline walks one node through reports and checks the
// whole condition list after each: the heartbeat always moves, the
// transition time only on a change, and the kubelet's conditions never move.
func TestNodeReporterTimeline(t *testing.T) {
	ok := Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (UID: a)"}
	bad := Report{Status: corev1.ConditionFalse, Reason: ValidateFailedReason("b"), Message: "using last known good: (UID: a)"}
	client := fake.NewClientset(testNodeObject(otherConditions()...))
	clk := clocktesting.NewFakePassiveClock(t0)
	reporter := newTestReporter(t, client, clk)

	steps := []struct {
		name           string
		advance        time.Duration
		restart        bool // a new reporter, as after a process restart
		report         Report
		wantTransition time.Time
	}{
		{name: "first report", report: ok, wantTransition: t0},
		{name: "same report keeps transition", advance: time.Minute, report: ok, wantTransition: t0},
		{name: "same report after restart keeps transition", advance: time.Minute, restart: true, report: ok, wantTransition: t0},
		{name: "status change moves transition", advance: time.Minute, report: bad, wantTransition: t0.Add(3 * time.Minute)},
		{name: "same bad report keeps transition", advance: time.Minute, report: bad, wantTransition: t0.Add(3 * time.Minute)},
		{name: "back to ok moves transition", advance: time.Minute, report: ok, wantTransition: t0.Add(5 * time.Minute)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.SetTime(clk.Now().Add(s.advance))
			if s.restart {
				reporter = newTestReporter(t, client, clk)
			}
			if err := reporter.ReportConfigOK(context.Background(), s.report); err != nil {
				t.Fatalf("ReportConfigOK: %v", err)
			}
			want := append(otherConditions(), corev1.NodeCondition{
				Type: nodeapi.ConditionType, Status: s.report.Status, Reason: s.report.Reason, Message: s.report.Message,
				LastHeartbeatTime: metav1.NewTime(clk.Now()), LastTransitionTime: metav1.NewTime(s.wantTransition),
			})
			if diff := cmp.Diff(want, getConditions(t, client), byType); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeReporterSendsOnlyTheCondition checks the wire: one GET, then one
// strategic merge patch of the status subresource whose body is the
// ConfigOK condition alone.
func TestNodeReporterSendsOnlyTheCondition(t *testing.T) {
	client := fake.NewClientset(testNodeObject(otherConditions()...))
	r := newTestReporter(t, client, clocktesting.NewFakePassiveClock(t0))
	report := Report{Status: corev1.ConditionUnknown, Reason: SyncFailedReason(errors.New("boom")), Message: "using last-known-good (init)"}
	if err := r.ReportConfigOK(context.Background(), report); err != nil {
		t.Fatalf("ReportConfigOK: %v", err)
	}
	actions := client.Actions()
	var got []string
	for _, a := range actions {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	if diff := cmp.Diff([]string{"get nodes/", "patch nodes/status"}, got); diff != "" {
		t.Fatalf("requests (-want +got):\n%s", diff)
	}
	patch := actions[1].(k8stesting.PatchAction)
	if patch.GetPatchType() != types.StrategicMergePatchType {
		t.Errorf("patch type %q, want %q", patch.GetPatchType(), types.StrategicMergePatchType)
	}
	var body map[string]any
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
		t.Fatalf("patch body %s: %v", patch.GetPatch(), err)
	}
	ts := t0.Format(time.RFC3339)
	want := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": "ConfigOK", "status": "Unknown", "reason": report.Reason, "message": report.Message,
		"lastHeartbeatTime": ts, "lastTransitionTime": ts,
	}}}}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("patch body (-want +got):\n%s", diff)
	}
}

func TestNodeReporterRetries(t *testing.T) {
	ok := Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (default)"}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("the object has been modified"))
	tests := []struct {
		name         string
		node         bool    // whether the Node exists
		patchErrs    []error // returned by the first patches, in order
		wantPatches  int
		wantRequests int              // GETs and PATCHes
		wantErr      func(error) bool // nil: success
		wantInErr    string
	}{
		{name: "conflict is retried", node: true, patchErrs: []error{conflict}, wantPatches: 2, wantRequests: 4},
		{name: "transient errors are retried", node: true,
			patchErrs: []error{apierrors.NewServerTimeout(nodesGVR.GroupResource(), "patch", 1), apierrors.NewTooManyRequests("slow down", 1)}, wantPatches: 3, wantRequests: 6},
		{name: "retries are bounded", node: true, patchErrs: []error{conflict, conflict, conflict, conflict}, wantPatches: 3, wantRequests: 6,
			wantErr: apierrors.IsConflict, wantInErr: `node "node-1": giving up after 3 attempts`},
		{name: "forbidden is not retried", node: true, patchErrs: []error{apierrors.NewForbidden(nodesGVR.GroupResource(), testNode, errors.New("no"))},
			wantPatches: 1, wantRequests: 2, wantErr: apierrors.IsForbidden, wantInErr: `reporting ConfigOK on node "node-1"`},
		{name: "missing node names the node", node: false, wantPatches: 0, wantRequests: 1,
			wantErr: apierrors.IsNotFound, wantInErr: `reporting ConfigOK on node "node-1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.node {
				objs = append(objs, testNodeObject(otherConditions()...))
			}
			client := fake.NewClientset(objs...)
			patches := 0
			client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches <= len(tc.patchErrs) {
					return true, nil, tc.patchErrs[patches-1]
				}
				return false, nil, nil
			})
			err := newTestReporter(t, client, clocktesting.NewFakePassiveClock(t0)).ReportConfigOK(context.Background(), ok)
			if patches != tc.wantPatches || len(client.Actions()) != tc.wantRequests {
				t.Errorf("%d patches in %d requests, want %d in %d", patches, len(client.Actions()), tc.wantPatches, tc.wantRequests)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("ReportConfigOK: %v", err)
				}
				if c := Find(getConditions(t, client)); c == nil || c.Status != corev1.ConditionTrue {
					t.Errorf("condition after retries = %+v, want ConfigOK True", c)
				}
				return
			}
			if err == nil || !tc.wantErr(err) || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Fatalf("ReportConfigOK error = %v, want a wrapped API error containing %q", err, tc.wantInErr)
			}
		})
	}
}

func TestNodeReporterHonoursContext(t *testing.T) {
	ok := Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (default)"}

	t.Run("cancelled before the first attempt", func(t *testing.T) {
		client := fake.NewClientset(testNodeObject())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := newTestReporter(t, client, clocktesting.NewFakePassiveClock(t0)).ReportConfigOK(ctx, ok)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `node "node-1"`) {
			t.Fatalf("error = %v, want context.Canceled naming the node", err)
		}
		if n := len(client.Actions()); n != 0 {
			t.Errorf("%d requests sent with a cancelled context", n)
		}
	})

	t.Run("cancelled while waiting to retry", func(t *testing.T) {
		client := fake.NewClientset(testNodeObject())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			cancel() // the hour-long wait below ends at once
			return true, nil, apierrors.NewConflict(nodesGVR.GroupResource(), testNode, errors.New("modified"))
		})
		r, err := NewNodeReporter(NodeReporterOptions{Client: client, NodeName: testNode,
			Clock: clocktesting.NewFakePassiveClock(t0), Backoff: wait.Backoff{Steps: 5, Duration: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		err = r.ReportConfigOK(ctx, ok)
		if !errors.Is(err, context.Canceled) || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `node "node-1"`) {
			t.Fatalf("error = %v, want context.Canceled with the last conflict", err)
		}
	})
}

func TestNodeReporterRejectsInvalidStatus(t *testing.T) {
	client := fake.NewClientset(testNodeObject())
	err := newTestReporter(t, client, clocktesting.NewFakePassiveClock(t0)).ReportConfigOK(context.Background(), Report{Status: "Maybe"})
	if err == nil || !strings.Contains(err.Error(), `invalid status "Maybe"`) {
		t.Fatalf("error = %v, want an invalid status error", err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d requests sent for an invalid report", n)
	}
}

func BenchmarkConditionPatch(b *testing.B) {
	cond := ConfigOK(nil, Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (UID: a)"}, metav1.NewTime(t0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ConditionPatch(cond); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNodeReporterReusesPatchedCondition: after a successful patch the
// condition the API server returned is the previous one of the next report,
// so the next report is a single PATCH, and the transition rules still hold.
func TestNodeReporterReusesPatchedCondition(t *testing.T) {
	client := fake.NewClientset(testNodeObject(otherConditions()...))
	clk := clocktesting.NewFakePassiveClock(t0)
	r := newTestReporter(t, client, clk)
	ok := Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (default)"}
	if err := r.ReportConfigOK(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	clk.SetTime(t0.Add(time.Minute))
	if err := r.ReportConfigOK(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range client.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	if diff := cmp.Diff([]string{"patch nodes/status"}, got); diff != "" {
		t.Fatalf("second report's requests (-want +got):\n%s", diff)
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := Find(node.Status.Conditions)
	if c == nil || !c.LastTransitionTime.Time.Equal(t0) || !c.LastHeartbeatTime.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("condition %+v: want transition at t0 and heartbeat a minute later", c)
	}
}

// Two components on one Node report their own condition types; neither
// overwrites the other, through repeated reports.
func TestNodeReportersOfTwoComponentsKeepTheirConditions(t *testing.T) {
	client := fake.NewClientset(testNodeObject(otherConditions()...))
	clk := clocktesting.NewFakePassiveClock(t0)
	kubelet, err := NewNodeReporter(NodeReporterOptions{Client: client, NodeName: testNode, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := NewNodeReporter(NodeReporterOptions{Client: client, NodeName: testNode, Clock: clk, ConditionType: nodeapi.ConditionTypeFor("kube-proxy")})
	if err != nil {
		t.Fatal(err)
	}
	ok := Report{Status: corev1.ConditionTrue, Reason: ReasonAllChecksPassed, Message: "using current (UID: k)"}
	bad := Report{Status: corev1.ConditionFalse, Reason: ValidateFailedReason("p"), Message: "using last-known-good (default)"}
	for i := 0; i < 3; i++ {
		clk.SetTime(clk.Now().Add(time.Minute))
		if err := kubelet.ReportConfigOK(context.Background(), ok); err != nil {
			t.Fatal(err)
		}
		if err := proxy.ReportConfigOK(context.Background(), bad); err != nil {
			t.Fatal(err)
		}
		conds := getConditions(t, client)
		k, p := FindType(conds, nodeapi.ConditionType), FindType(conds, "KubeProxyConfigOK")
		if k == nil || p == nil || k.Status != corev1.ConditionTrue || p.Status != corev1.ConditionFalse || len(conds) != len(otherConditions())+2 {
			t.Fatalf("round %d: conditions %+v", i, conds)
		}
	}
	if _, err := NewNodeReporter(NodeReporterOptions{Client: client, NodeName: testNode, ConditionType: "not a type!"}); err == nil ||
		!strings.Contains(err.Error(), "NodeReporterOptions.ConditionType") {
		t.Errorf("invalid ConditionType: %v", err)
	}
}
