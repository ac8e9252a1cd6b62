package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newFake(t *testing.T, objs ...*v1alpha1.ConfigRollout) *dynamicfake.FakeDynamicClient {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var us []runtime.Object
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, &unstructured.Unstructured{Object: m})
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource(): "ConfigRolloutList"}, us...)
}

func runCLI(t *testing.T, fake *dynamicfake.FakeDynamicClient, clk *clocktesting.FakeClock, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	o := Options{
		Out: &out, ErrOut: &out,
		NewClients: func(*genericclioptions.ConfigFlags) (Clients, error) {
			return Clients{Dynamic: fake, Namespace: "ns"}, nil
		},
	}
	if clk != nil {
		o.Clock = clk
	}
	cmd := NewCommand(o)
	cmd.SetArgs(args[1:]) // args[0] is "rollout", the command itself
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func getRollout(t *testing.T, fake *dynamicfake.FakeDynamicClient, name string) *v1alpha1.ConfigRollout {
	t.Helper()
	ro, err := get(context.Background(), fake.Resource(v1alpha1.GroupVersionResource()).Namespace("ns"), "ns", name)
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

func sample() *v1alpha1.ConfigRollout {
	one, ten, all := intstr.FromInt32(1), intstr.FromString("10%"), intstr.FromString("100%")
	return &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: "dynconfig.io/v1alpha1", Kind: "ConfigRollout"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", Generation: 1},
		Spec: v1alpha1.ConfigRolloutSpec{
			Component: "kubelet", ConfigMapName: "new", MaxFailures: 1,
			Steps: []v1alpha1.RolloutStep{{Nodes: &one}, {Pause: &v1alpha1.RolloutPause{}}, {Nodes: &ten}, {Nodes: &all}},
		},
		Status: v1alpha1.ConfigRolloutStatus{
			ObservedGeneration: 1, Phase: v1alpha1.PhaseProgressing, Message: "step 3 of 4: target 2 of 20 nodes, 3 assigned, 1 promoted, 1 failed", CurrentStep: 2,
			ConfigMap: &v1alpha1.ConfigMapRef{UID: "u1", ResourceVersion: "7"},
			Selected:  20, Assigned: 3, InTrial: 1, Promoted: 1, Failed: 1,
			Failures: []v1alpha1.NodeFailure{{Node: "n1", Reason: "kubelet reports RolledBack: failed to validate current (UID: u1)"}},
			Steps: []v1alpha1.StepStatus{
				{Step: 0, CompletedAt: ptr.To(metav1.NewTime(t0.Add(time.Minute))), Promoted: 1},
				{Step: 1, CompletedAt: ptr.To(metav1.NewTime(t0.Add(2 * time.Minute))), Promoted: 1},
			},
			Conditions: []metav1.Condition{{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "Progressing", Message: "step 3 of 4: target 2 of 20 nodes, 3 assigned, 1 promoted, 1 failed"}},
			History: []v1alpha1.HistoryEntry{
				{Time: metav1.NewTime(t0), Reason: "Started", Message: "started"},
				{Time: metav1.NewTime(t0.Add(time.Minute)), Reason: "NodeFailed", Message: "node n1 failed"},
			},
		},
	}
}

func TestRenderStatus(t *testing.T) {
	want := `ConfigRollout ns/ro: Progressing
  step 3 of 4: target 2 of 20 nodes, 3 assigned, 1 promoted, 1 failed
ConfigMap ns/new (UID u1, resourceVersion 7) to kubelet
Nodes: 20 selected, 3 assigned, 1 in trial, 1 promoted, 1 failed (max 1)
Steps:
  1  1 node               [####################]  1/1   done 2026-01-02T03:05:05Z (1 promoted, 0 failed)
  2  pause until resumed                                done
> 3  10% (2 nodes)        [####################]  2/2
  4  100% (20 nodes)      [##------------------]  2/20
Failures:
  n1: kubelet reports RolledBack: failed to validate current (UID: u1)
Conditions:
  Progressing=True (Progressing): step 3 of 4: target 2 of 20 nodes, 3 assigned, 1 promoted, 1 failed
`
	if diff := cmp.Diff(want, RenderStatus(sample())); diff != "" {
		t.Errorf("RenderStatus (-want +got):\n%s", diff)
	}
}

// TestRenderStatusPreflight: the pre-flight check's counts and the nodes
// that did not pass, each with its fields or why.
func TestRenderStatusPreflight(t *testing.T) {
	ro := sample()
	done := metav1.NewTime(t0.Add(30 * time.Second))
	ro.Status.Preflight = &v1alpha1.PreflightStatus{Policy: v1alpha1.PreflightWarn, StartedAt: metav1.NewTime(t0), CompletedAt: &done,
		Asked: 20, Passed: 17, Overridden: 1, Failed: 1, NoAnswer: 1,
		Nodes: []v1alpha1.NodePreflight{
			{Node: "n2", Verdict: "Fail", Message: "maxPods: must be positive"},
			{Node: "n3", Verdict: "Overridden", Fields: []string{"maxPods (by /etc/kubernetes/kubelet.conf.d/zz.conf)"}},
		}}
	want := `Pre-flight (Warn, completed 2026-01-02T03:04:35Z): 20 asked, 17 passed, 1 overridden, 1 failed, 1 no answer
  n2: Fail: maxPods: must be positive
  n3: Overridden: maxPods (by /etc/kubernetes/kubelet.conf.d/zz.conf)
  and 1 more
Conditions:`
	if got := RenderStatus(ro); !strings.Contains(got, want) {
		t.Errorf("RenderStatus:\n%s\nwant it to hold:\n%s", got, want)
	}
}

func TestRenderHistory(t *testing.T) {
	want := `TIME                  REASON      MESSAGE
2026-01-02T03:04:05Z  Started     started
2026-01-02T03:05:05Z  NodeFailed  node n1 failed
`
	if diff := cmp.Diff(want, RenderHistory(sample())); diff != "" {
		t.Errorf("RenderHistory (-want +got):\n%s", diff)
	}
}

func TestParseSteps(t *testing.T) {
	one, ten := intstr.FromInt32(1), intstr.FromString("10%")
	got, err := ParseSteps("1, 10%,pause,pause=10m")
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.RolloutStep{{Nodes: &one}, {Nodes: &ten}, {Pause: &v1alpha1.RolloutPause{}},
		{Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: 10 * time.Minute}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSteps (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "0", "-1", "0%", "101%", "x", "pause=", "pause=-1s", "1,,2"} {
		if _, err := ParseSteps(bad); err == nil {
			t.Errorf("ParseSteps(%q) = nil error", bad)
		}
	}
}

func TestStart(t *testing.T) {
	fake := newFake(t)
	out, err := runCLI(t, fake, nil, "rollout", "start", "r1", "--configmap", "cfg", "--steps", "1,pause=5m,100%",
		"--max-unavailable", "10%", "--max-failures", "2", "-l", "pool=a", "--no-revert-on-halt", "--progress-deadline", "2m",
		"--preflight", "Warn", "--preflight-timeout", "90s")
	_ = out
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	ro := getRollout(t, fake, "r1")
	steps, _ := ParseSteps("1,pause=5m,100%")
	mu := intstr.FromString("10%")
	f, deadline := false, int32(120)
	want := v1alpha1.ConfigRolloutSpec{
		Component: "kubelet", ConfigMapName: "cfg", Steps: steps, MaxUnavailable: &mu, MaxFailures: 2,
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}, RevertOnHalt: &f,
		ProgressDeadlineSeconds: &deadline, Preflight: v1alpha1.PreflightWarn, PreflightTimeoutSeconds: ptr.To(int32(90)),
	}
	if diff := cmp.Diff(want, ro.Spec); diff != "" {
		t.Errorf("created spec (-want +got):\n%s", diff)
	}
	if !strings.Contains(out, "configrollout ns/r1 created") {
		t.Errorf("output %q", out)
	}
	for _, args := range [][]string{
		{"rollout", "start", "r2"},
		{"rollout", "start", "r2", "--configmap", "c", "--steps", "0"},
		{"rollout", "start", "r2", "--configmap", "c", "--max-unavailable", "0"},
		{"rollout", "start", "r2", "--configmap", "c", "--progress-deadline", "0s"},
		{"rollout", "start", "r2", "--configmap", "c", "--preflight", "warn"},
		{"rollout", "start", "r2", "--configmap", "c", "--preflight-timeout", "500ms"},
	} {
		if _, err := runCLI(t, fake, nil, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestSteer(t *testing.T) {
	for _, tc := range []struct {
		verb  string
		check func(*v1alpha1.ConfigRollout) bool
	}{
		{"pause", func(r *v1alpha1.ConfigRollout) bool { return r.Spec.Paused }},
		{"abort", func(r *v1alpha1.ConfigRollout) bool { return r.Spec.Abort }},
		{"undo", func(r *v1alpha1.ConfigRollout) bool { return r.Spec.Undo }},
		{"resume", func(r *v1alpha1.ConfigRollout) bool {
			return !r.Spec.Paused && r.Spec.ResumedStep != nil && *r.Spec.ResumedStep == 2
		}},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			ro := sample()
			ro.Spec.Paused = tc.verb == "resume"
			fake := newFake(t, ro)
			out, err := runCLI(t, fake, nil, "rollout", tc.verb, "ro")
			if err != nil {
				t.Fatalf("%s: %v", tc.verb, err)
			}
			if got := getRollout(t, fake, "ro"); !tc.check(got) {
				t.Errorf("%s: spec %+v", tc.verb, got.Spec)
			}
			if want := "configrollout ns/ro: " + tc.verb + " requested\n"; out != want {
				t.Errorf("output %q, want %q", out, want)
			}
			if _, err := runCLI(t, fake, nil, "rollout", tc.verb, "missing"); err == nil || !strings.Contains(err.Error(), "ConfigRollout ns/missing not found") {
				t.Errorf("%s of a missing rollout: %v", tc.verb, err)
			}
		})
	}
}

// TestStatusWatch: -w follows a watch: it redraws on a change and returns
// when the rollout ends, with no clock ticking (it polled every --interval
// before).
func TestStatusWatch(t *testing.T) {
	fake := newFake(t, sample())
	clk := clocktesting.NewFakeClock(t0)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runCLI(t, fake, clk, "rollout", "status", "ro", "-w")
		done <- result{out, err}
	}()
	waitWaiters(t, clk)
	ro := sample()
	ro.Status.Phase = v1alpha1.PhaseCompleted
	ro.Status.CurrentStep = 4
	ro.Status.Promoted = 19
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	var r result
	// The fake's watch sees only what follows it: write until it does.
	deadline := time.After(30 * time.Second)
wait:
	for {
		if _, err := fake.Resource(v1alpha1.GroupVersionResource()).Namespace("ns").Update(context.Background(), &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case r = <-done:
			break wait
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("status -w did not return once the rollout completed")
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := strings.Count(r.out, "ConfigRollout ns/ro:"); got != 2 {
		t.Errorf("%d views drawn, want 2 (one per change):\n%s", got, r.out)
	}
	if !strings.Contains(r.out, "ConfigRollout ns/ro: Completed") {
		t.Errorf("the last view is not the completed one:\n%s", r.out)
	}
}

func waitWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("status -w never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRenderStatusDeleting: a rollout being deleted says so, and whether
// it waits for reverts.
func TestRenderStatusDeleting(t *testing.T) {
	ro := sample()
	at := metav1.NewTime(time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC))
	ro.DeletionTimestamp = &at
	ro.Finalizers = []string{plan.Finalizer}
	if got := RenderStatus(ro); !strings.Contains(got, "Deleting (since 2026-11-23T06:00:00Z): it goes once the nodes it changed are back on their previous source") {
		t.Errorf("with the finalizer:\n%s", got)
	}
	ro.Finalizers = nil
	if got := RenderStatus(ro); !strings.Contains(got, "it puts no node back") {
		t.Errorf("without the finalizer:\n%s", got)
	}
}
