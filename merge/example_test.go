package merge_test

import (
	"fmt"

	"github.com/dynconfig/dynconfig/merge"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// profile is the smallest possible profile; components/kubelet has the real one.
type profile struct{}

func (profile) GroupVersionKind() schema.GroupVersionKind {
	return kubeletv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")
}

func (profile) Default(c *kubeletv1beta1.KubeletConfiguration) {
	if c.Port == 0 {
		c.Port = 10250
	}
}

func (profile) Validate(c *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	if c.MaxPods < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("maxPods"), c.MaxPods, "must not be negative")}
	}
	return nil
}

func ExamplePipeline_Merge() {
	p, err := merge.New[kubeletv1beta1.KubeletConfiguration](profile{}, merge.Options{})
	if err != nil {
		panic(err)
	}
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	res, err := p.Merge(merge.Layers{
		Base:     &merge.Document{Name: "kubelet.yaml", Data: []byte(header + "maxPods: 110\nclusterDNS: [10.96.0.10]\n")},
		DropIns:  []merge.Document{{Name: "config.d/10-pods.conf", Data: []byte(header + "maxPods: 64\n")}},
		Instance: &merge.Document{Name: "instance.yaml", Data: []byte(header + "address: 10.0.0.7\n")},
		Flags:    []merge.Override{{Path: "clusterDNS", Value: []string{"10.96.0.11"}, Source: "flag --cluster-dns"}},
	})
	if err != nil {
		panic(err)
	}
	c := res.Object
	fmt.Println(c.Port, c.MaxPods, c.Address, c.ClusterDNS)
	for _, path := range []string{"port", "maxPods", "address", "clusterDNS"} {
		fmt.Printf("%s set by %s\n", path, res.Provenance[path])
	}

	_, err = p.Merge(merge.Layers{
		Base: &merge.Document{Name: "kubelet.yaml", Data: []byte(header + "maxPods: -1\nadress: 10.0.0.7\nauthentication:\n  x509:\n    clientCAFle: ca.crt\n")},
	})
	fmt.Println(err)
	// Output:
	// 10250 64 10.0.0.7 [10.96.0.11]
	// port set by defaults
	// maxPods set by config.d/10-pods.conf
	// address set by instance.yaml
	// clusterDNS set by flag --cluster-dns
	// kubelet.yaml: unknown field "adress"
	// kubelet.yaml: authentication.x509: unknown field "clientCAFle"
}
