package merge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

func TestReadDropIns(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"20-b.conf":         "b",
		"10-a.conf":         "a",
		"README.md":         "not config",
		"30-c.conf.bak":     "backup",
		"sub/05-x.conf":     "x",
		"sub/notes.txt":     "notes",
		"99-last.conf":      "last",
		"zz-dir/01-y.conf":  "y",
		".hidden/00-h.conf": "h",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{Logger: log})

	docs, err := p.ReadDropIns(dir)
	if err != nil {
		t.Fatalf("ReadDropIns: %v", err)
	}
	var got []string
	for _, d := range docs {
		rel, _ := filepath.Rel(dir, d.Name)
		got = append(got, rel+"="+string(d.Data))
	}
	want := []string{".hidden/00-h.conf=h", "10-a.conf=a", "20-b.conf=b", "99-last.conf=last", "sub/05-x.conf=x", "zz-dir/01-y.conf=y"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("drop-ins (-want +got):\n%s", diff)
	}
	if len(logged) != 3 {
		t.Errorf("logged %d skipped files, want 3: %q", len(logged), logged)
	}
	for _, skipped := range []string{"README.md", "30-c.conf.bak", "notes.txt"} {
		if !strings.Contains(strings.Join(logged, "\n"), skipped) {
			t.Errorf("skipping %s was not logged: %q", skipped, logged)
		}
	}

	empty := t.TempDir()
	if docs, err := p.ReadDropIns(empty); err != nil || len(docs) != 0 {
		t.Errorf("empty dir: %v, %v", docs, err)
	}
	_, err = p.ReadDropIns(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: %v, want an error wrapping fs.ErrNotExist naming the dir", err)
	}
}

