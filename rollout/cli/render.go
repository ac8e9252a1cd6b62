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
// and a progress bar, the failures with their reasons, and the conditions.
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
	if ro.DeletionTimestamp != nil {
		what := "it goes once the nodes it changed are back on their previous source"
		if !slices.Contains(ro.Finalizers, plan.Finalizer) {
			what = "nothing depends on its records any more"
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
	settled := int(st.Promoted) + countStates(ro, v1alpha1.NodeFailed, v1alpha1.NodeSkipped)
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
			fmt.Fprintf(tw, "%s %d\t%s\t\t\t%s\n", mark, i, what, state)
		case step.Nodes != nil:
			target := stepTarget(step.Nodes, int(st.Selected))
			done := min(settled, target)
			state := ""
			if int32(i) < st.CurrentStep {
				state = "done"
			}
			fmt.Fprintf(tw, "%s %d\t%s\t%s\t%d/%d\t%s\n", mark, i, describeStep(step.Nodes, target), bar(done, target), done, target, state)
		}
	}
	_ = tw.Flush()
	for line := range strings.Lines(steps.String()) {
		b.WriteString(strings.TrimRight(line, " \n") + "\n")
	}

	var failures []string
	for _, r := range st.Nodes {
		if r.CountsAsFailed() {
			failures = append(failures, fmt.Sprintf("  %s (step %d, %s): %s\n", r.Name, r.Step, r.State, r.Reason))
		}
	}
	if len(failures) > 0 {
		b.WriteString("Failures:\n")
		for _, f := range failures {
			b.WriteString(f)
		}
	}
	if n := countStates(ro, v1alpha1.NodeReverting); n > 0 {
		fmt.Fprintf(&b, "Reverting: %d nodes going back to their previous source\n", n)
	}
	if n := countStates(ro, v1alpha1.NodeReverted); n > 0 {
		fmt.Fprintf(&b, "Reverted: %d nodes\n", n)
	}
	if n := countStates(ro, v1alpha1.NodeSuperseded); n > 0 {
		fmt.Fprintf(&b, "Superseded: %d nodes whose assignment someone else changed; not reverted, left as they are\n", n)
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

func countStates(ro *v1alpha1.ConfigRollout, states ...v1alpha1.NodeState) int {
	n := 0
	for _, r := range ro.Status.Nodes {
		for _, s := range states {
			if r.State == s {
				n++
			}
		}
	}
	return n
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
