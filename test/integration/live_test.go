package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/status"
)

// TestControllerLiveInvalid proves that an invalid assignment seen by a
// running component (Run going, a good config running) only changes the
// condition to Unknown: no restart, no reload, current unchanged. Setting
// the good assignment back makes the condition True again, still without a
// restart.
func TestControllerLiveInvalid(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)

	noKey := h.createConfigMap(ctx, t, configMapSpec{name: "live-nokey", data: map[string]string{"config": kubeletPayload(43)}})
	ref := func(namespace, name string, uid types.UID) string {
		return mustJSON(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: namespace, Name: name, UID: uid}})
	}
	const wrongUID = "00000000-0000-0000-0000-000000000002"

	tests := []struct {
		name       string
		annotation func(good *corev1.ConfigMap) string
		cause      func(good *corev1.ConfigMap) string
	}{
		{
			name:       "all nil",
			annotation: func(*corev1.ConfigMap) string { return `{}` },
			cause: func(*corev1.ConfigMap) string {
				return "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"
			},
		},
		{
			name:       "missing uid",
			annotation: func(g *corev1.ConfigMap) string { return ref(namespace, g.Name, "") },
			cause: func(*corev1.ConfigMap) string {
				return "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid"
			},
		},
		{
			name:       "missing namespace",
			annotation: func(g *corev1.ConfigMap) string { return ref("", g.Name, g.UID) },
			cause: func(*corev1.ConfigMap) string {
				return "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: namespace"
			},
		},
		{
			name:       "missing name",
			annotation: func(g *corev1.ConfigMap) string { return ref(namespace, "", g.UID) },
			cause: func(*corev1.ConfigMap) string {
				return "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: name"
			},
		},
		{
			name:       "wrong uid",
			annotation: func(g *corev1.ConfigMap) string { return ref(namespace, g.Name, wrongUID) },
			cause: func(g *corev1.ConfigMap) string {
				return fmt.Sprintf("invalid NodeConfigSource.ConfigMap, uid %s and default/%s do not refer to the same object (its uid is %s)", wrongUID, g.Name, g.UID)
			},
		},
		{
			name:       "missing key",
			annotation: func(*corev1.ConfigMap) string { return assignmentFor(noKey) },
			cause: func(*corev1.ConfigMap) string {
				return fmt.Sprintf(`ConfigMap default/%s (UID: %s) has no key "kubelet"`, noKey.Name, noKey.UID)
			},
		},
		{
			name:       "absent ConfigMap",
			annotation: func(*corev1.ConfigMap) string { return ref(namespace, "live-absent", wrongUID) },
			cause:      func(*corev1.ConfigMap) string { return "ConfigMap default/live-absent does not exist" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []struct {
				name   string
				reload bool
			}{{"restart", false}, {"reload", true}} {
				t.Run(mode.name, func(t *testing.T) {
					good := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "good"), maxPods: 42})
					n := h.newNode(ctx, t)
					n.assign(ctx, t, good)
					p := n.start(ctx, t, processOptions{reload: mode.reload})
					wantMaxPods(t, "config returned by Bootstrap", p.cfg, 42)
					p.run(ctx)
					n.waitReport(ctx, t, currentReport(good))

					bad := tt.annotation(good)
					n.annotate(ctx, t, &bad)
					n.waitReport(ctx, t, syncFailedReport("using current (UID: "+string(good.UID)+")", tt.cause(good)))
					p.noRestartOrReload(t)
					wantPointer(t, n.dir, "current", good.UID, good.ResourceVersion)
					if diff := cmp.Diff([]string{checkpointKey(good)}, checkpoints(t, n.dir)); diff != "" {
						t.Errorf("checkpoints after the invalid assignment (-want +got):\n%s", diff)
					}

					n.assign(ctx, t, good)
					n.waitReport(ctx, t, currentReport(good))
					p.noRestartOrReload(t)
				})
			}
		})
	}
}

