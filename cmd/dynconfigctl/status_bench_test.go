package main

import (
	"context"
	"fmt"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// BenchmarkStatus measures status over a fleet of n nodes with a kubelet
// and a kube-proxy each, from a fake API server (the List is a copy of the
// tracker's objects): decoding both annotations of both components,
// finding the conditions, sorting and printing.
func BenchmarkStatus(b *testing.B) {
	for _, n := range []int{100, 2000} {
		for _, output := range []string{outputTable, outputJSON} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, map[string]string{"": "table", "json": "json"}[output]), func(b *testing.B) {
				src := cmSource("kube-system", "kubelet-a", "uid-a", "11")
				assignment, err := nodeapi.EncodeAssignment(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "kubelet-a", UID: "uid-a", KubeletConfigKey: "kubelet"}})
				if err != nil {
					b.Fatal(err)
				}
				cs, err := (&nodeapi.ConfigStatus{Assigned: src, Active: src, LastKnownGood: src, Phase: nodeapi.PhasePromoted}).MarshalAnnotation()
				if err != nil {
					b.Fatal(err)
				}
				var objs []runtime.Object
				for i := range n {
					objs = append(objs, &corev1.Node{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i), Annotations: map[string]string{
							"dynconfig.io/config-source": assignment, "dynconfig.io/config-status": cs,
							"dynconfig.io/config-source.kube-proxy": assignment, "dynconfig.io/config-status.kube-proxy": cs,
						}},
						Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
							{Type: "ConfigOK", Status: corev1.ConditionTrue}, {Type: "KubeProxyConfigOK", Status: corev1.ConditionTrue},
						}},
					})
				}
				client := fake.NewClientset(objs...)
				opts := statusOptions{output: output, pageSize: 500}
				b.ReportAllocs()
				for b.Loop() {
					if err := runStatus(context.Background(), io.Discard, io.Discard, client, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/row")
			})
		}
	}
}
