package plan

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// maxMemo bounds each table of a Memo: past it the table starts over.
const maxMemo = 4096

// Memo remembers what annotation values decode to across Plan calls. A
// fleet carries few distinct values (every node of a batch carries the
// same claim, most carry one of two assignments), so a caller that plans
// often over many nodes decodes each value once. It changes no result:
// Plan with or without it decides the same. Safe for concurrent use; the
// zero Memo is ready.
type Memo struct {
	mu          sync.Mutex
	claims      map[string]memoClaim
	assignments map[string]memoAssignment
}

type memoClaim struct {
	c   *nodeapi.Claim
	err error
}

type memoAssignment struct {
	src *corev1.NodeConfigSource
	err error
}

// claim is nodeapi.DecodeClaim, remembered. The result is shared: the
// planner never modifies a decoded claim.
func (m *Memo) claim(v string) (*nodeapi.Claim, error) {
	if m == nil {
		return nodeapi.DecodeClaim(v)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.claims[v]; ok {
		return r.c, r.err
	}
	c, err := nodeapi.DecodeClaim(v)
	if m.claims == nil || len(m.claims) >= maxMemo {
		m.claims = map[string]memoClaim{}
	}
	m.claims[v] = memoClaim{c, err}
	return c, err
}

// assignment is nodeapi.ParseAssignment, remembered; the result is shared.
func (m *Memo) assignment(v string) (*corev1.NodeConfigSource, error) {
	if m == nil {
		return nodeapi.ParseAssignment(v)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.assignments[v]; ok {
		return r.src, r.err
	}
	src, err := nodeapi.ParseAssignment(v)
	if m.assignments == nil || len(m.assignments) >= maxMemo {
		m.assignments = map[string]memoAssignment{}
	}
	m.assignments[v] = memoAssignment{src, err}
	return src, err
}
