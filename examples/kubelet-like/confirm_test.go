package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/status"
)

// TestConfirmWithinRevertsInRealTime is the confirm-or-revert deadline on
// the real clock, in real processes under a restart loop, with no API
// server at all (a directory source): a config the built-in HTTP probe of
// /healthz confirms is promoted; a config that keeps the component up but
// never healthy (the demo hook) is reverted to it once --confirm-within has
// passed since it first ran, not before, and within a wall budget.
func TestConfirmWithinRevertsInRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes on the real clock")
	}
	const within = 3 * time.Second
	bin := testBinary.Build(t)
	n := node{proctest.NewNode(t)}
	initFile := n.File("init.yaml")
	proctest.WriteFile(t, initFile, kubeletDoc(fmt.Sprintf("maxPods: %d", initMaxPods)))
	good := remoteConfig{name: "kubelet-good", uid: "c0000000-0000-4000-8000-0000000000a1", trial: "1s", threshold: 3,
		payload: kubeletDoc("maxPods: 61")}
	never := remoteConfig{name: "kubelet-never-healthy", uid: "c0000000-0000-4000-8000-0000000000a2", trial: "10m", threshold: 3,
		payload: kubeletDoc("maxPods: 62", "providerID: "+DemoNeverHealthyProviderID)}
	n.put(t, good)
	n.assign(t, good)
	l := proctest.StartLoop(t, bin, n.Args("--config="+initFile, "--confirm-within="+within.String()), nil)
	waitStatus(t, n, l, "the good config", func(c app.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Message == status.CurrentMessage(status.Ref{UID: good.uid}, status.LocalInit)
	})
	proctest.WaitFor(t, "the good config confirmed by the /healthz probe and promoted", func() (bool, string) {
		rec, err := checkpoint.InspectConfirmation(n.StateDir())
		lkg, lerr := n.lastKnownGoodUID()
		return err == nil && !rec.Confirmed.IsZero() && lerr == nil && lkg == good.uid, fmt.Sprintf("record %+v (%v), last-known-good %q (%v)", rec, err, lkg, lerr)
	}, func() string { return proctest.DescribeProcs(l.All()) })

	n.put(t, never)
	n.assign(t, never)
	waitStatus(t, n, l, "the never-healthy config running", func(c app.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Message == status.CurrentMessage(status.Ref{UID: never.uid}, status.LocalInit)
	})
	running := time.Now() // no earlier than its first run
	serving := waitStatus(t, n, l, "the revert for want of a confirmation", func(c app.Condition) bool {
		return strings.HasPrefix(c.Reason, "failed to confirm current (UID: "+string(never.uid)+") healthy")
	})
	took := time.Since(running)
	load, _ := exec.Command("uptime").Output()
	t.Logf("reverted %v after the never-healthy config was seen running (deadline %v); %s", took.Round(time.Millisecond), within, strings.TrimSpace(string(load)))
	// proctest.WaitFor's own bound is the wall budget of the whole wait;
	// never before the deadline, measured from a moment after the first run.
	if took < within-time.Second {
		t.Errorf("reverted %v after the config ran, before the deadline %v", took, within)
	}
	got, _, err := n.ReadStatus()
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != corev1.ConditionFalse || got.Message != status.LastKnownGoodMessage(status.Ref{UID: good.uid}, status.LocalInit) || got.PID != serving.PID() {
		t.Errorf("after the revert: %+v; want False on the good last-known-good config", got)
	}
	z, err := getConfigz(serving.ServingAddr())
	if err != nil {
		t.Fatal(err)
	}
	if z.KubeletConfig.MaxPods != 61 {
		t.Errorf("/configz serves maxPods %d after the revert, want the good config's 61", z.KubeletConfig.MaxPods)
	}
}
