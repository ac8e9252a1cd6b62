package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestFleet: the rollout's safety checks and the fleet's memory on a real
// API server, with simulated nodes running the component (startFleet):
// nodes that do not run the component, immutable ConfigMaps only,
// known-bad configs refused, maintenance windows.
func TestFleet(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 15*time.Minute)
	installRolloutCRD(ctx, t, h)
	ctlBin := dynconfigctlBin.Build(t)
	kubeconfig := writeKubeConfig(t, h.cl.Config)

	t.Run("nodes not running the component", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "nrun", 3, nil)
		// Two more nodes the selector matches, with no component on them.
		absent := []string{"ro-nrun-absent-0", "ro-nrun-absent-1"}
		for _, name := range absent {
			if _, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{f.label: "true"},
			}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		startRolloutController(ctx, t, h, "a", nil)
		ro := f.rollout("nrun", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		})
		got := f.waitFor(ctx, ro, "ComponentNotRunning", func(r *v1alpha1.ConfigRollout) bool {
			return conditionTrue(r, v1alpha1.ConditionComponentNotRunning)
		})
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionComponentNotRunning)
		if got.Status.NotRunning != 2 || !strings.Contains(c.Message, absent[0]) || !strings.Contains(c.Message, absent[1]) {
			t.Errorf("notRunning %d, condition %q", got.Status.NotRunning, c.Message)
		}
		f.wantEvent(ctx, ro, "ComponentNotRunning")
		// The old planner assigned them and failed them at the progress
		// deadline (60 s here), halting the rollout; now it completes on
		// the three that run the component.
		got = f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		if got.Status.Promoted != 3 || got.Status.Failed != 0 || got.Status.NotRunning != 2 {
			t.Fatalf("completed with %+v, notRunning %d", countsOf(got), got.Status.NotRunning)
		}
		claims := f.claims(ctx, got)
		for _, name := range absent {
			n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := n.Annotations[nodeapi.AssignmentAnnotation]; ok || claims[name] != nil {
				t.Errorf("node %s, which does not run the component, was touched: %v", name, n.Annotations)
			}
		}

		// A misspelt component: refused at once, saying why.
		typo := f.rolloutOf("typo", f.oldCM.Name, func(s *v1alpha1.ConfigRolloutSpec) {
			s.Component, s.PayloadKey = "kubelte", kubelet.PayloadKey
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		})
		got = f.waitFor(ctx, typo, "Refused", func(r *v1alpha1.ConfigRollout) bool { return conditionTrue(r, v1alpha1.ConditionRefused) })
		if got.Status.Phase != v1alpha1.PhasePending || !strings.Contains(got.Status.Message, `none of the 5 selected nodes runs component "kubelte"`) ||
			got.Status.ConfigMap != nil {
			t.Errorf("typo: phase %s, message %q", got.Status.Phase, got.Status.Message)
		}
	})

	t.Run("immutable ConfigMaps only", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "immut", 2, nil)
		startRolloutController(ctx, t, h, "a", nil)
		cm := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "mutable"), maxPods: 102, trial: rolloutTrial})
		direct := f.rolloutOf("direct", cm.Name, func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		})
		got := f.waitFor(ctx, direct, "Refused", func(r *v1alpha1.ConfigRollout) bool { return conditionTrue(r, v1alpha1.ConditionRefused) })
		if got.Status.Phase != v1alpha1.PhasePending || !strings.Contains(got.Status.Message, "is not immutable") ||
			!strings.Contains(got.Status.Message, `'{"immutable":true}'`) || len(f.claims(ctx, got)) != 0 {
			t.Fatalf("phase %s, message %q", got.Status.Phase, got.Status.Message)
		}

		// dynconfigctl rollout start (the built binary) refuses it too,
		// and makes it immutable when told to.
		sel := "--selector=" + f.label + "=true"
		start := []string{"rollout", "start", "immut-cli", "--configmap", cm.Name, sel, "--steps", "100%", "--progress-deadline", "60s",
			"--namespace", namespace, "--kubeconfig", kubeconfig}
		out, err := exec.CommandContext(ctx, ctlBin, start...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "is not immutable") || !strings.Contains(string(out), "--make-immutable") {
			t.Fatalf("start on a mutable ConfigMap: %v\n%s", err, out)
		}
		if out := runCtl(t, ctlBin, append(start, "--make-immutable")...); !strings.Contains(out, "configrollout "+namespace+"/immut-cli created") {
			t.Errorf("start --make-immutable printed %q", out)
		}
		now, err := h.client.CoreV1().ConfigMaps(namespace).Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.Immutable == nil || !*now.Immutable {
			t.Fatal("--make-immutable left the ConfigMap mutable")
		}
		// Now the config cannot be edited under a rollout at all.
		now.Data[kubelet.PayloadKey] = kubeletPayload(55)
		if _, err := h.client.CoreV1().ConfigMaps(namespace).Update(ctx, now, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("editing an immutable ConfigMap: %v, want Invalid", err)
		}
		// The refused rollout starts on its own (the older goes first),
		// on the immutable version, and so does the CLI's after it.
		got = f.waitPhase(ctx, direct, v1alpha1.PhaseCompleted)
		if got.Status.ConfigMap == nil || got.Status.ConfigMap.ResourceVersion == cm.ResourceVersion || got.Status.Promoted != 2 {
			t.Errorf("pinned %+v (the mutable version was %s), %+v", got.Status.ConfigMap, cm.ResourceVersion, countsOf(got))
		}
		f.waitPhase(ctx, "immut-cli", v1alpha1.PhaseCompleted)
		f.wantAll(ctx, now)
	})

	t.Run("config namespace policy", func(t *testing.T) {
		// deploy/configmap-policy.yaml: in the config namespace a
		// ConfigMap's data is not edited; its metadata is, and it may be
		// made immutable. Elsewhere nothing changes.
		ctx := testContext(t, 3*time.Minute)
		if _, err := h.cl.ApplyManifests(ctx, filepath.Join(deployDir, "config-namespace.yaml"), filepath.Join(deployDir, "configmap-policy.yaml")); err != nil {
			t.Fatal(err)
		}
		const configNS = "dynconfig-configs"
		cms := h.client.CoreV1().ConfigMaps(configNS)
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-v1"},
			Data: map[string]string{kubelet.PayloadKey: kubeletPayload(40)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A policy is enforced shortly after it is stored: edit until the
		// data edit is refused (each try a new value over the stored one).
		var editErr error
		try := 0
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			stored, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			try++
			stored.Data[kubelet.PayloadKey] = kubeletPayload(40 + try)
			_, editErr = cms.Update(ctx, stored, metav1.UpdateOptions{})
			return apierrors.IsForbidden(editErr), nil
		})
		if err != nil || !apierrors.IsForbidden(editErr) || !strings.Contains(editErr.Error(), "is not edited in place") {
			t.Fatalf("editing the data in the config namespace: %v (%v)", editErr, err)
		}
		before, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if before.Data[kubelet.PayloadKey] == kubeletPayload(40+try) {
			t.Fatalf("the refused edit was stored: %q", before.Data)
		}
		patch := func(body string) error {
			_, err := cms.Patch(ctx, cm.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
		if err := patch(`{"data":{"extra":"x"}}`); !apierrors.IsForbidden(err) {
			t.Errorf("adding a key: %v, want Forbidden", err)
		}
		if err := patch(`{"metadata":{"annotations":{"dynconfig.io/trial-duration":"5m"}}}`); err != nil {
			t.Errorf("annotating: %v", err)
		}
		if err := patch(`{"immutable":true}`); err != nil {
			t.Errorf("making it immutable: %v", err)
		}
		// kube-controller-manager's root-ca-cert-publisher keeps
		// kube-root-ca.crt in every namespace and updates its data when
		// the root CA changes: the policy must not stop a CA rotation.
		rootCA, err := cms.Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if apierrors.IsNotFound(err) { // no controller manager in this cluster: publish it as it would
			rootCA, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
				Data: map[string]string{"ca.crt": "old CA"}}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		rootCA.Data = map[string]string{"ca.crt": "rotated CA"}
		if _, err := cms.Update(ctx, rootCA, metav1.UpdateOptions{}); err != nil {
			t.Errorf("the root CA publisher's update of kube-root-ca.crt in the config namespace: %v", err)
		}
		// Outside the config namespace, ConfigMaps are not configs.
		other, err := h.client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: objectName(t, "app")},
			Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		other.Data["k"] = "w"
		if _, err := h.client.CoreV1().ConfigMaps(namespace).Update(ctx, other, metav1.UpdateOptions{}); err != nil {
			t.Errorf("editing a ConfigMap in %s: %v", namespace, err)
		}
	})

	t.Run("known-bad configs", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "kbad", 3, func(node string) bool { return node == "ro-kbad-000" })
		startRolloutController(ctx, t, h, "a", nil)
		first := f.rollout("first", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
			s.RevertOnHalt = ptr.To(false) // the canary stays on it, and says it is bad
		})
		f.waitPhase(ctx, first, v1alpha1.PhaseHalted)
		second := f.rollout("second", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		})
		got := f.waitFor(ctx, second, "Refused", func(r *v1alpha1.ConfigRollout) bool { return conditionTrue(r, v1alpha1.ConditionRefused) })
		for _, want := range []string{"is known bad", "ConfigRollout " + namespace + "/" + first + " halted on it (TooManyFailures", "1 nodes report it bad: ro-kbad-000 (RolledBack", "spec.allowKnownBad"} {
			if !strings.Contains(got.Status.Message, want) {
				t.Errorf("refusal %q does not say %q", got.Status.Message, want)
			}
		}
		if got.Status.Phase != v1alpha1.PhasePending || len(f.claims(ctx, got)) != 0 {
			t.Fatalf("phase %s, %d claims", got.Status.Phase, len(f.claims(ctx, got)))
		}
		// What dynconfigctl status --known-bad lists.
		out := runCtl(t, ctlBin, "status", "--known-bad", "--selector", f.label, "--kubeconfig", kubeconfig)
		for _, want := range []string{"Known-bad configs", fmt.Sprintf("ConfigMap %s/%s uid %s", namespace, f.newCM.Name, f.newCM.UID),
			"halted " + namespace + "/" + first + ": TooManyFailures", "1 nodes report it bad: ro-kbad-000 (kubelet RolledBack)"} {
			if !strings.Contains(out, want) {
				t.Errorf("dynconfigctl status --known-bad does not say %q:\n%s", want, out)
			}
		}

		// The halted rollout deleted: the node still says the config is
		// bad, and the fleet still refuses it.
		if err := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace).Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got = f.waitFor(ctx, second, "refused by the node's report alone", func(r *v1alpha1.ConfigRollout) bool {
			return r.Status.Phase == v1alpha1.PhasePending && !strings.Contains(r.Status.Message, first) && strings.Contains(r.Status.Message, "1 nodes report it bad")
		})
		// Forced: it starts (and meets the same failure).
		f.patchSpec(ctx, second, `{"spec":{"allowKnownBad":true}}`)
		got = f.waitFor(ctx, second, "started", func(r *v1alpha1.ConfigRollout) bool { return r.Status.ConfigMap != nil })
		if got.Status.ConfigMap.UID != f.newCM.UID {
			t.Errorf("pinned %+v", got.Status.ConfigMap)
		}
		f.waitPhase(ctx, second, v1alpha1.PhaseHalted)
	})

	t.Run("maintenance window", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "win", 2, nil)
		startRolloutController(ctx, t, h, "a", nil)
		// A window opening at the next whole minute (at least 15 s away,
		// to see the rollout wait), for 30 minutes.
		now := time.Now().UTC()
		open := now.Truncate(time.Minute).Add(time.Minute)
		if open.Sub(now) < 15*time.Second {
			open = open.Add(time.Minute)
		}
		win := v1alpha1.MaintenanceWindow{
			Days:  []v1alpha1.Weekday{v1alpha1.Weekday(open.Weekday().String()[:3])},
			Start: open.Format("15:04"), End: open.Add(30 * time.Minute).Format("15:04"), TimeZone: "UTC",
		}
		ro := f.rollout("win", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			s.Windows = []v1alpha1.MaintenanceWindow{win}
		})
		got := f.waitFor(ctx, ro, "Paused (or past the window's start)", func(r *v1alpha1.ConfigRollout) bool {
			return r.Status.Phase == v1alpha1.PhasePaused || time.Now().After(open)
		})
		if got.Status.Phase == v1alpha1.PhasePaused && time.Now().Before(open) {
			// Seen before the window opened: it waits, and says until when.
			if got.Status.NextWindow == nil || !got.Status.NextWindow.Time.Equal(open) || !strings.Contains(got.Status.Message, "outside the maintenance windows") ||
				len(f.claims(ctx, got)) != 0 {
				t.Fatalf("waiting: next %v (want %v), message %q", got.Status.NextWindow, open, got.Status.Message)
			}
		}
		f.wantEvent(ctx, ro, "OutsideWindow")
		// It goes on by itself when the window opens (planned again then):
		// every node assigned inside it.
		got = f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		claims := f.claims(ctx, got)
		if len(claims) != 2 {
			t.Fatalf("%d claims", len(claims))
		}
		for name, c := range claims {
			if c.AssignedAt.Time.Before(open) {
				t.Errorf("node %s assigned at %v, before the window opened at %v", name, c.AssignedAt.Time, open)
			}
		}
		f.wantEvent(ctx, ro, "Resumed")
		f.wantAll(ctx, f.newCM)
	})
}
