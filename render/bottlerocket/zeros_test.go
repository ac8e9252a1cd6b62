package bottlerocket

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRenderDocumentExplicitZeros sets each mapped field that is not a map
// or list to its zero value, explicitly, in a document: the output carries
// the zero, or rendering fails with an *InvalidValueError naming the field.
// Never is the zero dropped. Every such field of SupportedFields must have a
// case here.
func TestRenderDocumentExplicitZeros(t *testing.T) {
	tests := []struct {
		field string
		doc   string // the field's value in the document
		// want is the output, or the error text when err is true.
		want string
		err  bool
	}{
		{"clusterDomain", `""`,
			`clusterDomain: cannot be expressed as Bottlerocket settings.kubernetes.cluster-domain: an empty domain gives the kubelet no cluster domain, ` +
				`but Bottlerocket always writes one (cluster.local when the setting is unset) and accepts no empty domain`, true},
		{"containerLogMaxFiles", "0", header + "container-log-max-files = 0\n", false},
		{"containerLogMaxSize", `""`,
			`containerLogMaxSize: cannot be expressed as Bottlerocket settings.kubernetes.container-log-max-size: Bottlerocket accepts no empty quantity; ` +
				`the kubelet reads "" as its default, "10Mi": write that, or leave the field out`, true},
		{"cpuCFSQuota", "false", header + "cpu-cfs-quota-enforced = false\n", false},
		{"cpuManagerPolicy", `""`,
			`cpuManagerPolicy: cannot be expressed as Bottlerocket settings.kubernetes.cpu-manager-policy: ` +
				`"" is not one of the values Bottlerocket accepts: none, static; the kubelet reads "" as "none": write that, or leave the field out`, true},
		{"cpuManagerReconcilePeriod", `"0s"`, header + `cpu-manager-reconcile-period = "0s"` + "\n", false},
		{"eventBurst", "0", header + "event-burst = 0\n", false},
		{"eventRecordQPS", "0", header + "event-qps = 0\n", false},
		{"evictionMaxPodGracePeriod", "0", header + "eviction-max-pod-grace-period = 0\n", false},
		{"imageGCHighThresholdPercent", "0", header + "image-gc-high-threshold-percent = 0\n", false},
		{"imageGCLowThresholdPercent", "0", header + "image-gc-low-threshold-percent = 0\n", false},
		{"kubeAPIBurst", "0", header + "kube-api-burst = 0\n", false},
		{"kubeAPIQPS", "0", header + "kube-api-qps = 0\n", false},
		{"maxPods", "0",
			`maxPods: cannot be expressed as Bottlerocket settings.kubernetes.max-pods: 0 is not a pod count: the kubelet replaces it with its default of 110, ` +
				`and Bottlerocket, which sizes the kube-reserved memory from max-pods, would reserve none; set the number of pods, or leave maxPods out for Bottlerocket's default`, true},
		{"memoryManagerPolicy", `""`,
			`memoryManagerPolicy: cannot be expressed as Bottlerocket settings.kubernetes.memory-manager-policy: ` +
				`"" is not one of the values Bottlerocket accepts: None, Static; the kubelet reads "" as "None": write that, or leave the field out`, true},
		{"podPidsLimit", "0", header + "pod-pids-limit = 0\n", false},
		{"providerID", `""`,
			`providerID: cannot be expressed as Bottlerocket settings.kubernetes.provider-id: Bottlerocket accepts no empty provider ID; ` +
				`the kubelet reads "" as no provider ID, which leaving the field out gives too`, true},
		{"registryBurst", "0", header + "registry-burst = 0\n", false},
		{"registryPullQPS", "0", header + "registry-qps = 0\n", false},
		{"serverTLSBootstrap", "false", header + "server-tls-bootstrap = false\n", false},
		{"shutdownGracePeriod", `"0s"`, header + `shutdown-grace-period = "0s"` + "\n", false},
		{"shutdownGracePeriodCriticalPods", `"0s"`, header + `shutdown-grace-period-for-critical-pods = "0s"` + "\n", false},
		{"topologyManagerPolicy", `""`,
			`topologyManagerPolicy: cannot be expressed as Bottlerocket settings.kubernetes.topology-manager-policy: ` +
				`"" is not one of the values Bottlerocket accepts: best-effort, none, restricted, single-numa-node; the kubelet reads "" as "none": write that, or leave the field out`, true},
		{"topologyManagerScope", `""`,
			`topologyManagerScope: cannot be expressed as Bottlerocket settings.kubernetes.topology-manager-scope: ` +
				`"" is not one of the values Bottlerocket accepts: container, pod; the kubelet reads "" as "container": write that, or leave the field out`, true},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.field] = true
		t.Run(tt.field, func(t *testing.T) {
			for _, doc := range []string{
				`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","` + tt.field + `":` + tt.doc + `}`,
				tt.field + ": " + tt.doc + "\n",
			} {
				out, err := RenderDocument([]byte(doc))
				if !tt.err {
					if err != nil {
						t.Fatalf("RenderDocument(%s): %v", doc, err)
					}
					if diff := cmp.Diff(tt.want, string(out)); diff != "" {
						t.Errorf("RenderDocument(%s) (-want +got):\n%s", doc, diff)
					}
					if _, err := parseTOML(string(out)); err != nil {
						t.Errorf("output is not valid TOML: %v\n%s", err, out)
					}
					continue
				}
				if err == nil {
					t.Fatalf("RenderDocument(%s) = %q, want an error", doc, out)
				}
				if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
					t.Errorf("RenderDocument(%s) error (-want +got):\n%s", doc, diff)
				}
				var ive *InvalidValueError
				if !errors.As(err, &ive) || ive.Field != tt.field {
					t.Errorf("error %#v is not an *InvalidValueError naming %s", err, tt.field)
				}
			}
		})
	}
	typ := reflect.TypeFor[kc]()
	for _, m := range SupportedFields() {
		f, ok := typ.FieldByNameFunc(func(n string) bool {
			sf, _ := typ.FieldByName(n)
			return jsonName(sf) == m.Field
		})
		if !ok {
			t.Errorf("%s: no such field", m.Field)
			continue
		}
		if k := f.Type.Kind(); k != reflect.Map && k != reflect.Slice && !covered[m.Field] {
			t.Errorf("supported field %s (%s) has no explicit-zero case", m.Field, f.Type)
		}
	}
}

