package plan

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// FuzzPlanAnnotations feeds Plan the Node annotations a node (or anyone
// who can write Nodes) controls: its assignment, its published status and
// the rollout claim. Plan must not panic, must never change the assignment
// of a node whose assignment does not decode (it could not put it back),
// must write its claim in the same patch as every assignment it makes,
// and must not touch a node another controller claims.
func FuzzPlanAnnotations(f *testing.F) {
	f.Add(`{"configMap":{"namespace":"ns","name":"old","uid":"old-uid","kubeletConfigKey":"kubelet"}}`, `{"phase":"Promoted"}`, "", true)
	f.Add(`{not json`, `{"phase":"RolledBack","assigned":{"configMap":{"uid":"cm-uid-1"}},"error":"x"}`, "", false)
	f.Add(`null`, `{"phase":"Trial","active":{"configMap":{"uid":"cm-uid-1"}},"trialEnds":"2026-01-02T03:04:05Z"}`, "", true)
	f.Add(`{"configMap":null}`, ``, "", false)
	f.Add(`0`, `0`, "", true) // garbage over a node the rollout already assigned
	f.Add(``, ``, `{"namespace":"other","name":"r","uid":"u","assignedAt":"2026-01-02T03:04:05Z"}`, false)
	f.Add(``, ``, `{"namespace":"ns","name":"ro","uid":"ro-uid","assignedAt":"2026-01-02T03:04:05Z","failed":"x"}`, true)
	f.Add(``, ``, `{"namespace":`, false)
	f.Fuzz(func(t *testing.T, assignment, published, claim string, started bool) {
		w := newWorld(t, 3, countStep(1), percentStep("100%"))
		w.r.Spec.MaxFailures = 3
		if started {
			w.plan()
		}
		n := w.node("node-000")
		a := assignment
		n.Assignment = &a
		if claim != "" {
			c := claim
			n.Claim = &c
		}
		n.Status = nil
		n.StatusError = ""
		if s, err := nodeapi.ParseConfigStatus(published); err == nil {
			n.Status = s
		} else {
			n.StatusError = err.Error()
		}
		for range 3 {
			in := w.input()
			in.Scope = "ns"
			res := Plan(in)
			for _, p := range res.Patches {
				node := w.node(p.Node)
				if node.Claim != nil {
					if c, err := nodeapi.DecodeClaim(*node.Claim); err != nil || (c != nil && c.UID != w.r.UID) {
						t.Fatalf("patched %s, which carries claim %q", p.Node, *node.Claim)
					}
				}
				if p.Revert || p.ClaimOnly {
					continue
				}
				if _, ok := parseAssignment(node.Assignment); !ok {
					t.Fatalf("assigned %s, whose assignment %q does not decode", p.Node, *node.Assignment)
				}
				if p.Claim == nil {
					t.Fatalf("assigned %s without its claim", p.Node)
				}
				if c, err := nodeapi.DecodeClaim(*p.Claim); err != nil || c == nil || c.UID != w.r.UID {
					t.Fatalf("assigned %s with claim %q (%v)", p.Node, *p.Claim, err)
				}
			}
			w.r.Status = res.Status
			for _, p := range res.Patches {
				w.apply(p)
			}
			w.now = w.now.Add(7 * time.Minute)
		}
	})
}

// FuzzPlanStatus feeds Plan a status as anyone allowed to write the
// status subresource could leave it (the API server checks only its
// schema): Plan must not panic, must write its claim with every
// assignment, must not patch a node twice in one result, and must not
// assign once the rollout is not Progressing.
func FuzzPlanStatus(f *testing.F) {
	f.Add(`{"phase":"Progressing","currentStep":1,"configMap":{"uid":"cm-uid-1","resourceVersion":"10"},"nodes":[{"name":"node-000","state":"Trial","step":0,"assignedAt":"2026-01-02T03:04:05Z"}]}`)
	f.Add(`{"phase":"Progressing","currentStep":-1,"configMap":{"uid":"cm-uid-1","resourceVersion":"10"}}`)
	f.Add(`{"phase":"Paused","currentStep":9,"configMap":{"uid":"cm-uid-1","resourceVersion":"10"}}`)
	f.Add(`{"phase":"Halted","previousSources":[],"nodes":[{"name":"node-001","state":"Reverting","previousIndex":3,"step":0,"assignedAt":null}]}`)
	f.Add(`{"phase":"Progressing","configMap":{"uid":"cm-uid-1","resourceVersion":"10"},"nodes":[{"name":"node-001","state":"Assigning"},{"name":"node-001","state":"Promoted"},{"name":"gone","state":"Failed"}]}`)
	f.Add(`{"phase":"Reverted","nodes":[{"name":"node-000","state":"Reverting","previous":{"configMap":{"uid":"x"}}}],"history":[{"reason":"a"}]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var st v1alpha1.ConfigRolloutStatus
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return
		}
		w := newWorld(t, 4, countStep(1), pauseStep(time.Minute), percentStep("100%"))
		w.r.Status = st
		for range 3 {
			res := Plan(w.input())
			patched := map[string]bool{}
			for _, p := range res.Patches {
				if patched[p.Node] {
					t.Fatalf("patched %s twice in one result", p.Node)
				}
				patched[p.Node] = true
				if p.Revert || p.ClaimOnly {
					continue
				}
				if p.Claim == nil {
					t.Fatalf("assigned %s without its claim", p.Node)
				}
				if ph := res.Status.Phase; ph != v1alpha1.PhaseProgressing && ph != v1alpha1.PhasePaused {
					t.Fatalf("phase %s assigns %s", ph, p.Node)
				}
			}
			w.r.Status = res.Status
			for _, p := range res.Patches {
				w.apply(p)
			}
			w.now = w.now.Add(7 * time.Minute)
		}
	})
}
