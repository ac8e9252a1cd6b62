package main

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
	"github.com/dynconfig/dynconfig/source"
)

// TestOneReadingOfTheAssignment (issue 24): the node (source.NodeSource),
// the rollout planner and dynconfigctl status read the same assignment
// annotation values the same way: no assignment, this ConfigMap, or
// invalid. Before, the planner disagreed with the node on 11 of 17 values
// (blank, null, wrong case, no uid, ...).
func TestOneReadingOfTheAssignment(t *testing.T) {
	const valid = `{"configMap":{"namespace":"ns","name":"old","uid":"old-uid","kubeletConfigKey":"kubelet"}}`
	for _, v := range []string{
		"", " ", "\t\n", "null", " null ", "NULL", "nil",
		valid, " " + valid + "\n",
		`{"configMap":{"namespace":"ns","name":"old","uid":"old-uid"}}`,
		`{"ConfigMap":{"namespace":"ns","name":"old","uid":"old-uid"}}`,
		`{"configMap":{"namespace":"ns","name":"old","UID":"old-uid"}}`,
		`{"configMap":{"namespace":"ns","name":"old"}}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":""}}`,
		`{}`, `{"configMap":null}`, `{"configMap":{}}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":"old-uid","uid":"x"}}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":"old-uid","extra":1}}`,
		valid + ` {}`, `[]`, `"x"`, `0`, `{`,
	} {
		t.Run(v, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{nodeapi.AssignmentAnnotation: v}}}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old", UID: "old-uid", ResourceVersion: "5"},
				Data: map[string]string{"kubelet": "{}"}}

			// The node.
			ns, err := source.NewNode(source.NodeOptions{Client: fake.NewClientset(node, cm), NodeName: "n1", PayloadKey: "kubelet"})
			if err != nil {
				t.Fatal(err)
			}
			a, err := ns.Assigned(context.Background())
			var ie *nodeapi.InvalidError
			if err != nil && !errors.As(err, &ie) {
				t.Fatalf("node: %v is not an *InvalidError", err)
			}
			nodeSays := answer(a.Source, err)

			// dynconfigctl status.
			src, _, err := assignmentOf(node, nodeapi.DefaultComponent)
			ctlSays := answer(src, err)

			r := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid", Generation: 1},
				Spec: v1alpha1.ConfigRolloutSpec{ConfigMapName: "new", MaxFailures: 1,
					Steps: []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromString("100%"))}}}}
			value := v
			res := plan.Plan(plan.Input{Rollout: r, Now: time.Now(),
				ConfigMap: &plan.ConfigMap{UID: "new-uid", ResourceVersion: "9", HasKey: true, Immutable: true},
				Nodes:     []plan.Node{{Name: "n1", Selected: true, Assignment: &value, Status: &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal}}}})
			// The planner: an invalid value is left alone (no assignment
			// patch); any other is recorded in the claim as the source to
			// put back.
			planSays := "invalid"
			for _, p := range res.Patches {
				if p.Node != "n1" || p.ClaimOnly || p.Claim == nil {
					continue
				}
				claim, err := nodeapi.DecodeClaim(*p.Claim)
				if err != nil {
					t.Fatalf("planner: claim %q: %v", *p.Claim, err)
				}
				planSays = answer(claim.Previous, nil)
			}

			if nodeSays != ctlSays || nodeSays != planSays {
				t.Fatalf("%q: node says %s, dynconfigctl %s, planner %s", v, nodeSays, ctlSays, planSays)
			}
		})
	}
}

// answer is what a reader made of an assignment: "none", "invalid" or the
// ConfigMap it names (without the resourceVersion the node resolves).
func answer(src *corev1.NodeConfigSource, err error) string {
	switch {
	case err != nil:
		return "invalid"
	case src == nil:
		return "none"
	}
	cm := src.ConfigMap
	return cm.Namespace + "/" + cm.Name + "/" + string(cm.UID)
}

// TestProfilesAgreeWithTheKeyTable: the payload key a built-in profile reads
// is the one nodeapi's table (what assign and rollouts write) gives its
// component.
func TestProfilesAgreeWithTheKeyTable(t *testing.T) {
	for _, p := range profiles {
		if key, ok := nodeapi.DefaultPayloadKey(p.component); !ok || key != p.payloadKey {
			t.Errorf("component %s: profile key %q, nodeapi.DefaultPayloadKey %q (%v)", p.component, p.payloadKey, key, ok)
		}
	}
}
