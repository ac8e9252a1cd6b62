package plan

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// DefaultKnownBadNodes is how many nodes must report a config bad before
// a new rollout of it is refused, when Input.KnownBadNodes is 0.
const DefaultKnownBadNodes = 1

// BadReport is a node whose component reports a config bad: its
// ConfigStatus (nodeapi.ReadConfigStatus) is in a bad phase
// (nodeapi.ConfigPhase.Bad: RolledBack, DeadEnd) about the config it is
// assigned. BadReportOf reads one.
type BadReport struct {
	// Node is the node's name.
	Node string
	// UID and ResourceVersion are the ConfigMap's the node was assigned.
	UID             types.UID
	ResourceVersion string
	// Phase is the phase it reports, and Error why.
	Phase nodeapi.ConfigPhase
	Error string
}

// BadReportOf returns what a node's component says about a config it
// marked bad, nil when its status marks none (no status, a good phase,
// SyncFailed: no verdict, or an assignment that names no ConfigMap).
func BadReportOf(node string, st *nodeapi.ConfigStatus) *BadReport {
	if st == nil || !st.Phase.Bad() || st.Assigned == nil || st.Assigned.ConfigMap == nil || st.Assigned.ConfigMap.UID == "" {
		return nil
	}
	cm := st.Assigned.ConfigMap
	return &BadReport{Node: node, UID: cm.UID, ResourceVersion: cm.ResourceVersion, Phase: st.Phase, Error: st.Error}
}

// HaltMarksBad reports whether a rollout halted for reason (its Halted
// condition's reason) marks its ConfigMap known bad: every halt but one
// that says nothing about the config (its ConfigMap changed under it, or
// its spec is invalid) or that came before any node ran it (a pre-flight
// check that did not pass, preflight.go: an override, a node that did
// not answer or a read-only state dir is about the node, and a config
// that does not build halts the next Required check again, as cheaply).
func HaltMarksBad(reason string) bool {
	return reason != "ConfigMapChanged" && reason != "InvalidSpec" && reason != preflightHaltReason
}

// SameConfig reports whether a ConfigMap pinned (or reported) at uid and
// resourceVersion rv is the config cm: the same UID, and the same
// resourceVersion unless cm is immutable. An immutable ConfigMap's data
// cannot change, so a new resourceVersion is a metadata edit (a label, an
// annotation, making it immutable) and it is still the same config; that
// it might have been edited before it became immutable is a doubt
// resolved on the side of caution (spec.allowKnownBad overrides).
func SameConfig(uid types.UID, rv string, cm *ConfigMap) bool {
	return cm != nil && uid == cm.UID && (rv == cm.ResourceVersion || cm.Immutable)
}

// mutable refuses a ConfigMap that is not immutable: an edit under an
// active rollout could reach a node before the rollout halts for it.
func (p *planner) mutable() bool {
	if p.in.ConfigMap.Immutable {
		return false
	}
	ns, name := p.r.Namespace, p.r.Spec.ConfigMapName
	p.refuse("ConfigMapMutable", fmt.Sprintf("ConfigMap %s/%s is not immutable: a rollout needs `immutable: true`, so that nobody can edit the config under it; "+
		"make it so with `kubectl patch configmap -n %s %s --type merge -p '{\"immutable\":true}'` (allowed on an existing ConfigMap, and final), "+
		"or start the rollout with `dynconfigctl rollout start --make-immutable`; the rollout starts once it is", ns, name, ns, name))
	return true
}

// knownBad refuses a ConfigMap the fleet knows bad, unless
// spec.allowKnownBad: a ConfigRollout halted on it (see HaltMarksBad), or
// Input.KnownBadNodes nodes report it bad (Input.BadReports).
func (p *planner) knownBad() bool {
	if p.r.Spec.AllowKnownBad {
		return false
	}
	cm := p.in.ConfigMap
	var why []string
	var halted []string
	for _, o := range p.in.Others {
		if o.HaltReason != "" && o.ConfigMap != nil && HaltMarksBad(o.HaltReason) && SameConfig(o.ConfigMap.UID, o.ConfigMap.ResourceVersion, cm) {
			h := fmt.Sprintf("ConfigRollout %s/%s halted on it (%s", o.Namespace, o.Name, o.HaltReason)
			if o.HaltMessage != "" {
				h += ": " + cutReason(o.HaltMessage, 200)
			}
			halted = append(halted, h+")")
		}
	}
	slices.Sort(halted)
	why = append(why, halted...)
	var nodes []string
	for _, b := range p.in.BadReports {
		if SameConfig(b.UID, b.ResourceVersion, cm) {
			n := b.Node + " (" + string(b.Phase)
			if b.Error != "" {
				n += ": " + cutReason(b.Error, 120)
			}
			nodes = append(nodes, n+")")
		}
	}
	slices.Sort(nodes)
	threshold := p.in.KnownBadNodes
	if threshold <= 0 {
		threshold = DefaultKnownBadNodes
	}
	if len(nodes) >= threshold {
		why = append(why, fmt.Sprintf("%d nodes report it bad: %s", len(nodes), abbreviate(nodes, 3)))
	}
	if len(why) == 0 {
		return false
	}
	p.refuse("KnownBad", fmt.Sprintf("refused: ConfigMap %s/%s (UID %s, resourceVersion %s) is known bad: %s; set spec.allowKnownBad to roll it out anyway",
		p.r.Namespace, p.r.Spec.ConfigMapName, cm.UID, cm.ResourceVersion, strings.Join(why, "; ")))
	return true
}

// cutReason keeps the start of a reason quoted in a message, at most n
// bytes, cut at a rune boundary.
func cutReason(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
