package plan

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// FuzzPlanAnnotations feeds Plan the Node annotations a node (or anyone
// who can write Nodes) controls: its assignment and its published status.
// Plan must not panic, must never start on a node whose assignment does
// not decode (it could not put it back; a node it already recorded, with
// its previous source, may get its assignment again), and must record
// every node it patches.
func FuzzPlanAnnotations(f *testing.F) {
	f.Add(`{"configMap":{"namespace":"ns","name":"old","uid":"old-uid","kubeletConfigKey":"kubelet"}}`, `{"phase":"Promoted"}`, true)
	f.Add(`{not json`, `{"phase":"RolledBack","assigned":{"configMap":{"uid":"cm-uid-1"}},"error":"x"}`, false)
	f.Add(`null`, `{"phase":"Trial","active":{"configMap":{"uid":"cm-uid-1"}},"trialEnds":"2026-01-02T03:04:05Z"}`, true)
	f.Add(`{"configMap":null}`, ``, false)
	f.Add(`0`, `0`, true) // garbage over a node the rollout already assigned
	f.Fuzz(func(t *testing.T, assignment, published string, started bool) {
		w := newWorld(t, 3, countStep(1), percentStep("100%"))
		w.r.Spec.MaxFailures = 3
		if started {
			w.plan()
		}
		n := w.node("node-000")
		a := assignment
		n.Assignment = &a
		n.Status = nil
		n.StatusError = ""
		if s, err := nodeapi.ParseConfigStatus(published); err == nil {
			n.Status = s
		} else {
			n.StatusError = err.Error()
		}
		for range 3 {
			known := map[string]bool{}
			for _, r := range w.r.Status.Nodes {
				known[r.Name] = true
			}
			res := Plan(w.input())
			recorded := map[string]bool{}
			for _, r := range res.Status.Nodes {
				recorded[r.Name] = true
			}
			for _, p := range res.Patches {
				if _, ok := parseAssignment(w.node(p.Node).Assignment); !ok && !p.Revert && !known[p.Node] {
					t.Fatalf("assigned %s, whose assignment %q does not decode", p.Node, *w.node(p.Node).Assignment)
				}
				if !recorded[p.Node] {
					t.Fatalf("patched %s without a record", p.Node)
				}
			}
			for _, r := range res.Status.Nodes {
				if r.Name == "node-000" && r.State != v1alpha1.NodeSkipped {
					if _, ok := parseAssignment(&a); !ok && !started {
						t.Fatalf("node-000 (undecodable assignment) is %s, want Skipped", r.State)
					}
				}
			}
			w.r.Status = res.Status
			w.now = w.now.Add(7 * time.Minute)
		}
	})
}

// FuzzPlanStatus feeds Plan a status as anyone allowed to write the
// status subresource could leave it (the API server checks only its
// schema): Plan must not panic, must record every node it assigns, must
// not assign a node twice in one result, and must not assign once the
// rollout is not Progressing.
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
			recorded := map[string]bool{}
			for _, r := range res.Status.Nodes {
				recorded[r.Name] = true
			}
			assigned := map[string]bool{}
			for _, p := range res.Patches {
				if p.Revert {
					continue
				}
				if !recorded[p.Node] {
					t.Fatalf("assigned %s without a record", p.Node)
				}
				if assigned[p.Node] {
					t.Fatalf("assigned %s twice in one result", p.Node)
				}
				assigned[p.Node] = true
				if ph := res.Status.Phase; ph != v1alpha1.PhaseProgressing && ph != v1alpha1.PhasePaused {
					t.Fatalf("phase %s assigns %s", ph, p.Node)
				}
			}
			w.r.Status = res.Status
			w.now = w.now.Add(7 * time.Minute)
		}
	})
}
