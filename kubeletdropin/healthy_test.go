package kubeletdropin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// healthz serves a kubelet /healthz that answers code and body.
func healthz(t *testing.T, code int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/healthz"
}

func nodeWithReady(s corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if s != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, Reason: "KubeletNotReady", Message: "PLEG is not healthy"}}
	}
	return n
}

// unreachable is a client whose every request fails as against a stopped
// API server.
func unreachable() kubernetes.Interface {
	c := fake.NewClientset()
	c.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`Get "https://127.0.0.1:6443/api/v1/nodes/n1": dial tcp 127.0.0.1:6443: connect: connection refused`)
	})
	return c
}

// TestHealthyConfirmsFromTheNode: the kubelet's health (what confirms a
// config under --confirm-within, and lets it be promoted) is the node's own
// evidence, its /healthz. The Node's Ready, read from the API server, is an
// extra when the API server answers: a Ready the kubelet reported False
// holds the confirmation back; an API server that cannot be reached (down,
// hanging), a Node not registered yet, or a Ready only the control plane
// set Unknown never does, so that an API server outage across the
// confirmation window does not revert a healthy config.
func TestHealthyConfirmsFromTheNode(t *testing.T) {
	ok := healthz(t, http.StatusOK, "ok")
	for _, tc := range []struct {
		name    string
		healthz string
		client  kubernetes.Interface
		wantErr string // "" = healthy
	}{
		{"healthz ok, Ready True", ok, fake.NewClientset(nodeWithReady(corev1.ConditionTrue)), ""},
		{"healthz ok, API server unreachable", ok, unreachable(), ""},
		{"healthz ok, Node not registered yet", ok, fake.NewClientset(), ""},
		{"healthz ok, no Ready condition yet", ok, fake.NewClientset(nodeWithReady("")), ""},
		{"healthz ok, Ready Unknown (set by the node controller)", ok, fake.NewClientset(nodeWithReady(corev1.ConditionUnknown)), ""},
		{"healthz ok, Ready False (the kubelet says so)", ok, fake.NewClientset(nodeWithReady(corev1.ConditionFalse)), "node n1: Ready is False"},
		{"healthz 500", healthz(t, http.StatusInternalServerError, "[-]syncloop failed"), fake.NewClientset(nodeWithReady(corev1.ConditionTrue)), "500"},
		{"healthz unreachable", "http://127.0.0.1:1/healthz", fake.NewClientset(nodeWithReady(corev1.ConditionTrue)), "kubelet healthz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Healthy(tc.client, "n1", tc.healthz)(ctx)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Healthy: %v, want healthy", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Healthy: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestHealthyWithAHangingAPIServer: an API server that accepts the
// connection and never answers costs the probe part of its time, not its
// verdict: healthz ok is healthy within the probe's deadline.
func TestHealthyWithAHangingAPIServer(t *testing.T) {
	hang := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer api.Close()
	defer close(hang)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := Healthy(client, "n1", healthz(t, http.StatusOK, "ok"))(ctx); err != nil {
		t.Fatalf("Healthy with a hanging API server: %v, want healthy (healthz ok)", err)
	}
}

// TestPromotionHeld: the run role holds the kubelet config's promotion
// while the Node's claim asks (a gated rollout has not passed it), lets it
// go once passed, failed or past holdUntil, and through an API server
// outage keeps what it last read.
func TestPromotionHeld(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	claim := func(edit func(*nodeapi.Claim)) *corev1.Node {
		c := &nodeapi.Claim{Namespace: "ns", Name: "ro", UID: "ro-uid", AssignedAt: metav1.NewTime(now.Add(-time.Minute))}
		until := metav1.NewTime(now.Add(time.Hour))
		c.HoldUntil = &until
		if edit != nil {
			edit(c)
		}
		v, err := nodeapi.EncodeClaim(c)
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{nodeapi.ClaimAnnotation: v}}}
	}
	passed := metav1.NewTime(now.Add(-time.Second))
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"held", claim(nil), true},
		{"passed", claim(func(c *nodeapi.Claim) { c.Passed = &passed }), false},
		{"failed", claim(func(c *nodeapi.Claim) { c.Failed = "health gate pods: ..." }), false},
		{"past holdUntil", claim(func(c *nodeapi.Claim) { c.HoldUntil = &passed }), false},
		{"no hold (a rollout without gates)", claim(func(c *nodeapi.Claim) { c.HoldUntil = nil }), false},
		{"no claim", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, false},
		{"a claim that does not decode", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{nodeapi.ClaimAnnotation: "{"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := PromotionHeld(fake.NewClientset(tc.node), "n1", func() time.Time { return now })
			if got := held(context.Background()); got != tc.want {
				t.Errorf("held %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("through an outage", func(t *testing.T) {
		client := fake.NewClientset(claim(nil))
		clock := now
		held := PromotionHeld(client, "n1", func() time.Time { return clock })
		if !held(context.Background()) {
			t.Fatal("not held before the outage")
		}
		client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		if !held(context.Background()) {
			t.Error("the outage lifted the hold")
		}
		clock = now.Add(2 * time.Hour)
		if held(context.Background()) {
			t.Error("still held past holdUntil")
		}
	})
}
