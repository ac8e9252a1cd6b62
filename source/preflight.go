package source

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// Preflighter is a Remote that also carries the fleet's pre-flight
// requests (nodeapi.PreflightRequest): a rollout's ask that the node check
// a candidate config before any node applies it. NodeSource is one, when
// NodeOptions.PreflightAnnotation is set; its Run calls changed when the
// request changes, as for the assignment.
type Preflighter interface {
	// Preflight reads the node's pre-flight request (nil: none) and
	// resolves its candidate as Assigned resolves an assignment: the same
	// ConfigMap read and the same rules (Resolve), so that a candidate
	// the node could not run (its ConfigMap is missing, has another uid,
	// lacks the payload key) is an *nodeapi.InvalidError, and anything
	// else is a failure to read it. A request that does not decode is an
	// error naming the annotation and the Node.
	Preflight(ctx context.Context) (*nodeapi.PreflightRequest, Assignment, error)
}

var _ Preflighter = (*NodeSource)(nil)

// Preflight implements Preflighter: the request from the node cache while
// Run keeps it synced, else from the API server; the candidate's ConfigMap
// from the assigned ConfigMap's watch when it is that one, else with a
// GET, once for a request: one resolved to the resourceVersion it pins is
// remembered while it stays on the Node.
func (s *NodeSource) Preflight(ctx context.Context) (*nodeapi.PreflightRequest, Assignment, error) {
	key := s.opts.PreflightAnnotation
	if key == "" {
		return nil, Assignment{}, nil
	}
	node, err := s.node(ctx)
	if err != nil {
		return nil, Assignment{}, err
	}
	v, ok := node.Annotations[key]
	if !ok {
		return nil, Assignment{}, nil
	}
	req, err := nodeapi.DecodePreflightRequest(v)
	if err != nil || req == nil {
		if err != nil {
			err = fmt.Errorf("annotation %s of Node %s: %w", key, s.opts.NodeName, err)
		}
		return nil, Assignment{}, err
	}
	s.mu.Lock()
	w, memo := s.watch, s.preflight
	s.mu.Unlock()
	if memo.value == v && memo.a.ConfigMap != nil {
		// The same request, resolved before: its candidate is pinned by
		// uid and resourceVersion, so it is the same object. A node
		// answers at every resync while the request stays on its Node,
		// and must not GET the ConfigMap each time.
		return req, Assignment{Source: memo.a.Source.DeepCopy(), ConfigMap: memo.a.ConfigMap.DeepCopy()}, nil
	}
	ref := req.Candidate.ConfigMap
	a, err := resolveConfigMap(ctx, s.opts.Client, w, ref.Namespace, ref.Name, func(cm *corev1.ConfigMap) (Assignment, error) {
		resolved, err := Resolve(req.Candidate, cm, s.opts.PayloadKey)
		if err != nil {
			return Assignment{}, err
		}
		return Assignment{Source: resolved, ConfigMap: cm}, nil
	})
	if err == nil && a.Source.ConfigMap.ResourceVersion == ref.ResourceVersion {
		s.mu.Lock()
		s.preflight = preflightMemo{value: v, a: Assignment{Source: a.Source.DeepCopy(), ConfigMap: a.ConfigMap.DeepCopy()}}
		s.mu.Unlock()
	}
	return req, a, err
}

// preflightMemo is the last request value NodeSource.Preflight resolved
// to the resourceVersion it pins, with its candidate.
type preflightMemo struct {
	value string
	a     Assignment
}

// preflightChanged reports whether an update of the Node changed its
// pre-flight request annotation (its presence or value).
func (s *NodeSource) preflightChanged(oldNode, newNode *corev1.Node) bool {
	key := s.opts.PreflightAnnotation
	if key == "" {
		return false
	}
	ov, oldHas := oldNode.Annotations[key]
	nv, newHas := newNode.Annotations[key]
	return oldHas != newHas || ov != nv
}

// keepPreflight copies the pre-flight request annotation of n into out,
// the slim Node the cache keeps.
func (s *NodeSource) keepPreflight(n, out *corev1.Node) {
	key := s.opts.PreflightAnnotation
	v, ok := n.Annotations[key]
	if key == "" || !ok {
		return
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[key] = v
}
