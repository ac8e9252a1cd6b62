#!/usr/bin/env bash
# golden.sh rebuilds golden.jsonl: the Node annotation values that the
# encoders of earlier commits wrote, produced by running those encoders
# (each commit's tree from git, with a small test file added) on the fixed
# inputs that TestGoldenValues expects back. Run from anywhere in the repo:
#
#	nodeapi/testdata/golden.sh
#
# It needs the full git history (a shallow clone fails, saying so) and the
# module cache or proxy for the commits' go.mod (today all the same).
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
out=$repo/nodeapi/testdata/golden.jsonl
if [ "$(git -C "$repo" rev-parse --is-shallow-repository)" = true ]; then
	echo "golden.sh: a shallow clone has not the commits to build from; run git fetch --unshallow" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The fixed inputs, spelt once for every commit's API (Go source).
inputs='
var gA = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "kubelet-v2", UID: "uid-v2", ResourceVersion: "42", KubeletConfigKey: "kubelet"}}
var gB = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "kubelet-v1", UID: "uid-v1", ResourceVersion: "7", KubeletConfigKey: "kubelet"}}
var gPlanned = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ops", Name: "kubelet-v2", UID: "uid-v2", KubeletConfigKey: "kubelet"}}
var gT = metav1.NewTime(time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC))

