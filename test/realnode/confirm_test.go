//go:build linux

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// confirmWithin is the --confirm-within both roles get in
// TestStockKubeletConfirmsWithoutTheAPIServer.
const confirmWithin = 20 * time.Second

// TestStockKubeletConfirmsWithoutTheAPIServer: with --confirm-within on
// both roles, a healthy config whose whole confirmation window passes with
// the API server stopped is confirmed by the node's own evidence (the
// kubelet's /healthz): the kubelet keeps running it, it is not marked bad,
// and once the API server is back it is reported and promoted. (The run
// role used to require the Node's Ready from the API server as well, so
// the outage reverted the config and marked it bad.) During its trial,
// ConfigOK and the Node's Events never call the sound last-known-good
// unusable (the run role once checked it on a state dir it had released).
func TestStockKubeletConfirmsWithoutTheAPIServer(t *testing.T) {
	cl, n := managedNode(t, fmt.Sprintf("--confirm-within=%v", confirmWithin))

	// A remote last-known-good first, so that the next trial has a
	// rollback target to check.
	good := n.configMap("confirm-good", "maxPods: 50\n", "5s", threshold)
	n.assign(good)
	n.eventually("the first config promoted", n.phase(nodeapi.PhasePromoted, good))
	n.lastKnownGoodIs(good)

	// The config whose confirmation window the API server misses. Its
	// trial is longer than the window: promotion ends a deadline.
	offline := n.configMap("confirm-offline", "maxPods: 40\n", "45s", threshold)
	before := len(n.sup.startsSoFar())
	n.assign(offline)
	// The run role checkpoints it, makes it current and stops the kubelet;
	// the supervisor starts it again RestartSec later. The API server stops
	// in between: the kubelet never runs the config with it up.
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(10 * time.Millisecond) {
		if st := n.sup.startsSoFar(); len(st) > before || st[before-1].exit != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run role did not restart the kubelet for %s\n%s", offline.Name, n.more())
		}
	}
	if err := cl.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	apiDown := true
	defer func() {
		if apiDown {
			_ = cl.RestartAPIServer()
		}
	}()
	var firstRun time.Time
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(10 * time.Millisecond) {
		st := n.sup.startsSoFar()
		if len(st) > before {
			if !strings.Contains(st[before].dropIn, "maxPods: 40") {
				t.Fatalf("the start after the restart ran %q, want %s\n%s", st[before].dropIn, offline.Name, n.more())
			}
			firstRun = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kubelet start on %s\n%s", offline.Name, n.more())
		}
	}
	t.Logf("API server stopped before the kubelet's first start on %s", offline.Name)
	// Across the whole window and 10 s past it: no other kubelet start.
	started := len(n.sup.startsSoFar())
	for end := firstRun.Add(confirmWithin + 10*time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if st := n.sup.startsSoFar(); len(st) != started {
			t.Fatalf("the kubelet was restarted (start %d ran %q) %v after its first start on %s, with the API server down: the config was reverted\n%s",
				len(st)-1, st[len(st)-1].dropIn, time.Since(firstRun).Round(time.Millisecond), offline.Name, n.more())
		}
	}
	if ok, why := n.healthz(); !ok {
		t.Fatalf("the kubelet is not healthy on %s after the window: %s\n%s", offline.Name, why, n.more())
	}
	n.notMarkedBad(offline)
	if _, err := os.Stat(filepath.Join(n.stateDir, "meta", "confirmed")); err != nil {
		t.Fatalf("no confirmation recorded while the API server was down: %v\n%s", err, n.more())
	}
	t.Logf("%s: still running, confirmed and not marked bad %v after its first start (window %v), the API server down all along",
		offline.Name, time.Since(firstRun).Round(time.Millisecond), confirmWithin)

	if err := cl.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	apiDown = false
	n.eventually("Node Ready with capacity 40", n.ready(40, time.Now()))
	n.eventually("ConfigOK True on "+offline.Name, n.configOK(corev1.ConditionTrue, string(offline.UID), ""))
	// Still in its trial: the rollback target is checked now, and is sound.
	n.noUnusableLastKnownGood()
	n.eventually(offline.Name+" promoted", n.phase(nodeapi.PhasePromoted, offline))
	n.lastKnownGoodIs(offline)
	if st := n.sup.startsSoFar(); len(st) != started {
		t.Fatalf("%d kubelet starts, want %d: no restart after the first start on %s\n%s", len(st), started, offline.Name, n.more())
	}
	n.noUnusableLastKnownGood()
	n.notMarkedBad(offline)
}

// notMarkedBad fails the test when the state dir holds a bad mark of cm.
func (n *realNode) notMarkedBad(cm *corev1.ConfigMap) {
	n.t.Helper()
	snap, err := checkpoint.Inspect(n.stateDir)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, tr := range snap.Tracking {
		for key, m := range tr.BadMarks {
			if strings.HasPrefix(key, string(cm.UID)+"/") {
				n.t.Fatalf("%s is marked bad (%s): %s\n%s", cm.Name, key, m.Reason, n.more())
			}
		}
	}
}

// noUnusableLastKnownGood fails the test when ConfigOK or an Event on the
// Node calls the last-known-good unusable.
func (n *realNode) noUnusableLastKnownGood() {
	n.t.Helper()
	node, err := n.node()
	if err != nil {
		n.t.Fatal(err)
	}
	if c := condition(node, "ConfigOK"); c != nil && (strings.Contains(c.Message, "unusable") || strings.Contains(c.Reason, "unusable")) {
		n.t.Fatalf("ConfigOK calls the last-known-good unusable: %q %q", c.Message, c.Reason)
	}
	evs, err := n.cl.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", n.name).String(),
	})
	if err != nil {
		n.t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == status.EventReasonLastKnownGoodUnusable {
			n.t.Fatalf("Event %s on the Node: %s", e.Reason, e.Message)
		}
	}
}

// managedNode starts the test's cluster, the real node's containerd and its
// kubelet under the supervisor, waits until the Node is Ready on its own
// config, and starts the run role, until ConfigOK says so; extra flags go to
// both roles.
func managedNode(t *testing.T, extra ...string) (*cluster.Cluster, *realNode) {
	t.Helper()
	kubeletBin := requirements(t)
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	if _, err := cl.ApplyManifests(context.Background(), filepath.Join("..", "..", "deploy", "config-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	n := newRealNode(t, cl, kubeletBin)
	n.startContainerd(true)
	t0 := time.Now()
	n.startSupervisor(extra...)
	n.eventually("Node Ready on the local config", n.ready(110, t0))
	n.startFollow(extra...)
	n.eventually("ConfigOK True on the local config", n.configOK(corev1.ConditionTrue, "init", ""))
	return cl, n
}