// TestDropInSemantics: the kubelet's --config-dir semantics, one rule a row.
func TestDropInSemantics(t *testing.T) {
	base := kubeletHeader + `
port: 10250
clusterDNS: [10.96.0.10, 10.96.0.11]
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
featureGates:
  A: true
authentication:
  webhook:
    enabled: true
    cacheTTL: 2m
`
	tests := []struct {
		name    string
		dropIns []string
		want    func(c *kubeletConfig)
	}{
		{
			name:    "lists are replaced",
			dropIns: []string{"clusterDNS: [10.0.0.1]"},
			want:    func(c *kubeletConfig) { c.ClusterDNS = []string{"10.0.0.1"} },
		},
		{
			name:    "maps merge by key",
			dropIns: []string{"evictionHard:\n  memory.available: 200Mi\n  imagefs.available: 15%"},
			want: func(c *kubeletConfig) {
				c.EvictionHard = map[string]string{"memory.available": "200Mi", "nodefs.available": "10%", "imagefs.available": "15%"}
			},
		},
		{
			name:    "null deletes a map key",
			dropIns: []string{"evictionHard:\n  nodefs.available: null"},
			want:    func(c *kubeletConfig) { c.EvictionHard = map[string]string{"memory.available": "100Mi"} },
		},
		{
			name:    "null deletes a field",
			dropIns: []string{"port: null\nfeatureGates: null"},
			want:    func(c *kubeletConfig) { c.Port = 0; c.FeatureGates = nil },
		},
		{
			name:    "structs merge by field",
			dropIns: []string{"authentication:\n  webhook:\n    cacheTTL: 5m\n  anonymous:\n    enabled: false"},
			want: func(c *kubeletConfig) {
				c.Authentication.Webhook.CacheTTL = metav1.Duration{Duration: 5 * time.Minute}
				c.Authentication.Anonymous.Enabled = ptr.To(false)
			},
		},
		{
			name:    "later drop-ins win",
			dropIns: []string{"port: 1\nmaxPods: 10", "port: 2", "port: 3\nfeatureGates:\n  A: false\n  B: true"},
			want: func(c *kubeletConfig) {
				c.Port, c.MaxPods = 3, 10
				c.FeatureGates = map[string]bool{"A": false, "B": true}
			},
		},
		{
			name:    "an empty list replaces",
			dropIns: []string{"clusterDNS: []"},
			want:    func(c *kubeletConfig) { c.ClusterDNS = []string{} },
		},
		{
			name:    "nulls inside a new object vanish",
			dropIns: []string{"authorization:\n  mode: Webhook\n  webhook: null"},
			want:    func(c *kubeletConfig) { c.Authorization.Mode = "Webhook" },
		},
	}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	baseRes, err := p.Merge(Layers{Base: doc("kubelet.yaml", base)})
	if err != nil {
		t.Fatalf("base: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dropIns []Document
			for i, d := range tt.dropIns {
				dropIns = append(dropIns, Document{Name: fmt.Sprintf("%02d.conf", i), Data: []byte(kubeletHeader + d)})
			}
			res, err := p.Merge(Layers{Base: doc("kubelet.yaml", base), DropIns: dropIns})
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			want := *baseRes.Object
			want.EvictionHard = clone(want.EvictionHard)
			want.FeatureGates = clone(want.FeatureGates)
			tt.want(&want)
			if diff := cmp.Diff(want, *res.Object); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestDropInsFromDirectory runs the whole directory path: lexical order
// decides, non-.conf files do not count.
func TestDropInsFromDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "20-second.conf"), kubeletHeader+"maxPods: 20\nport: 2")
	writeFile(t, filepath.Join(dir, "10-first.conf"), kubeletHeader+"maxPods: 10\nreadOnlyPort: 1")
	writeFile(t, filepath.Join(dir, "30-ignored.yaml"), kubeletHeader+"maxPods: 30")
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	dropIns, err := p.ReadDropIns(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Merge(Layers{Base: doc("kubelet.yaml", kubeletHeader+"maxPods: 5\nport: 1"), DropIns: dropIns})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if c := res.Object; c.MaxPods != 20 || c.Port != 2 || c.ReadOnlyPort != 1 {
		t.Errorf("maxPods=%d port=%d readOnlyPort=%d, want 20 2 1", c.MaxPods, c.Port, c.ReadOnlyPort)
	}
	if got := res.Provenance["maxPods"]; got != filepath.Join(dir, "20-second.conf") {
		t.Errorf("provenance of maxPods = %q", got)
	}
}

// TestDropInErrors: bad drop-ins are errors naming the file, all at once.
func TestDropInErrors(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	_, err := p.Merge(Layers{
		Base: doc("kubelet.yaml", kubeletHeader+"port: 1"),
		DropIns: []Document{
			{Name: "/etc/kubelet.conf.d/10-empty.conf", Data: []byte("\n# nothing\n")},
			{Name: "/etc/kubelet.conf.d/20-kindless.conf", Data: []byte("port: 2\n")},
			{Name: "/etc/kubelet.conf.d/30-typo.conf", Data: []byte(kubeletHeader + "evictonHard:\n  memory.available: 1Gi\n")},
			{Name: "/etc/kubelet.conf.d/40-fine.conf", Data: []byte(kubeletHeader + "port: 4\n")},
		},
	})
	want := strings.Join([]string{
		`/etc/kubelet.conf.d/10-empty.conf: document is empty`,
		`/etc/kubelet.conf.d/20-kindless.conf: apiVersion: missing, expected "kubelet.config.k8s.io/v1beta1"`,
		`/etc/kubelet.conf.d/20-kindless.conf: kind: missing, expected "KubeletConfiguration"`,
		`/etc/kubelet.conf.d/30-typo.conf: unknown field "evictonHard"`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got error:\n%v\nwant:\n%s", err, want)
	}
	var me *Error
	if !errors.As(err, &me) || len(me.Decode) != 3 {
		t.Errorf("want an *Error with 3 DecodeErrors, got %#v", me)
	}
}

// TestDropInMatchesJSONMergePatch is a property test: over generated
// configurations, our drop-in merge decodes to the same object as the
// kubelet's way: the base decoded, defaulted (a no-op here) and encoded with
// encoding/json, jsonpatch.MergePatch per drop-in, then a strict decode.
// (test/conformance compares with the kubelet's own code and defaults.)
func TestDropInMatchesJSONMergePatch(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	gvk := [2]string{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"}
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		g := &gen{r: r, fieldProb: 0.15}
		baseDoc := g.document(t, p.root, gvk)
		g.nulls, g.fieldProb = true, 0.08
		var dropIns []Document
		for i := 0; i < 1+r.Intn(3); i++ {
			dropIns = append(dropIns, Document{Name: fmt.Sprintf("%d.conf", i), Data: g.document(t, p.root, gvk)})
		}

		res, err := p.Merge(Layers{Base: &Document{Name: "base", Data: baseDoc}, DropIns: dropIns})
		if err != nil {
			t.Fatalf("seed %d: Merge: %v\nbase:\n%s", seed, err, baseDoc)
		}

		var decodedBase kubeletConfig
		if err := yaml.UnmarshalStrict(baseDoc, &decodedBase); err != nil {
			t.Fatal(err)
		}
		merged, err := json.Marshal(&decodedBase)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dropIns {
			pj, err := yaml.YAMLToJSON(d.Data)
			if err != nil {
				t.Fatal(err)
			}
			if merged, err = jsonpatch.MergePatch(merged, pj); err != nil {
				t.Fatalf("seed %d: MergePatch: %v", seed, err)
			}
		}
		var want kubeletConfig
		if strict, err := kjson.UnmarshalStrict(merged, &want); err != nil || len(strict) > 0 {
			t.Fatalf("seed %d: decoding the jsonpatch result: %v %v", seed, err, strict)
		}
		if diff := cmp.Diff(want, *res.Object); diff != "" {
			t.Fatalf("seed %d: ours differs from jsonpatch.MergePatch (-jsonpatch +ours):\n%s\nbase:\n%s\ndrop-ins: %q", seed, diff, baseDoc, dropIns)
		}
	}
}

// dropInDefaulterProfile is kubeletTestProfile with a narrower defaulter for
// drop-in merges, which leaves evictionHard alone (as the kubelet's does).
type dropInDefaulterProfile struct {
	kubeletTestProfile
	calls *int
}

func (p dropInDefaulterProfile) DefaultDropInMerge(c *kubeletConfig) {
	*p.calls++
	hard := c.EvictionHard
	p.kubeletTestProfile.Default(c)
	c.EvictionHard = hard
}

// TestDropInsMergeIntoTheDefaultedBase: with drop-ins, the base is defaulted
// before they merge into it (a drop-in setting one map key keeps the
// default keys), the result is defaulted with DefaultDropInMerge when the
// profile has it, and what the layers set (MergedJSON, provenance, the
// policy's UserWins) does not count the base's defaults.
func TestDropInsMergeIntoTheDefaultedBase(t *testing.T) {
	calls := 0
	prof := dropInDefaulterProfile{calls: &calls}
	p := newPipeline(t, Profile[kubeletConfig](prof), Options{Policy: Policy{
		Owner:    "platform",
		Platform: []PlatformValue{{Path: "port", Value: 10255, Rule: UserWins}},
	}})
	base := doc("kubelet.yaml", kubeletHeader+"maxPods: 50\n")
	drop := Document{Name: "10.conf", Data: []byte(kubeletHeader + "evictionHard:\n  memory.available: 1Gi\n")}

	var plain kubeletConfig
	prof.kubeletTestProfile.Default(&plain)

	res, err := p.Merge(Layers{Base: base, DropIns: []Document{drop}})
	if err != nil {
		t.Fatal(err)
	}
	want := clone(plain.EvictionHard)
	want["memory.available"] = "1Gi"
	if diff := cmp.Diff(want, res.Object.EvictionHard); diff != "" {
		t.Errorf("evictionHard (-want +got):\n%s", diff)
	}
	if calls != 1 {
		t.Errorf("DefaultDropInMerge called %d times, want 1", calls)
	}
	if res.Object.Port != 10255 {
		t.Errorf("port = %d: a UserWins platform value must apply when only the defaults set the field", res.Object.Port)
	}
	var merged, wantMerged map[string]any
	if err := json.Unmarshal(res.MergedJSON(), &merged); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50,"port":10255,"evictionHard":{"memory.available":"1Gi"}}`), &wantMerged)
	if diff := cmp.Diff(wantMerged, merged); diff != "" {
		t.Errorf("MergedJSON: only what the layers set (-want +got):\n%s", diff)
	}
	for path, layer := range map[string]string{
		"maxPods":                        "kubelet.yaml",
		"evictionHard[memory.available]": "10.conf",
		"port":                           "platform",
		"syncFrequency":                  DefaultsLayer,
	} {
		if got := res.Provenance[path]; got != layer {
			t.Errorf("provenance of %s = %q, want %q", path, got, layer)
		}
	}
	for path, layer := range res.Provenance {
		if strings.HasPrefix(path, "evictionHard[") && path != "evictionHard[memory.available]" && layer != DefaultsLayer {
			t.Errorf("provenance of %s = %q, want %q", path, layer, DefaultsLayer)
		}
	}

	// Without drop-ins: Default, once.
	calls = 0
	res, err = p.Merge(Layers{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("DefaultDropInMerge called without drop-ins")
	}
	if diff := cmp.Diff(plain.EvictionHard, res.Object.EvictionHard); diff != "" {
		t.Errorf("evictionHard without drop-ins (-want +got):\n%s", diff)
	}
}
