package cli

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// barWidth is the width of a step's progress bar.
const barWidth = 20

// RenderStatus is `rollout status`: the phase and its message, the
// ConfigMap, the counts, each step with its nodes done out of its target
// and a progress bar, the failures with their reasons, the pre-flight
// check (spec.preflight) with the nodes that did not pass, and the
// conditions.
func RenderStatus(ro *v1alpha1.ConfigRollout) string {
	var b strings.Builder
	st := &ro.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = "Pending (not yet seen by the rollout controller)"
	}
	fmt.Fprintf(&b, "ConfigRollout %s/%s: %s\n", ro.Namespace, ro.Name, phase)
	if st.Message != "" {
		fmt.Fprintf(&b, "  %s\n", st.Message)
	}
	if stale := Stale(ro, time.Now()); stale != "" {
		fmt.Fprintf(&b, "  STALE: %s\n", stale)
	}
	if ro.DeletionTimestamp != nil {
		what := "it goes once the nodes it changed are back on their previous source"
		if !slices.Contains(ro.Finalizers, plan.Finalizer) {
			what = "it puts no node back (claims it leaves on nodes are stale: any rollout may take those nodes)"
		}
		fmt.Fprintf(&b, "  Deleting (since %s): %s\n", ro.DeletionTimestamp.UTC().Format(time.RFC3339), what)
	}
	component := nodeapi.ComponentOrDefault(ro.Spec.Component)
	cm := fmt.Sprintf("ConfigMap %s/%s", ro.Namespace, ro.Spec.ConfigMapName)
	if st.ConfigMap != nil {
		cm += fmt.Sprintf(" (UID %s, resourceVersion %s)", st.ConfigMap.UID, st.ConfigMap.ResourceVersion)
	}
	fmt.Fprintf(&b, "%s to %s\n", cm, component)
	fmt.Fprintf(&b, "Nodes: %d selected, %d assigned, %d in trial, %d promoted, %d failed (max %d)\n",
		st.Selected, st.Assigned, st.InTrial, st.Promoted, st.Failed, ro.Spec.MaxFailures)
	if ro.Status.ObservedGeneration != 0 && ro.Status.ObservedGeneration != ro.Generation {
		fmt.Fprintf(&b, "  (the controller has not seen the latest change yet: generation %d, observed %d)\n", ro.Generation, st.ObservedGeneration)
	}

	b.WriteString("Steps:\n")
	var steps strings.Builder
	tw := tabwriter.NewWriter(&steps, 0, 0, 2, ' ', 0)
	settled := int(st.Promoted) + int(st.Failed)
	doneAt := map[int32]v1alpha1.StepStatus{}
	for _, s := range st.Steps {
		doneAt[s.Step] = s
	}
	for i, step := range ro.Spec.Steps {
		mark := " "
		if int32(i) == st.CurrentStep && st.Phase.Active() {
			mark = ">"
		}
		switch {
		case step.Pause != nil:
			what := "pause until resumed"
			if step.Pause.Duration != nil {
				what = "pause " + step.Pause.Duration.Duration.String()
			}
			state := ""
			switch {
			case int32(i) < st.CurrentStep:
				state = "done"
			case int32(i) == st.CurrentStep && st.Phase == v1alpha1.PhasePaused:
				state = "waiting"
			}
			fmt.Fprintf(tw, "%s %d\t%s\t\t\t%s\n", mark, i+1, what, state)
		case step.Nodes != nil:
			target := stepTarget(step.Nodes, int(st.Selected))
			done := min(settled, target)
			state := ""
			if int32(i) < st.CurrentStep {
				state = "done"
				if d, ok := doneAt[int32(i)]; ok && d.CompletedAt != nil {
					state = fmt.Sprintf("done %s (%d promoted, %d failed)", d.CompletedAt.UTC().Format(time.RFC3339), d.Promoted, d.Failed)
				}
			}
			fmt.Fprintf(tw, "%s %d\t%s\t%s\t%d/%d\t%s\n", mark, i+1, describeStep(step.Nodes, target), bar(done, target), done, target, state)
		}
	}
	_ = tw.Flush()
	for line := range strings.Lines(steps.String()) {
		b.WriteString(strings.TrimRight(line, " \n") + "\n")
	}

	if len(st.Failures) > 0 || st.Failed > 0 {
		b.WriteString("Failures:\n")
		for _, f := range st.Failures {
			fmt.Fprintf(&b, "  %s: %s\n", f.Node, f.Reason)
		}
		if more := int(st.Failed) - len(st.Failures); more > 0 {
			fmt.Fprintf(&b, "  and %d more (each failed Node says why in its annotation %s)\n", more, nodeapi.ClaimAnnotationFor(component))
		}
	}
	renderPreflight(&b, st.Preflight)
	if st.Reverting > 0 {
		fmt.Fprintf(&b, "Reverting: %d nodes going back to their previous source (or giving up its claim)\n", st.Reverting)
	}
	if st.Blocked > 0 {
		fmt.Fprintf(&b, "Blocked: %d selected nodes claimed by another rollout (see the Conflict condition)\n", st.Blocked)
	}
	// Records of an older controller, not yet moved onto their Nodes.
	legacy := map[v1alpha1.NodeState]int{}
	for _, r := range st.Nodes {
		legacy[r.State]++
	}
	if len(st.Nodes) > 0 {
		fmt.Fprintf(&b, "Node records of an older controller: %d (Reverting %d, Reverted %d), being moved onto the Nodes\n",
			len(st.Nodes), legacy[v1alpha1.NodeReverting], legacy[v1alpha1.NodeReverted])
	}
	if len(st.Conditions) > 0 {
		b.WriteString("Conditions:\n")
		for _, c := range st.Conditions {
			msg := ""
			if c.Message != "" {
				msg = ": " + c.Message
			}
			fmt.Fprintf(&b, "  %s=%s (%s)%s\n", c.Type, c.Status, c.Reason, msg)
		}
	}
	return b.String()
}

