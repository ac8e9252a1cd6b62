package realnode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dynconfig/dynconfig/test/cluster"
)

// TestRestartNotReadyWindow measures what one dynconfig-applied kubelet
// restart costs the pods on the node (issue 31). Before v1.35 a restarted
// kubelet set every pod's Ready to False until it had probed the pod again
// (keps/sig-node/4781-kublet-restart-pod-status), so a Service lost the
// node's endpoints for a while although no container stopped; v1.35 keeps
// the statuses unless the gate ChangeContainerStatusOnKubeletRestart is
// on. Both are measured, each over DYNCONFIG_RESTARTS restarts (default 5,
// to keep CI short; the figures in the docs are from 20), each the run role's restart for a new assignment: "plain" has
// no readiness probe, "probed" an exec readiness probe (period 1s). A
// watch records, from the API server's point of view, every Ready False →
// True window of each pod; the test reports p50, p99 and max per pod.
//
// It fails if a restart is not exactly one more kubelet start, if a
// container restarted (a kubelet restart must leave them running), or if a
// pod is not Ready again in time. The windows themselves are a
// measurement: they depend on the machine's load (logged beside them).
func TestRestartNotReadyWindow(t *testing.T) {
	restarts := 5
	if v := os.Getenv("DYNCONFIG_RESTARTS"); v != "" {
		var err error
		if restarts, err = strconv.Atoi(v); err != nil || restarts < 1 {
			t.Fatalf("DYNCONFIG_RESTARTS=%q: want a positive number", v)
		}
	}
	kubeletBin := requirements(t)
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx := context.Background()
	if _, err := cl.ApplyManifests(ctx, "../../deploy/config-namespace.yaml"); err != nil {
		t.Fatal(err)
	}
	n := newRealNode(t, cl, kubeletBin)
	n.startContainerd(true)
	t0 := time.Now()
	n.startSupervisor()
	n.eventually("Node Ready on the local config", n.ready(110, t0))
	n.startFollow()

	rec := newReadyRecorder(t, cl, n.name)
	for _, probed := range []bool{false, true} {
		n.runProbedPod(probed)
	}
	for _, name := range []string{"plain", "probed"} {
		n.eventually("pod "+name+" Ready", rec.isReady(name))
	}
	containers := n.containerIDs()
	t.Logf("before the restarts: %v", containers)

	// v1.35 turned the reset off by default (the feature gate
	// ChangeContainerStatusOnKubeletRestart, Deprecated, default false;
	// pkg/kubelet/prober/prober_manager.go and kubelet_pods.go keep the
	// statuses when it is off). Both behaviours are measured: the default
	// of v1.37, and the gate on, which is what every kubelet before v1.35
	// does.
	for _, phase := range []struct{ name, gates string }{
		{"default (v1.35+)", ""},
		{"ChangeContainerStatusOnKubeletRestart=true (before v1.35)", "featureGates: {ChangeContainerStatusOnKubeletRestart: true}\n"},
	} {
		// Two immutable configs taken in turns: every assignment is a
		// new config for the node, so exactly one restart.
		slug := map[bool]string{false: "default", true: "gate"}[phase.gates != ""]
		cms := []*corev1.ConfigMap{
			n.configMap("window-"+slug+"-a", "maxPods: 60\n"+phase.gates, "1h", threshold),
			n.configMap("window-"+slug+"-b", "maxPods: 61\n"+phase.gates, "1h", threshold),
		}
		before := map[string]int{}
		for _, name := range []string{"plain", "probed"} {
			before[name] = len(rec.windows(name))
		}
		for i := range restarts {
			starts := len(n.sup.startsSoFar())
			start := time.Now()
			n.assign(cms[i%2])
			n.eventually(fmt.Sprintf("%s, restart %d: Node Ready with capacity %d", phase.name, i+1, 60+i%2), n.ready(int64(60+i%2), start))
			// The kubelet writes a reset soon after it starts; a pod whose
			// Ready did not turn False within resetWait of the Node being
			// Ready again kept it (no window).
			rec.waitReset(start, resetWait, "plain", "probed")
			for _, name := range []string{"plain", "probed"} {
				n.eventually(fmt.Sprintf("%s, restart %d: pod %s Ready", phase.name, i+1, name), rec.isReady(name))
			}
			if st := n.sup.startsSoFar(); len(st) != starts+1 {
				t.Fatalf("%s, restart %d: %d kubelet starts, want exactly 1\n%s", phase.name, i+1, len(st)-starts, n.more())
			}
		}
		if got := n.containerIDs(); !slices.Equal(got, containers) {
			t.Fatalf("%s: containers changed across the restarts: %v, then %v\n%s", phase.name, containers, got, n.more())
		}
		load, _ := os.ReadFile("/proc/loadavg")
		for _, name := range []string{"plain", "probed"} {
			w := rec.windows(name)[before[name]:]
			if len(w) == 0 {
				t.Logf("%s: pod %s: Ready never turned False in %d restarts", phase.name, name, restarts)
				continue
			}
			slices.Sort(w)
			t.Logf("%s: pod %s: %d not-Ready windows in %d restarts: p50 %v, p99 %v, max %v (load %s)",
				phase.name, name, len(w), restarts, percentile(w, 50), percentile(w, 99), w[len(w)-1].Round(time.Millisecond), strings.Fields(string(load))[0])
		}
	}
}