// TestControllerLiveChanges covers the changes a running component acts
// on: a new assignment (a restart, preceded by a ConfigChanged Event), an
// in-place edit of the assigned ConfigMap (a new checkpoint), and a
// ConfigMap deleted and recreated (a new UID: unclear until re-assigned).
// A restart is a new Controller over the same state dir.
func TestControllerLiveChanges(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)

	t.Run("new assignment restarts after a ConfigChanged event", func(t *testing.T) {
		cm := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "cm"), maxPods: 50})
		n := h.newNode(ctx, t)

		// The Restart hook looks for the Event: it must exist before the
		// process goes away. It runs on Run's goroutine, so it only records.
		var atRestart []corev1.Event
		var listErr error
		p := n.start(ctx, t, processOptions{onRestart: func() {
			atRestart, listErr = listEvents(ctx, h, n.name, status.EventReasonConfigChanged)
		}})
		n.wantReport(ctx, t, localDefaultReport())
		wantMaxPods(t, "local config", p.cfg, 110)
		p.run(ctx)

		n.assign(ctx, t, cm)
		p.waitRestart(t)
		if listErr != nil {
			t.Fatalf("listing events in the restart hook: %v", listErr)
		}
		want := fmt.Sprintf("config changed to ConfigMap default/%s (UID: %s, resourceVersion: %s), restarting", cm.Name, cm.UID, cm.ResourceVersion)
		if got := eventMessages(atRestart); !slices.Equal(got, []string{want}) {
			t.Errorf("ConfigChanged events when Restart was called: %q, want [%q]", got, want)
		}
		for _, ev := range atRestart {
			if ev.Type != corev1.EventTypeNormal || ev.Source.Component != "kubelet" || ev.InvolvedObject.Kind != "Node" {
				t.Errorf("event %s: type %s, source %s, involved %s; want Normal, kubelet, Node", ev.Name, ev.Type, ev.Source.Component, ev.InvolvedObject.Kind)
			}
		}
		wantPointer(t, n.dir, "current", cm.UID, cm.ResourceVersion)
		p.stop()

		p2 := n.start(ctx, t, processOptions{})
		n.wantReport(ctx, t, currentReport(cm))
		wantMaxPods(t, "config after the restart", p2.cfg, 50)
	})

	t.Run("in-place edit is a new checkpoint and a restart", func(t *testing.T) {
		cm := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "cm"), maxPods: 60})
		n := h.newNode(ctx, t)
		n.assign(ctx, t, cm)
		p := n.start(ctx, t, processOptions{})
		n.wantReport(ctx, t, currentReport(cm))
		p.run(ctx)

		cm.Data[kubelet.PayloadKey] = kubeletPayload(61)
		edited, err := h.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("editing ConfigMap: %v", err)
		}
		if edited.UID != cm.UID || edited.ResourceVersion == cm.ResourceVersion {
			t.Fatalf("edit: uid %s rv %s, was uid %s rv %s; want the same uid and a new rv", edited.UID, edited.ResourceVersion, cm.UID, cm.ResourceVersion)
		}
		p.waitRestart(t)
		wantPointer(t, n.dir, "current", cm.UID, edited.ResourceVersion)
		if got := checkpoints(t, n.dir); !slices.Contains(got, checkpointKey(edited)) {
			t.Errorf("checkpoints %q do not hold the edited version %s", got, checkpointKey(edited))
		}
		p.stop()

		p2 := n.start(ctx, t, processOptions{})
		n.wantReport(ctx, t, currentReport(cm))
		wantMaxPods(t, "config after the restart", p2.cfg, 61)
		// The first version is referenced by neither pointer: Run's garbage
		// collection (off the startup path) removes it.
		p2.run(ctx)
		deadline := time.Now().Add(waitTimeout)
		for !cmp.Equal([]string{checkpointKey(edited)}, checkpoints(t, n.dir)) && time.Now().Before(deadline) {
			time.Sleep(pollInterval)
		}
		if diff := cmp.Diff([]string{checkpointKey(edited)}, checkpoints(t, n.dir)); diff != "" {
			t.Errorf("checkpoints after the restart (-want +got):\n%s", diff)
		}
		p2.stop()
	})

	t.Run("deleted and recreated ConfigMap is unclear until re-assigned", func(t *testing.T) {
		name := objectName(t, "cm")
		old := h.createConfigMap(ctx, t, configMapSpec{name: name, maxPods: 70})
		n := h.newNode(ctx, t)
		n.assign(ctx, t, old)
		p := n.start(ctx, t, processOptions{})
		n.wantReport(ctx, t, currentReport(old))
		p.run(ctx)
		running := "using current (UID: " + string(old.UID) + ")"

		if err := h.client.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting ConfigMap: %v", err)
		}
		n.waitReport(ctx, t, syncFailedReport(running, "ConfigMap default/"+name+" does not exist"))
		recreated := h.createConfigMap(ctx, t, configMapSpec{name: name, maxPods: 71})
		if recreated.UID == old.UID {
			t.Fatalf("recreated ConfigMap kept UID %s", old.UID)
		}
		n.waitReport(ctx, t, syncFailedReport(running, fmt.Sprintf(
			"invalid NodeConfigSource.ConfigMap, uid %s and default/%s do not refer to the same object (its uid is %s)", old.UID, name, recreated.UID)))
		p.noRestartOrReload(t)
		wantPointer(t, n.dir, "current", old.UID, old.ResourceVersion)

		n.assign(ctx, t, recreated)
		p.waitRestart(t)
		wantPointer(t, n.dir, "current", recreated.UID, recreated.ResourceVersion)
		p.stop()

		p2 := n.start(ctx, t, processOptions{})
		n.wantReport(ctx, t, currentReport(recreated))
		wantMaxPods(t, "config after the restart", p2.cfg, 71)
	})
}
