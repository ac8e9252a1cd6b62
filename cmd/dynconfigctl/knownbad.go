package main

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	rolloutcli "github.com/dynconfig/dynconfig/rollout/cli"
)

// printKnownBad prints, under status's table with --known-bad, the configs the fleet knows
// bad (rollout/cli.KnownBad): the nodes listed that report one bad, and
// the halted ConfigRollouts in every namespace (when ConfigRollouts are
// served and may be listed; otherwise the nodes alone). -o json and -o
// yaml do not carry it.
func printKnownBad(ctx context.Context, w io.Writer, o statusOptions, nodes []*corev1.Node) error {
	if !o.knownBad || (o.output != outputTable && o.output != outputWide) {
		return nil
	}
	var rollouts []v1alpha1.ConfigRollout
	if o.rollouts != nil {
		list, err := o.rollouts.Resource(v1alpha1.GroupVersionResource()).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				var ro v1alpha1.ConfigRollout
				if runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &ro) == nil {
					rollouts = append(rollouts, ro)
				}
			}
		}
	}
	_, err := fmt.Fprint(w, rolloutcli.RenderKnownBad(rolloutcli.KnownBad(nodes, rollouts)))
	return err
}
