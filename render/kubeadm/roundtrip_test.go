package kubeadm

import (
	"bytes"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// patchName is kubeadm's file name rule as its documentation states it
// (v1beta4 Patches.Directory): target[suffix][+patchtype].extension, with
// patchtype one of strategic, merge, json and extension yaml or json.
var patchName = regexp.MustCompile(`^(kubeletconfiguration)([^.+\n]*)(?:\+(strategic|merge|json))?\.(?:yaml|json)$`)

// applyLikeKubeadm applies p over base the way kubeadm's patch manager does
// (cmd/kubeadm/app/util/patches, ApplyPatchesToTarget): the type comes from
// the file name, the file is split into YAML documents, each converted to
// JSON and applied in turn, strategic patches with the v1beta1
// KubeletConfiguration as the schema. The result is decoded strictly.
func applyLikeKubeadm(t *testing.T, base []byte, p *Patch) *kubeletv1beta1.KubeletConfiguration {
	t.Helper()
	m := patchName.FindStringSubmatch(p.Name)
	if m == nil {
		t.Fatalf("kubeadm would ignore %q: not a kubeletconfiguration patch name", p.Name)
	}
	data, err := yaml.YAMLToJSON(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(p.Content, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		pj, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("patch is not YAML: %v\n%s", err, doc)
		}
		switch m[3] {
		case "", "strategic":
			data, err = strategicpatch.StrategicMergePatch(data, pj, kubeletv1beta1.KubeletConfiguration{})
		case "merge":
			data, err = jsonpatch.MergePatch(data, pj)
		default:
			t.Fatalf("patch type %q not expected", m[3])
		}
		if err != nil {
			t.Fatalf("applying %s: %v", p.Name, err)
		}
	}
	out := new(kubeletv1beta1.KubeletConfiguration)
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("patched configuration does not decode strictly: %v\n%s", err, data)
	}
	return out
}

// TestRoundTrip applies rendered patches over kubeadm's generated
// configuration (the fixture) and compares with the intended
// configuration: kubeadm's, with the user's fields set.
func TestRoundTrip(t *testing.T) {
	base, err := os.ReadFile(defaultsFixture)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  string
		// typed says whether Render (from the typed struct) can express doc.
		typed  bool
		intend func(c *kubeletv1beta1.KubeletConfiguration)
	}{{
		name: "the design's example",
		doc: `address: 192.168.0.8
port: 20250
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
  imagefs.available: 15%
`,
		typed: true,
		intend: func(c *kubeletv1beta1.KubeletConfiguration) {
			c.Address = "192.168.0.8"
			c.Port = 20250
			c.SerializeImagePulls = ptr.To(false)
			c.EvictionHard = map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"}
		},
	}, {
		name: "nested objects merge with kubeadm's",
		doc: `authentication:
  webhook:
    cacheTTL: 5m
authorization:
  webhook:
    cacheAuthorizedTTL: 1m
logging:
  verbosity: 4
`,
		typed: true,
		intend: func(c *kubeletv1beta1.KubeletConfiguration) {
			c.Authentication.Webhook.CacheTTL = metav1.Duration{Duration: 5 * time.Minute}
			c.Authorization.Webhook.CacheAuthorizedTTL = metav1.Duration{Duration: time.Minute}
			c.Logging.Verbosity = 4
		},
	}, {
		name:  "lists replace kubeadm's",
		doc:   "clusterDNS: [10.100.0.10, 10.100.0.11]\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
		typed: true,
		intend: func(c *kubeletv1beta1.KubeletConfiguration) {
			c.ClusterDNS = []string{"10.100.0.10", "10.100.0.11"}
			c.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
		},
	}, {
		name: "maps merge by key",
		doc: `featureGates:
  KubeletTracing: false
systemReserved:
  cpu: 500m
  memory: 1Gi
`,
		typed: true,
		intend: func(c *kubeletv1beta1.KubeletConfiguration) {
			c.FeatureGates = map[string]bool{"KubeletTracing": false}
			c.SystemReserved = map[string]string{"cpu": "500m", "memory": "1Gi"}
		},
	}, {
		name:  "scalars kubeadm sets are replaced",
		doc:   "resolvConf: /etc/eksa-resolv.conf\ncgroupDriver: cgroupfs\nclusterDomain: example.internal\n",
		typed: true,
		intend: func(c *kubeletv1beta1.KubeletConfiguration) {
			c.ResolverConfig = ptr.To("/etc/eksa-resolv.conf")
			c.CgroupDriver = "cgroupfs"
			c.ClusterDomain = "example.internal"
		},
	}, {
		name: "zero values only a document can say",
		doc:  "rotateCertificates: false\nstaticPodPath: \"\"\n",
		intend: func(c *kubeletv1beta1.KubeletConfiguration) {
			c.RotateCertificates = false
			c.StaticPodPath = ""
		},
	}, {
		name:   "nothing set",
		doc:    "{}\n",
		typed:  true,
		intend: func(*kubeletv1beta1.KubeletConfiguration) {},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := kubeadmDefault()
			tt.intend(want)
			var typed kubeletv1beta1.KubeletConfiguration
			if err := yaml.UnmarshalStrict([]byte(tt.doc), &typed); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{{}, {PatchType: Strategic}, {Suffix: "0-user", PatchType: Merge}} {
				p, err := RenderDocument([]byte(tt.doc), opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, applyLikeKubeadm(t, base, p), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("RenderDocument %s (-intended +patched):\n%s", p.Name, diff)
				}
				if !tt.typed {
					continue
				}
				p, err = Render(&typed, opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, applyLikeKubeadm(t, base, p), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Render %s (-intended +patched):\n%s", p.Name, diff)
				}
			}
		})
	}
}

// TestRenderZeroValuesKeepKubeadms pins the documented limit of Render: a
// typed false cannot be told from unset, so kubeadm's true stays.
func TestRenderZeroValuesKeepKubeadms(t *testing.T) {
	base, err := os.ReadFile(defaultsFixture)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Render(&kubeletv1beta1.KubeletConfiguration{RotateCertificates: false, MaxPods: 50}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := applyLikeKubeadm(t, base, p)
	if !got.RotateCertificates || got.MaxPods != 50 {
		t.Errorf("rotateCertificates = %v, maxPods = %d; want kubeadm's true and 50", got.RotateCertificates, got.MaxPods)
	}
}
