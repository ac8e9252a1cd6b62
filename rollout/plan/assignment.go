// What a rollout assigns, and reading the assignment a Node carries.

package plan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// PayloadKey returns the payload key a rollout assigns: spec.payloadKey,
// else the component's default (nodeapi.DefaultPayloadKey); ok is false
// when the spec names none and the component has no default: such a
// rollout does not start (PayloadKeyRequired).
func PayloadKey(spec *v1alpha1.ConfigRolloutSpec) (key string, ok bool) {
	if spec.PayloadKey != "" {
		return spec.PayloadKey, true
	}
	return nodeapi.DefaultPayloadKey(spec.Component)
}

func component(spec *v1alpha1.ConfigRolloutSpec) string {
	return nodeapi.ComponentOrDefault(spec.Component)
}

// Assignment is the NodeConfigSource a rollout assigns.
func Assignment(r *v1alpha1.ConfigRollout, uid types.UID) *corev1.NodeConfigSource {
	key, _ := PayloadKey(&r.Spec)
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: r.Namespace, Name: r.Spec.ConfigMapName, UID: uid, KubeletConfigKey: key,
	}}
}

func (p *planner) setOurs(uid types.UID) {
	p.ours = Assignment(p.r, uid)
	// Valid once started (the ConfigMap exists and holds the key), unless
	// the spec was edited since: decide halts on oursErr.
	p.oursJSON, p.oursErr = nodeapi.EncodeAssignment(p.ours)
}

// parseAssignment reads an assignment annotation value as the node does
// (nodeapi.ParseAssignment): absent, blank and "null" are no assignment; ok
// is false when the value is invalid, so that nothing is restored from it.
func parseAssignment(v *string) (src *corev1.NodeConfigSource, ok bool) {
	return parseAssignmentMemo(nil, v)
}

func parseAssignmentMemo(m *Memo, v *string) (src *corev1.NodeConfigSource, ok bool) {
	if v == nil {
		return nil, true
	}
	src, err := m.assignment(*v)
	return src, err == nil
}

// carries reports whether n's assignment is src (nil: no assignment).
func carries(n *Node, src *corev1.NodeConfigSource) bool {
	return carriesMemo(nil, n, src)
}

func carriesMemo(m *Memo, n *Node, src *corev1.NodeConfigSource) bool {
	got, ok := parseAssignmentMemo(m, n.Assignment)
	if !ok {
		return false
	}
	return sameSource(got, src)
}

// sameSource reports whether two assignments are the same (nil: none).
func sameSource(a, b *corev1.NodeConfigSource) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.ConfigMap == nil || b.ConfigMap == nil {
		return apiequality.Semantic.DeepEqual(a, b)
	}
	return *a.ConfigMap == *b.ConfigMap
}

// carries is carriesMemo with the call's Memo.
func (p *planner) carries(n *Node, src *corev1.NodeConfigSource) bool {
	return carriesMemo(p.in.Memo, n, src)
}

// isOurs reports whether src names the rollout's ConfigMap.
func (p *planner) isOurs(src *corev1.NodeConfigSource) bool {
	return src != nil && src.ConfigMap != nil && p.st.ConfigMap != nil && src.ConfigMap.UID == p.st.ConfigMap.UID
}

// describeAnnotation says what an assignment annotation value means: absent,
// the source it names (nodeapi.DescribeSource; "local" for blank and
// "null"), or why it is invalid.
func describeAnnotation(v *string) string {
	if v == nil {
		return "absent"
	}
	src, err := nodeapi.ParseAssignment(*v)
	if err != nil {
		const shown = 80 // an annotation value may be 256 KiB: quote its start only
		if len(*v) > shown {
			return fmt.Sprintf("%q... (%d bytes), which is invalid (%v)", (*v)[:shown], len(*v), err)
		}
		return fmt.Sprintf("%q, which is invalid (%v)", *v, err)
	}
	return nodeapi.DescribeSource(src)
}
