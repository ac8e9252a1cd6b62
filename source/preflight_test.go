package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig/nodeapi"
)

func preflightRequestValue(t *testing.T, cand *corev1.NodeConfigSource) string {
	t.Helper()
	v, err := nodeapi.EncodePreflightRequest(&nodeapi.PreflightRequest{Namespace: "ops", Name: "ro", UID: "ro-uid", Candidate: cand})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNodePreflight: the request on the Node is read and its candidate
// resolved by Resolve, like an assignment: found, it comes with its
// ConfigMap; a candidate the node could not run is an InvalidError; no
// request, or no PreflightAnnotation option, is none; a request that does
// not decode is an error naming the annotation.
func TestNodePreflight(t *testing.T) {
	key := nodeapi.PreflightAnnotationFor("kubelet")
	cand := resolvedRef("cfg", "new", "uid-new", "7", "kubelet")
	for _, tc := range []struct {
		name        string
		value       *string
		cms         []*corev1.ConfigMap
		off         bool
		wantReq     bool
		wantInvalid bool
		wantErr     string
	}{
		{name: "resolved", value: str(preflightRequestValue(t, cand)), cms: []*corev1.ConfigMap{cmap("cfg", "new", "uid-new", "7", map[string]string{"kubelet": "x"})}, wantReq: true},
		{name: "missing ConfigMap", value: str(preflightRequestValue(t, cand)), wantReq: true, wantInvalid: true},
		{name: "another uid", value: str(preflightRequestValue(t, cand)), cms: []*corev1.ConfigMap{cmap("cfg", "new", "uid-other", "9", map[string]string{"kubelet": "x"})}, wantReq: true, wantInvalid: true},
		{name: "no payload key", value: str(preflightRequestValue(t, cand)), cms: []*corev1.ConfigMap{cmap("cfg", "new", "uid-new", "7", map[string]string{"other": "x"})}, wantReq: true, wantInvalid: true},
		{name: "no request", value: nil},
		{name: "option off", value: str(preflightRequestValue(t, cand)), off: true},
		{name: "undecodable", value: str(`{"namespace":`), wantErr: "annotation " + key + " of Node " + testNodeName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(nil, nil)
			if tc.value != nil {
				n.Annotations = map[string]string{key: *tc.value}
			}
			client := fake.NewClientset(n)
			for _, cm := range tc.cms {
				if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			opts := NodeOptions{PreflightAnnotation: key}
			if tc.off {
				opts.PreflightAnnotation = ""
			}
			s := newNodeSource(t, client, opts)
			req, a, err := s.Preflight(context.Background())
			var inv *nodeapi.InvalidError
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			case tc.wantInvalid:
				if !errors.As(err, &inv) {
					t.Fatalf("err %v, want an InvalidError", err)
				}
			case err != nil:
				t.Fatal(err)
			}
			if (req != nil) != tc.wantReq {
				t.Fatalf("request %+v, want one: %v", req, tc.wantReq)
			}
			if tc.wantReq && !tc.wantInvalid && (a.ConfigMap == nil || a.Source.ConfigMap.ResourceVersion != "7" || *req.Candidate.ConfigMap != *cand.ConfigMap) {
				t.Fatalf("resolved %+v for request %+v", a, req)
			}
		})
	}
}

// TestNodePreflightChangeWakes: the slim cached Node keeps the request,
// and a change of it counts as a change (Run calls changed), as one of
// the assignment does; another annotation does not.
func TestNodePreflightChangeWakes(t *testing.T) {
	key := nodeapi.PreflightAnnotationFor("kubelet")
	s := newNodeSource(t, fake.NewClientset(), NodeOptions{PreflightAnnotation: key})
	n := testNode(str(""), nil)
	withReq := n.DeepCopy()
	withReq.Annotations[key] = "v1"
	slim, _ := s.slimNode(withReq)
	if got := slim.(*corev1.Node).Annotations[key]; got != "v1" {
		t.Fatalf("the slim Node lost the request: %v", slim.(*corev1.Node).Annotations)
	}
	other := n.DeepCopy()
	other.Annotations["other"] = "y"
	if s.assignmentChanged(n, other) {
		t.Errorf("another annotation counts as a change")
	}
	if !s.assignmentChanged(n, withReq) {
		t.Errorf("a new request does not count as a change")
	}
	changed := withReq.DeepCopy()
	changed.Annotations[key] = "v2"
	if !s.assignmentChanged(withReq, changed) {
		t.Errorf("a changed request does not count as a change")
	}
}

// TestNodePreflightReadsTheConfigMapOnce: a node answers its request at
// every resync while it stays; the candidate, pinned by uid and
// resourceVersion, is read from the API server once, not at every answer.
// A candidate that did not resolve is read again (it may appear).
func TestNodePreflightReadsTheConfigMapOnce(t *testing.T) {
	key := nodeapi.PreflightAnnotationFor("kubelet")
	cand := resolvedRef("cfg", "new", "uid-new", "7", "kubelet")
	n := testNode(nil, nil)
	n.Annotations = map[string]string{key: preflightRequestValue(t, cand)}
	client := fake.NewClientset(n)
	s := newNodeSource(t, client, NodeOptions{PreflightAnnotation: key})
	gets := func() int {
		c := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" {
				c++
			}
		}
		return c
	}
	for range 2 {
		if _, _, err := s.Preflight(context.Background()); err == nil {
			t.Fatal("a missing ConfigMap resolved")
		}
	}
	if got := gets(); got != 2 {
		t.Fatalf("%d ConfigMap GETs for a missing candidate asked twice, want 2", got)
	}
	if _, err := client.CoreV1().ConfigMaps("cfg").Create(context.Background(), cmap("cfg", "new", "uid-new", "7", map[string]string{"kubelet": "x"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, a, err := s.Preflight(context.Background())
		if err != nil || a.ConfigMap == nil || a.ConfigMap.Data["kubelet"] != "x" {
			t.Fatalf("Preflight = %+v, %v", a, err)
		}
		a.ConfigMap.Data["kubelet"] = "changed by the caller"
	}
	if got := gets(); got != 3 {
		t.Fatalf("%d ConfigMap GETs, want 3: one more for the three answers once it exists", got)
	}
}
