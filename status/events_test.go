package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/nodeapi"
)

func TestNewEventReporterValidates(t *testing.T) {
	client := fake.NewClientset()
	tests := []struct {
		name          string
		opts          EventReporterOptions
		wantErr       string // "" means valid
		wantComponent string
	}{
		{"defaults", EventReporterOptions{Client: client, NodeName: testNode}, "", DefaultEventComponent},
		{"own component", EventReporterOptions{Client: client, NodeName: testNode, Component: "kubelet"}, "", "kubelet"},
		{"missing client", EventReporterOptions{NodeName: testNode}, "EventReporterOptions.Client is required", ""},
		{"missing node name", EventReporterOptions{Client: client}, "EventReporterOptions.NodeName: required", ""},
		{"invalid node name", EventReporterOptions{Client: client, NodeName: "a b"}, "EventReporterOptions.NodeName", ""},
		{"invalid component", EventReporterOptions{Client: client, NodeName: testNode, Component: "my component"}, `EventReporterOptions.Component: "my component"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEventReporter(tc.opts)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("NewEventReporter: %v", err)
				}
				if e.component != tc.wantComponent {
					t.Errorf("component %q, want %q", e.component, tc.wantComponent)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewEventReporter error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestEventReporterRecords records both kinds of Event, two of them at the
// same instant, and compares the stored Events whole.
func TestEventReporterRecords(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakePassiveClock(t0)
	e, err := NewEventReporter(EventReporterOptions{Client: client, NodeName: testNode, Component: "kubelet", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "kubelet-config", UID: "uid-1", ResourceVersion: "42", KubeletConfigKey: "kubelet"}}
	ctx := context.Background()
	if err := e.RecordConfigChanged(ctx, ConfigChangedMessage(src)); err != nil {
		t.Fatalf("RecordConfigChanged: %v", err)
	}
	clk.SetTime(t0.Add(time.Second))
	if err := e.RecordRolledBack(ctx, ValidateFailedReason("uid-1")); err != nil {
		t.Fatalf("RecordRolledBack: %v", err)
	}
	// The clock has not moved: the name must still be new (the time part
	// is 2026-11-22T10:00:01Z in Unix nanoseconds, plus one).
	if err := e.RecordRolledBack(ctx, CrashLoopReason("uid-1")); err != nil {
		t.Fatalf("second RecordRolledBack at the same instant: %v", err)
	}

	event := func(name, typ, reason, message string, at time.Time) corev1.Event {
		return corev1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: "default"},
			InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: testNode, UID: testNode},
			Reason:              reason,
			Message:             message,
			Type:                typ,
			Source:              corev1.EventSource{Component: "kubelet", Host: testNode},
			FirstTimestamp:      metav1.NewTime(at),
			LastTimestamp:       metav1.NewTime(at),
			Count:               1,
			ReportingController: "kubelet",
			ReportingInstance:   testNode,
		}
	}
	at1 := t0.Add(time.Second)
	want := []corev1.Event{
		event(testNode+".18ea55ac4e7b4000", "Normal", "ConfigChanged",
			"config changed to ConfigMap kube-system/kubelet-config (UID: uid-1, resourceVersion: 42), restarting", t0),
		event(testNode+".18ea55ac8a160a00", "Warning", "ConfigRolledBack", "failed to validate current (UID: uid-1)", at1),
		event(testNode+".18ea55ac8a160a01", "Warning", "ConfigRolledBack", "crash loop detected with current (UID: uid-1)", at1),
	}
	// Compare what was sent, not what the fake stored (it adds managed
	// fields and type meta).
	var got []corev1.Event
	for _, a := range client.Actions() {
		create, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetResource().Resource != "events" || a.GetNamespace() != "default" {
			t.Fatalf("unexpected request %s %s in %q", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		}
		got = append(got, *create.GetObject().(*corev1.Event))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The names were unique: the fake holds all three.
	list, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != len(want) {
		t.Errorf("stored events: %d, %v; want %d", len(list.Items), err, len(want))
	}
}

func TestEventReporterErrorNamesNodeAndReason(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no"))
	})
	e, err := NewEventReporter(EventReporterOptions{Client: client, NodeName: testNode, Clock: clocktesting.NewFakePassiveClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		reason string
		record func(context.Context, string) error
	}{
		{EventReasonConfigChanged, e.RecordConfigChanged},
		{EventReasonConfigRolledBack, e.RecordRolledBack},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			err := tc.record(context.Background(), "m")
			want := `recording ` + tc.reason + ` event for node "node-1"`
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error = %v, want a wrapped Forbidden containing %q", err, want)
			}
		})
	}
}

func TestDescribeSource(t *testing.T) {
	tests := []struct {
		name string
		src  *corev1.NodeConfigSource
		want string
	}{
		{"nil is local", nil, "local"},
		{"no ConfigMap is local", &corev1.NodeConfigSource{}, "local"},
		{"ConfigMap", &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "cm", UID: "u", ResourceVersion: "7"}},
			"ConfigMap ns/cm (UID: u, resourceVersion: 7)"},
		{"ConfigMap without resourceVersion", &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "cm", UID: "u"}},
			"ConfigMap ns/cm (UID: u)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeapi.DescribeSource(tc.src); got != tc.want {
				t.Errorf("nodeapi.DescribeSource = %q, want %q", got, tc.want)
			}
			if got, want := ConfigReloadMessage(tc.src), "config changed to "+tc.want+", reloading"; got != want {
				t.Errorf("ConfigReloadMessage = %q, want %q", got, want)
			}
			if got, want := ConfigChangedMessage(tc.src), "config changed to "+tc.want+", restarting"; got != want {
				t.Errorf("ConfigChangedMessage = %q, want %q", got, want)
			}
		})
	}
}

// Issue 21: a warning repeated on every start (a dead end under a restart
// loop) is one Event whose count and lastTimestamp move, as the kubelet's
// recorder does, not a new Event per start; another message is another
// Event. Each repeat is what a new process would send (a new reporter).
func TestRecordWarningDeduplicates(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	msg := DeadEndReason(CrashLoopReason("uid-1"), true)
	for i := range 3 {
		e, err := NewEventReporter(EventReporterOptions{Client: client, NodeName: testNode, Component: "kubelet",
			Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Duration(i) * time.Minute))})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.RecordWarning(ctx, EventReasonConfigDeadEnd, msg); err != nil {
			t.Fatalf("repeat %d: %v", i, err)
		}
	}
	e, err := NewEventReporter(EventReporterOptions{Client: client, NodeName: testNode, Component: "kubelet",
		Clock: clocktesting.NewFakePassiveClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RecordWarning(ctx, EventReasonStateFileQuarantined, "another message"); err != nil {
		t.Fatal(err)
	}
	list, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int32{}
	for _, ev := range list.Items {
		counts[ev.Reason] += ev.Count
		if ev.Reason == EventReasonConfigDeadEnd {
			if !ev.FirstTimestamp.Time.Equal(t0) || !ev.LastTimestamp.Time.Equal(t0.Add(2*time.Minute)) || ev.Message != msg {
				t.Errorf("dead-end event %s: first %v last %v; want %v and %v", ev.Name, ev.FirstTimestamp, ev.LastTimestamp, t0, t0.Add(2*time.Minute))
			}
		}
	}
	if len(list.Items) != 2 || counts[EventReasonConfigDeadEnd] != 3 || counts[EventReasonStateFileQuarantined] != 1 {
		t.Fatalf("%d events, counts %v; want one dead-end Event counted 3 and one other", len(list.Items), counts)
	}
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v != "create" && v != "patch" && v != "list" {
			t.Errorf("verb %s: the component's RBAC grants create and patch only", v)
		}
	}
}