// stepTarget is the planner's rounding (v1alpha1.StepTarget); 0 for a step
// that does not resolve.
func stepTarget(v *intstr.IntOrString, selected int) int {
	n, err := v1alpha1.StepTarget(v, selected)
	if err != nil {
		return 0
	}
	return n
}

func describeStep(v *intstr.IntOrString, target int) string {
	if v.Type == intstr.String {
		return fmt.Sprintf("%s (%d nodes)", v.StrVal, target)
	}
	if target == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", target)
}

func bar(done, total int) string {
	filled := barWidth
	if total > 0 {
		// Counts come from a status anyone with its RBAC can write.
		filled = max(0, min(done, total)) * barWidth / total
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled) + "]"
}

// RenderHistory is `rollout history`: one line per entry, oldest first.
func RenderHistory(ro *v1alpha1.ConfigRollout) string {
	var b strings.Builder
	if len(ro.Status.History) == 0 {
		fmt.Fprintf(&b, "ConfigRollout %s/%s: no history yet\n", ro.Namespace, ro.Name)
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tREASON\tMESSAGE")
	for _, e := range ro.Status.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Time.UTC().Format("2006-01-02T15:04:05Z"), e.Reason, e.Message)
	}
	_ = tw.Flush()
	return b.String()
}

// renderPreflight writes the pre-flight check: its counts, and each node
// that did not pass with its verdict and fields or message.
func renderPreflight(b *strings.Builder, pf *v1alpha1.PreflightStatus) {
	if pf == nil {
		return
	}
	state := "waiting"
	if pf.CompletedAt != nil {
		state = "completed " + pf.CompletedAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(b, "Pre-flight (%s, %s): %d asked, %d passed, %d overridden, %d failed, %d no answer\n",
		pf.Policy, state, pf.Asked, pf.Passed, pf.Overridden, pf.Failed, pf.NoAnswer)
	for _, n := range pf.Nodes {
		what := n.Message
		if len(n.Fields) > 0 {
			what = strings.Join(n.Fields, ", ")
		}
		fmt.Fprintf(b, "  %s: %s: %s\n", n.Node, n.Verdict, what)
	}
	if more := int(pf.Failed+pf.Overridden+pf.NoAnswer) - len(pf.Nodes); more > 0 && pf.CompletedAt != nil {
		fmt.Fprintf(b, "  and %d more\n", more)
	}
}