func goldenEmit(t *testing.T, writer, name string, v string, err error) {
	if err != nil {
		t.Fatalf("%s %s: %v", writer, name, err)
	}
	f, err := os.OpenFile(os.Getenv("GOLDEN_OUT"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, _ := json.Marshal(map[string]string{"commit": os.Getenv("GOLDEN_COMMIT"), "writer": writer, "name": name, "value": v})
	f.Write(append(line, 10))
}
'
imports='
	"encoding/json"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
'

# status writes the statuses with package $2's ConfigStatus (phases $3...).
statusTest() {
	local pkg=$1 withSyncFailed=$2
	cat <<GO
package $pkg

import ($imports)
$inputs
func TestZZGolden(t *testing.T) {
	w := "$pkg.ConfigStatus.MarshalAnnotation"
	for name, s := range map[string]*ConfigStatus{
		"status/local":      {Phase: PhaseLocal},
		"status/trial":      {Assigned: gA, Active: gA, LastKnownGood: gB, Phase: PhaseTrial, TrialEnds: &gT},
		"status/promoted":   {Assigned: gA, Active: gA, LastKnownGood: gA, Phase: PhasePromoted},
		"status/rolledback": {Assigned: gA, Active: gB, LastKnownGood: gB, Error: "failed to validate config: maxPods: must be positive", Phase: PhaseRolledBack},
		"status/deadend":    {Assigned: gA, Error: "the last-known-good config crash-loops too", Phase: PhaseDeadEnd},
	} {
		v, err := s.MarshalAnnotation()
		goldenEmit(t, w, name, v, err)
	}
	$( [ "$withSyncFailed" = yes ] && echo 'v, err := (&ConfigStatus{Assigned: gA, Active: gB, LastKnownGood: gB, Error: "failed to sync: the API server did not answer", Phase: PhaseSyncFailed}).MarshalAnnotation()
	goldenEmit(t, w, "status/syncfailed", v, err)' )
}
GO
}

claimTest() {
	cat <<GO
package nodeapi

import ($imports)
$inputs
func TestZZGolden(t *testing.T) {
	for name, c := range map[string]*Claim{
		"claim/moved":  {Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: gB, AssignedAt: gT, Step: 2},
		"claim/local":  {Namespace: "ops", Name: "roll-1", UID: "ro-uid", AssignedAt: gT},
		"claim/failed": {Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: gB, AssignedAt: gT, Step: 1, Failed: "kubelet reports RolledBack: failed to validate config"},
	} {
		v, err := EncodeClaim(c)
		goldenEmit(t, "nodeapi.EncodeClaim", name, v, err)
	}
}
GO
}

# claimGatesTest writes a claim with the health gates' memory
# (Claim.Gates), from the commit that added it on.
claimGatesTest() {
	cat <<GO
package nodeapi

import ($imports
	"k8s.io/apimachinery/pkg/types"
)
$inputs
func TestZZGolden(t *testing.T) {
	soak := metav1.NewTime(gT.Add(10 * time.Minute))
	until := metav1.NewTime(gT.Add(25 * time.Minute))
	v, err := EncodeClaim(&Claim{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: gB, AssignedAt: gT, Step: 1, HoldUntil: &until,
		Gates: &GateMemory{SoakStarted: &soak, Pods: BaselineOf([]types.UID{"uid-f1"}, []types.UID{"uid-r1", "uid-r2"})}})
	goldenEmit(t, "nodeapi.EncodeClaim", "claim/gates", v, err)
}
GO
}

encodeAssignmentTest() {
	cat <<GO
package nodeapi

import ($imports)
$inputs
func TestZZGolden(t *testing.T) {
	v, err := EncodeAssignment(gA)
	goldenEmit(t, "nodeapi.EncodeAssignment", "assignment/full", v, err)
}
GO
}

ctlTest() {
	cat <<GO
package main

import ($imports)
$inputs
func TestZZGolden(t *testing.T) {
	v, err := assignmentJSON(gA)
	goldenEmit(t, "dynconfigctl assign", "assignment/full", v, err)
}
GO
}

planTest() {
	cat <<GO
package plan

import ($imports
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)
$inputs
func TestZZGolden(t *testing.T) {
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "roll-1"}}
	ro.Spec.ConfigMapName = "kubelet-v2"
	p := &planner{r: ro}
	p.setOurs("uid-v2")
	goldenEmit(t, "rollout/plan (planner.setOurs)", "assignment/planned", p.oursJSON, nil)
}
GO
}

# preflightTest writes the pre-flight request and a status that answers
# one (the first fields added under the skew rule).
preflightTest() {
	cat <<GO
package nodeapi

import ($imports)
$inputs
func TestZZGolden(t *testing.T) {
	v, err := EncodePreflightRequest(&PreflightRequest{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Candidate: gA})
	goldenEmit(t, "nodeapi.EncodePreflightRequest", "preflight/request", v, err)
	for name, s := range map[string]*ConfigStatus{
		"status/preflight-overridden": {Assigned: gB, Active: gB, LastKnownGood: gB, Phase: PhasePromoted,
			Preflight: &PreflightResult{Candidate: gA, Verdict: PreflightOverridden, Fields: []string{"maxPods (by /etc/kubernetes/kubelet.conf.d/zz-local.conf)"}}},
		"status/preflight-fail": {Phase: PhaseLocal, Preflight: &PreflightResult{Candidate: gA, Verdict: PreflightFail, Message: "maxPods: must be positive"}},
	} {
		v, err := s.MarshalAnnotation()
		goldenEmit(t, "nodeapi.ConfigStatus.MarshalAnnotation", name, v, err)
	}
}
GO
}

# run COMMIT DIR GENERATOR [ARGS]: the generator's test file in DIR of
# COMMIT's tree, run.
run() {
	local commit=$1 dir=$2 gen=$3
	shift 3
	local full
	full=$(git -C "$repo" rev-parse "$commit^{commit}")
	local src=$tmp/$full
	if [ ! -d "$src" ]; then
		mkdir -p "$src"
		git -C "$repo" archive "$full" | tar -x -C "$src"
	fi
	"$gen" "$@" >"$src/$dir/zz_golden_test.go"
	(cd "$src" && GOLDEN_OUT=$tmp/out.jsonl GOLDEN_COMMIT=$full go test -count=1 -run '^TestZZGolden$' "./$dir" >/dev/null)
	rm "$src/$dir/zz_golden_test.go"
}

: >"$tmp/out.jsonl"
# dynconfigctl assign, its first commit; the planner, the first commit where
# it builds (5e6e5c1, which added it, needs 12b9443's status.ConfigStatus).
run 2e1dfaf cmd/dynconfigctl ctlTest
run 12b9443 rollout/plan planTest
# ConfigStatus, first written by package status; then by nodeapi (SyncFailed).
run 12b9443 status statusTest status no
run 4eb66aa nodeapi statusTest nodeapi yes
run 4eb66aa nodeapi encodeAssignmentTest
# The claim, its first commit and the one that renamed its annotation.
run 5b70df5 nodeapi claimTest
run 1951306 nodeapi claimTest
# The newest commit before the skew rule (0a61e24, where this file's
# branch started): every encoder of that tree.
base=0a61e24
run $base nodeapi statusTest nodeapi yes
run $base nodeapi claimTest
run $base nodeapi encodeAssignmentTest
run $base cmd/dynconfigctl ctlTest
run $base rollout/plan planTest
# The commit that added the pre-flight fields (an older reader ignores
# them: TestGoldenValues checks that this version still reads them).
run 59b835c nodeapi preflightTest
# The health gates' memory in the claim (Claim.Gates), its first commit.
run 393f2d3 nodeapi claimGatesTest
sort -o "$out" "$tmp/out.jsonl"
echo "golden.sh: wrote $(wc -l <"$out") values to $out"