// runProbedPod runs pod "plain" (no readiness probe) or "probed" (an exec
// readiness probe every second) on the node.
func (n *realNode) runProbedPod(probed bool) {
	n.t.Helper()
	name, c := "plain", corev1.Container{Name: "main", Image: appImage, ImagePullPolicy: corev1.PullNever, Command: sleeper}
	if probed {
		name = "probed"
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "true"}}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
		}
	}
	f, grace := false, int64(1)
	if _, err := n.cl.Client.CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: n.name, AutomountServiceAccountToken: &f, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{c}},
	}, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// containerIDs lists the node's pods' container IDs and restart counts.
func (n *realNode) containerIDs() []string {
	n.t.Helper()
	pods, err := n.cl.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var ids []string
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			id := fmt.Sprintf("%s/%s %s restarts=%d", p.Name, s.Name, s.ContainerID, s.RestartCount)
			if term := s.LastTerminationState.Terminated; term != nil {
				id += fmt.Sprintf(" (last ended: exit %d, %s %s at %v)", term.ExitCode, term.Reason, term.Message, term.FinishedAt)
			}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// readyRecorder watches the pods of one node and records, per pod, when
// its Ready condition was seen to change (the watch event's arrival).
type readyRecorder struct {
	mu      sync.Mutex
	ready   map[string]bool
	since   map[string]time.Time // when the pod was last seen to turn Ready or not
	gone    map[string][]time.Duration
	readyAt map[string]time.Time
}

func newReadyRecorder(t *testing.T, cl *cluster.Cluster, node string) *readyRecorder {
	t.Helper()
	r := &readyRecorder{ready: map[string]bool{}, since: map[string]time.Time{}, gone: map[string][]time.Duration{}, readyAt: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cl.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				r.observe(p.Name, podReady(p), time.Now())
			}
		}
	}()
	return r
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *readyRecorder) observe(name string, ready bool, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was, seen := r.ready[name]
	if seen && was == ready {
		return
	}
	if seen && !was && ready && !r.since[name].IsZero() && !r.readyAt[name].IsZero() {
		// A window: it had been Ready, turned not Ready, and is back.
		r.gone[name] = append(r.gone[name], at.Sub(r.since[name]))
	}
	r.ready[name], r.since[name] = ready, at
	if ready {
		r.readyAt[name] = at
	}
}

// isReady: the pod is Ready now.
func (r *readyRecorder) isReady(name string) func() (bool, string) {
	return func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ready[name], fmt.Sprintf("ready=%t", r.ready[name])
	}
}

// resetWait is how long after a restarted kubelet's Node is Ready the
// test waits for a pod's Ready to turn False.
const resetWait = 5 * time.Second

// waitReset waits until each of the pods was seen not Ready after t, for
// at most d.
func (r *readyRecorder) waitReset(t time.Time, d time.Duration, names ...string) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		all := true
		for _, name := range names {
			all = all && (!r.ready[name] || r.readyAt[name].After(t) && len(r.gone[name]) > 0 && r.lastGoneAfter(name, t))
		}
		r.mu.Unlock()
		if all {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastGoneAfter: the pod's last window began after t. r.mu is held.
func (r *readyRecorder) lastGoneAfter(name string, t time.Time) bool {
	g := r.gone[name]
	return r.readyAt[name].Add(-g[len(g)-1]).After(t)
}

// windows returns the pod's not-Ready windows, in the order seen.
func (r *readyRecorder) windows(name string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.gone[name])
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))].Round(time.Millisecond)
}