// TestRenderDocumentUnsupportedZeros checks that a field without a
// Bottlerocket setting is reported when the document sets it to its zero
// value: readOnlyPort: 0 or serializeImagePulls: false say something, which
// Bottlerocket would replace with its own value. Render, reading a typed
// configuration, cannot see them; RenderDocument can.
func TestRenderDocumentUnsupportedZeros(t *testing.T) {
	_, err := RenderDocument([]byte("maxPods: 20\nreadOnlyPort: 0\nserializeImagePulls: false\nstaticPodPath: \"\"\nenableServer: false\n" +
		"authentication: {anonymous: {enabled: false}}\nlogging: {vmodule: []}\n"))
	var ufe *UnsupportedFieldsError
	if !errors.As(err, &ufe) {
		t.Fatalf("error = %v, want an *UnsupportedFieldsError", err)
	}
	if diff := cmp.Diff([]string{"authentication", "enableServer", "logging", "readOnlyPort", "serializeImagePulls", "staticPodPath"}, ufe.Fields); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
	// An object that sets nothing in a struct field is not a setting.
	out, err := RenderDocument([]byte("maxPods: 20\nauthentication: {}\nlogging: {vmodule: null}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(header+"max-pods = 20\n", string(out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestRenderDocumentNullAndUnset checks that null means "not set", as in
// every Kubernetes decoder, and that a null map value or list element is an
// error naming its path (as in package provision and kubeadm.RenderDocument).
func TestRenderDocumentNullAndUnset(t *testing.T) {
	out, err := RenderDocument([]byte("maxPods: null\nserverTLSBootstrap: null\nreadOnlyPort: null\nevictionHard: null\neventBurst: 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(header+"event-burst = 5\n", string(out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	_, err = RenderDocument([]byte("evictionHard: {memory.available: null}\nclusterDNS: [10.0.0.1, null]\n"))
	want := "bottlerocket: document: clusterDNS[1]: null is not a value: remove the element (an empty list is [])\n" +
		"bottlerocket: document: evictionHard[memory.available]: null is not a value: remove the key to leave it out (an empty map is {})"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}

// TestRenderDocumentErrors checks the decoding errors.
func TestRenderDocumentErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown field", "kind: KubeletConfiguration\nmaxPod: 3\n", `bottlerocket: document: unknown field "maxPod"`},
		{"duplicate field", "maxPods: 3\nmaxPods: 4\n", "bottlerocket: document: yaml: unmarshal errors:\n  line 2: key \"maxPods\" already set in map"},
		{"wrong type", "maxPods: many\n", `bottlerocket: document: json: cannot unmarshal string into Go struct field KubeletConfiguration.maxPods of type int32`},
		{"wrong kind", "kind: KubeProxyConfiguration\n", `bottlerocket: document: kind "KubeProxyConfiguration", want "KubeletConfiguration"`},
		{"wrong apiVersion", "apiVersion: v1\n", `bottlerocket: document: apiVersion "v1", want "kubelet.config.k8s.io/v1beta1"`},
		{"a list", "- a\n", "bottlerocket: document: not a YAML or JSON object"},
		{"empty", "", "bottlerocket: document: not a YAML or JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderDocument([]byte(tt.doc))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestRenderDocumentAgreesWithRender renders the golden inputs, which set
// no field to its zero value, both ways: the bytes and errors must match.
func TestRenderDocumentAgreesWithRender(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		if strings.Contains(in, "zero") {
			continue
		}
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			fromDoc, errDoc := RenderDocument(data)
			typed, errTyped := Render(loadConfig(t, in))
			if diff := cmp.Diff(string(typed), string(fromDoc)); diff != "" {
				t.Errorf("output (-Render +RenderDocument):\n%s", diff)
			}
			if (errDoc == nil) != (errTyped == nil) || (errDoc != nil && errDoc.Error() != errTyped.Error()) {
				t.Errorf("errors differ: Render %v, RenderDocument %v", errTyped, errDoc)
			}
		})
	}
}
