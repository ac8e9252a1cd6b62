//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestGateMemoryAcrossLeaderChange runs the dynconfig-rollout binary with
// leader election over two simulated nodes (their components promote
// outright after a 1 s trial) and a rollout with a 60 s soak and a pods
// gate, then SIGKILLs the controller halfway through the soak and starts
// another replica, which takes the Lease:
//
//   - node 000's soak is not started again: its claim keeps the soak
//     start the first leader wrote, and the second leader passes it before
//     a soak started at its own acquisition of the Lease could have ended
//     (claim.passed < Lease acquireTime + soak);
//   - node 001 had a Ready pod when it was assigned; the pod fails while
//     no controller runs (after the assignment, before the second leader's
//     first check). The second leader judges it against the baseline of
//     the assignment's claim, and fails the node. Taking the baseline at
//     its first check, it would find the pod failed already and pass it.
//
// The rollout allows one failure, so that the failed node does not halt it
// and revert node 000 before its soak ends.
func TestGateMemoryAcrossLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes: skipped with -short")
	}
	const soak = 60 * time.Second
	bin := rolloutBin.Build(t)
	h := newHarness(t)
	ctx := testContext(t, 6*time.Minute)
	installRolloutCRD(ctx, t, h)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, h.cl.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	f := startFleet(ctx, t, h, "gmem", 2, nil)
	soaked, broken := f.names[0], f.names[1]

	// A Ready pod on the node whose pods will break (no kubelet runs on a
	// simulated node: the test writes the pod's status as one would).
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(t, "web"), Namespace: namespace, Labels: map[string]string{"gatemem-test": "true"}},
		Spec:       corev1.PodSpec{NodeName: broken, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	web, err := h.client.CoreV1().Pods(namespace).Create(ctx, web, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	web.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if web, err = h.client.CoreV1().Pods(namespace).UpdateStatus(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	beforePatches := nodePatchCounts(ctx, t, h)
	lease := objectName(t, "lease")
	lw := watchLease(ctx, t, h, lease)
	first := startReplicas(t, bin, kubeconfig, lease, f.label, "a")["a"]
	lw.waitHolder(t, "replica a holds the Lease", func(id string) bool { return id == "a" })
	name := f.rollout("soak", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		s.MaxFailures = 1
		s.ProgressDeadlineSeconds = ptr.To(int32(300))
		s.Analysis = &v1alpha1.RolloutAnalysis{
			Soak: &metav1.Duration{Duration: soak},
			Pods: &v1alpha1.PodAnalysis{
				MaxNewFailures: ptr.To(int32(0)),
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"gatemem-test": "true"}},
			},
		}
	})
	logRolloutOnFailure(ctx, t, f, name)

	// Both nodes promoted and soaking: their claims carry the soak start
	// and the pod baseline (one Ready pod on the broken node).
	var claims map[string]*nodeapi.Claim
	pollUntil(t, "both nodes soaking, with their soak start in their claims", func() (bool, string) {
		ro, err := f.get(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		claims = f.claims(ctx, ro)
		for _, n := range f.names {
			if c := claims[n]; c == nil || c.Gates == nil || c.Gates.SoakStarted == nil {
				return false, fmt.Sprintf("claims %v", describeClaims(claims))
			}
		}
		return true, ""
	}, func() string { return "" })
	start := claims[soaked].Gates.SoakStarted.Time
	for _, n := range f.names {
		c := claims[n]
		if c.Passed != nil || c.Failed != "" {
			t.Fatalf("node %s settled before the kill: %s", n, describeClaims(claims))
		}
		if c.Gates.Pods == nil {
			t.Fatalf("node %s's claim carries no pod baseline: %s", n, describeClaims(claims))
		}
	}
	if _, ready, err := claims[broken].Gates.Pods.Keys(); err != nil || len(ready) != 1 || !ready[nodeapi.PodKeyOf(web.UID)] {
		t.Fatalf("node %s's baseline: ready %v (%v), want pod %s", broken, ready, err, web.Name)
	}

	// Halfway through the soak, the leader dies; the pod fails while no
	// controller runs; another replica starts and takes the Lease.
	for time.Now().Before(start.Add(soak / 2)) {
		time.Sleep(200 * time.Millisecond)
	}
	first.Kill()
	web.Status.Phase, web.Status.Reason = corev1.PodFailed, "OutOfpods"
	web.Status.Conditions[0].Status, web.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.Now()
	if _, err := h.client.CoreV1().Pods(namespace).UpdateStatus(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	startReplicas(t, bin, kubeconfig, lease, f.label, "b")
	lw.waitHolder(t, "replica b takes the Lease", func(id string) bool { return id == "b" })
	l, err := h.client.CoordinationV1().Leases(metav1.NamespaceDefault).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != "b" || l.Spec.AcquireTime == nil {
		t.Fatalf("Lease %s: holder %q, acquired %v", lease, ptr.Deref(l.Spec.HolderIdentity, ""), l.Spec.AcquireTime)
	}
	acquired := l.Spec.AcquireTime.Time
	t.Logf("soak of %s started %s; replica a killed, b acquired the Lease %v into the soak", soaked, start.Format(time.RFC3339), acquired.Sub(start).Round(time.Second))

	ro := f.waitPhase(ctx, name, v1alpha1.PhaseCompleted)
	logHistory(t, ro)
	if len(ro.Status.Failures) != 1 || ro.Status.Failures[0].Node != broken ||
		!strings.Contains(ro.Status.Failures[0].Reason, "health gate pods: 1 pods newly failed") ||
		!strings.Contains(ro.Status.Failures[0].Reason, web.Name+" (OutOfpods)") {
		t.Errorf("failures %+v, want %s failed by the pods gate: pod %s failed after its assignment", ro.Status.Failures, broken, web.Name)
	}
	c := f.claims(ctx, ro)[soaked]
	if c == nil || c.Passed == nil || c.Gates == nil || c.Gates.SoakStarted == nil {
		t.Fatalf("node %s's claim after the rollout: %+v, want it passed with its soak start", soaked, c)
	}
	if got := c.Gates.SoakStarted.Time; !got.Equal(start) {
		t.Errorf("node %s's soak start moved from %s to %s across the leader change", soaked, start.Format(time.RFC3339), got.Format(time.RFC3339))
	}
	passed := c.Passed.Time
	if passed.Before(start.Add(soak)) {
		t.Errorf("node %s passed at %s, before its soak of %v from %s ended", soaked, passed.Format(time.RFC3339), soak, start.Format(time.RFC3339))
	}
	if !passed.Before(acquired.Add(soak)) {
		t.Errorf("node %s passed at %s, not before %s: its soak started again when replica b took the Lease at %s (soak start on the claim %s)",
			soaked, passed.Format(time.RFC3339), acquired.Add(soak).Format(time.RFC3339), acquired.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	t.Logf("node %s: soak %s..%s, passed %v after the soak's end; failures %+v", soaked, start.Format(time.RFC3339),
		start.Add(soak).Format(time.RFC3339), passed.Sub(start.Add(soak)).Round(time.Second), ro.Status.Failures)
	// The writes: per node its assignment (the baseline in its claim), its
	// soak start (the simulated components promote outright: one write
	// each that a held node does without), and its pass or its failure.
	p := nodePatchCounts(ctx, t, h).sub(beforePatches)
	t.Logf("Node PATCHes by response code: %v", p)
	if p.applied() != 6 {
		t.Errorf("%d Node PATCHes applied (by code %v), want 6: two assignments, two soak starts, a pass and a failure", p.applied(), p)
	}
}

// describeClaims shows what the gates of each claim say.
func describeClaims(claims map[string]*nodeapi.Claim) string {
	var b strings.Builder
	for n, c := range claims {
		fmt.Fprintf(&b, "%s: passed %v failed %q", n, c.Passed, c.Failed)
		if g := c.Gates; g != nil {
			fmt.Fprintf(&b, " soakStarted %v pods %v", g.SoakStarted, g.Pods != nil)
		}
		b.WriteString("; ")
	}
	return b.String()
}
