package dynconfig

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// TestOptionsClusterWiresOneComponent: with Component and Cluster, the
// Controller reads the component's own assignment annotation, decodes the
// payload with the Profile's key through the default Layers, and publishes
// its own condition, ConfigStatus annotation, Events and metrics label;
// the kubelet's names are left alone.
func TestOptionsClusterWiresOneComponent(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "proxy", UID: "uid-proxy", ResourceVersion: "5"},
		Data: map[string]string{
			"config":  "{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 7}",
			"kubelet": "not for this component: {{{",
		},
	}
	assignment, _ := json.Marshal(corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "proxy", UID: "uid-proxy", KubeletConfigKey: "config"}})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		nodeapi.AssignmentAnnotationFor("kube-proxy"): string(assignment),
		nodeapi.AssignmentAnnotation:                  `{"configMap":{"namespace":"kube-system","name":"missing","kubeletConfigKey":"kubelet"}}`,
	}}}
	client := fake.NewClientset(node, cm)
	reg := prometheus.NewRegistry()
	c, err := New(Options[testConfig]{
		Component: "kube-proxy", Profile: testProfile{},
		StateDir: t.TempDir(), ComponentVersion: "v1",
		Cluster:    &Cluster{Client: client, NodeName: "n1"},
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, ctx := ktesting.NewTestContext(t)
	cfg, err := c.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Value != 7 || cfg.Name != "default" {
		t.Fatalf("config %+v, want value 7 from the ConfigMap, defaulted", cfg)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := status.FindType(got.Status.Conditions, "KubeProxyConfigOK")
	if cond == nil || cond.Status != corev1.ConditionTrue {
		t.Fatalf("KubeProxyConfigOK = %+v", cond)
	}
	if c := status.FindType(got.Status.Conditions, nodeapi.ConditionType); c != nil {
		t.Fatalf("the kube-proxy component wrote the kubelet's condition: %+v", c)
	}
	cs, err := nodeapi.ReadConfigStatus(got, "kube-proxy")
	if err != nil || cs == nil {
		t.Fatalf("config status: %+v, %v", cs, err)
	}
	if cs.Phase != nodeapi.PhaseTrial || cs.Active == nil || cs.Active.ConfigMap.UID != "uid-proxy" || cs.TrialEnds == nil {
		t.Fatalf("config status %+v, want the proxy ConfigMap in trial", cs)
	}
	if _, ok := got.Annotations[nodeapi.StatusAnnotation]; ok {
		t.Fatal("the kube-proxy component wrote the kubelet's config status")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var labelled bool
	for _, f := range families {
		if f.GetName() != status.MetricActiveConfigInfo {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labelled = labelled || (l.GetName() == "component" && l.GetValue() == "kube-proxy")
			}
		}
	}
	if !labelled {
		t.Fatalf("%s has no component=kube-proxy label", status.MetricActiveConfigInfo)
	}
}

// TestOptionsRejectsBadComponentAndCluster: bad values of the new options
// are errors that name the option.
func TestOptionsRejectsBadComponentAndCluster(t *testing.T) {
	base := func() Options[testConfig] {
		return Options[testConfig]{Profile: testProfile{}, StateDir: t.TempDir(), ComponentVersion: "v1"}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Options[testConfig])
		want   string
	}{
		{"component with capitals", func(o *Options[testConfig]) { o.Component = "KubeProxy" },
			`Options.Component: component name "KubeProxy": a lowercase RFC 1123 label`},
		{"component too long", func(o *Options[testConfig]) { o.Component = strings.Repeat("a", 50) },
			"Options.Component: component name \"" + strings.Repeat("a", 50) + "\": at most 49 characters, got 50"},
		{"cluster without client", func(o *Options[testConfig]) { o.Cluster = &Cluster{NodeName: "n1"} },
			"Options.Cluster.Client is required"},
		{"cluster with a bad node name", func(o *Options[testConfig]) { o.Cluster = &Cluster{Client: fake.NewClientset(), NodeName: "N_1"} },
			"Options.Cluster: source: NodeOptions.NodeName"},
		{"cluster with a bad ConfigMap name", func(o *Options[testConfig]) {
			o.Cluster = &Cluster{Client: fake.NewClientset(), NodeName: "n1", ConfigMap: &types.NamespacedName{Namespace: "kube-system", Name: "Bad_Name"}}
		}, "Options.Cluster: source: FixedOptions.Name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.mutate(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
