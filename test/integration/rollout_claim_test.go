package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// TestRolloutClaimGuarded: a rollout's revert record is on the Node (its
// claim annotation), so the admission policy of deploy/ must keep a node
// from rewriting it (pointing its own revert at another ConfigMap) or
// dropping it (escaping a revert), as it keeps the node from changing its
// assignment: through the Node with the kubelet's identity, and through
// nodes/status with a component's. An operator may still write it.
func TestRolloutClaimGuarded(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	h := newLPHarness(ctx, t)
	for _, component := range []string{nodeapi.DefaultComponent, proxyComponent} {
		key := nodeapi.ClaimAnnotationFor(component)
		claim, err := nodeapi.EncodeClaim(&nodeapi.Claim{Namespace: "ops", Name: "roll", UID: "ro-uid", AssignedAt: metav1.Now(),
			Previous: nodeapiSource("dynconfig-configs", "kubelet-v1", "old-uid")})
		if err != nil {
			t.Fatal(err)
		}
		forged, err := nodeapi.EncodeClaim(&nodeapi.Claim{Namespace: "ops", Name: "roll", UID: "ro-uid", AssignedAt: metav1.Now(),
			Previous: nodeapiSource("dynconfig-configs", "anything-i-like", "other-uid")})
		if err != nil {
			t.Fatal(err)
		}
		set := func(value *string) []byte {
			return []byte(mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{key: value}}}))
		}
		if _, err := h.admin.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, set(&claim), metav1.PatchOptions{}); err != nil {
			t.Fatalf("the admin writes the claim %s: %v", key, err)
		}
		for _, tc := range []struct {
			who      string
			id       identity
			body     []byte
			subresrc []string
		}{
			{"the kubelet rewrites its claim", h.kubelet, set(&forged), nil},
			{"the kubelet drops its claim", h.kubelet, set(nil), nil},
			{"a component rewrites the claim through nodes/status", h.proxy, set(&forged), []string{"status"}},
		} {
			// The policy takes effect once the API server has loaded it.
			var last error
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, last = tc.id.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, tc.body, metav1.PatchOptions{}, tc.subresrc...)
				if last == nil {
					// Let through: put the claim back and try again.
					if _, err := h.admin.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, set(&claim), metav1.PatchOptions{}); err != nil {
						return false, err
					}
					return false, nil
				}
				return apierrors.IsForbidden(last) || apierrors.IsInvalid(last), nil
			})
			if err != nil {
				t.Errorf("%s (%s): not refused: %v (last answer: %v)", tc.who, key, err, last)
				continue
			}
			if !strings.Contains(last.Error(), key) {
				t.Errorf("%s: refused, but the message does not name %s: %v", tc.who, key, last)
			}
		}
		n, err := h.admin.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Annotations[key]; got != claim {
			t.Errorf("the claim %s is %q after the refused writes, want %q", key, got, claim)
		}
	}
}

func nodeapiSource(namespace, name, uid string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: namespace, Name: name, UID: types.UID(uid), KubeletConfigKey: "kubelet"}}
}
