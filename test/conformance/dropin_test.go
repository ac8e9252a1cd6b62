package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletconfigv1beta1 "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
)

// dropInCases is how many base + drop-in sets TestKubeletDropIns generates
// per run (a tenth with -short). Each case writes files: fewer than the
// other tests.
const dropInCases = 1000

// TestKubeletDropIns: on generated base files and drop-in sets, the
// kubelet profile's merge (merge.Pipeline with kubelet.Profile) gives the
// configuration the kubelet's own --config-dir merge gives, field for field
// on the kubelet's internal type (what the kubelet runs with).
//
// The kubelet's side is upstream's code step by step, in the order
// cmd/kubelet/app runs it: the config file loaded by the kubelet's loader
// (decoding with defaults, through the internal type) and given the
// eviction defaults (loadConfigFile); then converted to v1beta1, encoded,
// each drop-in (read by the kubelet's loader) applied as a JSON merge patch,
// decoded, given the v1beta1 defaults again and converted to the internal
// type (mergeKubeletConfigurations).
//
// Drop-ins set a few fields each, delete some (null), set single map keys
// and delete them; every eviction map and evictionHard: null come up often.
// Neither side validates: only the merge is compared. Generated paths are
// absolute (the kubelet resolves relative paths in its config file against
// the file's directory; the merge does not).
func TestKubeletDropIns(t *testing.T) {
	ours, err := merge.New[kubeletv1beta1.KubeletConfiguration](mergeOnly{}, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	forEachCase(t, 3_000_000, dropInCases, func(t *testing.T, seed int64, r *rand.Rand) {
		base, dropIns := dropInInput(r)

		want, err := kubeletDropInMerge(t, base, dropIns)
		if err != nil {
			t.Fatalf("seed %d: the kubelet's merge failed: %v\nbase:\n%s\ndrop-ins:\n%s", seed, err, base, strings.Join(dropIns, "---\n"))
		}
		layers := merge.Layers{Base: &merge.Document{Name: "kubelet.yaml", Data: []byte(base)}}
		for i, d := range dropIns {
			layers.DropIns = append(layers.DropIns, merge.Document{Name: fmt.Sprintf("%02d.conf", i), Data: []byte(d)})
		}
		res, err := ours.Merge(layers)
		if err != nil {
			t.Fatalf("seed %d: Merge: %v", seed, err)
		}
		got := toInternal(t, res.Object)
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("seed %d: our drop-in merge differs from the kubelet's (-kubelet +ours):\n%s\nbase:\n%s\ndrop-ins:\n%s", seed, diff, base, strings.Join(dropIns, "---\n"))
		}
	})
}

// mergeOnly is the kubelet profile without validation: the test compares
// merges, valid or not.
type mergeOnly struct{ kubelet.Profile }

func (mergeOnly) Validate(*kubeletv1beta1.KubeletConfiguration) field.ErrorList { return nil }

// kubeletDropInMerge runs the kubelet's config-file and --config-dir steps
// on files written to a temporary directory.
func kubeletDropInMerge(t *testing.T, base string, dropIns []string) (*kubeletconfig.KubeletConfiguration, error) {
	dir := t.TempDir()
	baseFile := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(baseFile, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, baseFile)
	if err != nil {
		return nil, err
	}
	kc, err := loader.Load(context.Background())
	if err != nil {
		return nil, fmt.Errorf("loading the config file: %w", err)
	}
	switch {
	case kc.EvictionHard == nil:
		kc.EvictionHard = map[string]string{}
		for k, v := range eviction.DefaultEvictionHard {
			kc.EvictionHard[k] = v
		}
	case kc.MergeDefaultEvictionSettings:
		for k, v := range eviction.DefaultEvictionHard {
			if _, ok := kc.EvictionHard[k]; !ok {
				kc.EvictionHard[k] = v
			}
		}
	}

	versioned := &kubeletv1beta1.KubeletConfiguration{}
	if err := scheme.Convert(kc, versioned, nil); err != nil {
		return nil, err
	}
	doc, err := json.Marshal(versioned)
	if err != nil {
		return nil, err
	}
	confDir := filepath.Join(dir, "kubelet.conf.d")
	if err := os.Mkdir(confDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, d := range dropIns {
		name := filepath.Join(confDir, fmt.Sprintf("%02d.conf", i))
		if err := os.WriteFile(name, []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, name)
		if err != nil {
			return nil, err
		}
		patch, _, err := l.LoadIntoJSON()
		if err != nil {
			return nil, fmt.Errorf("loading drop-in %d: %w", i, err)
		}
		if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return nil, fmt.Errorf("merging drop-in %d: %w", i, err)
		}
	}
	merged := &kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(doc, merged); err != nil {
		return nil, err
	}
	kubeletconfigv1beta1.SetDefaults_KubeletConfiguration(merged)
	out := &kubeletconfig.KubeletConfiguration{}
	if err := scheme.Convert(merged, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// dropInInput generates a base file and one to four drop-ins, as YAML.
func dropInInput(r *rand.Rand) (base string, dropIns []string) {
	g := newKubeletGen(r, 0.15, 0.05)
	// Absolute paths only (see TestKubeletDropIns).
	g.pools["staticPodPath"] = pool{good: anyOf("/etc/kubernetes/manifests")}
	g.pools["podLogsDir"] = pool{good: anyOf("/var/log/pods", "/var/log/kubelet-pods")}
	// JSON, which the kubelet encodes the base in, has no NaN.
	g.pools["memoryThrottlingFactor"] = pool{good: anyOf(0.9, 0.8, 1.0), bad: anyOf(0.0, 1.5)}
	b := &kubeletv1beta1.KubeletConfiguration{}
	g.fill(b)
	b.FeatureGates = g.validGates()
	base = toDoc(setFields(reflect.ValueOf(b).Elem()))

	for n := 1 + r.Intn(4); n > 0; n-- {
		dg := newKubeletGen(r, 0.04, 0.05)
		dg.pools = g.pools
		d := &kubeletv1beta1.KubeletConfiguration{}
		dg.fill(d)
		m := setFields(reflect.ValueOf(d).Elem())
		if m == nil {
			m = map[string]any{}
		}
		// Single eviction signals, set and deleted.
		for _, f := range []string{"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim"} {
			if dg.chance(0.15) {
				vals := evictionValues
				if f == "evictionSoftGracePeriod" {
					vals = graceValues
				}
				entry := map[string]any{pick(dg, evictionSignals...): pick(dg, vals...)}
				if dg.chance(0.3) {
					entry[pick(dg, evictionSignals...)] = nil
				}
				m[f] = entry
			}
		}
		// Whole fields deleted.
		for _, f := range []string{"evictionHard", "port", "maxPods", "enforceNodeAllocatable", "nodeStatusUpdateFrequency", "serializeImagePulls", "mergeDefaultEvictionSettings", "clusterDNS", "authentication"} {
			if dg.chance(0.04) {
				m[f] = nil
			}
		}
		if dg.chance(0.1) {
			m["mergeDefaultEvictionSettings"] = true
		}
		dropIns = append(dropIns, toDoc(m))
	}
	return base, dropIns
}

// setFields returns the JSON form of the fields of v that hold something
// other than their zero value (nil when none do), as a person would write
// them: no "0s" for every duration left alone.
func setFields(v reflect.Value) map[string]any {
	raw, err := json.Marshal(v.Addr().Interface())
	if err != nil {
		panic(err)
	}
	var full map[string]any
	if err := json.Unmarshal(raw, &full); err != nil {
		panic(err)
	}
	out := map[string]any{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fv := v.Field(i)
		if !f.IsExported() || name == "-" || fv.IsZero() {
			continue
		}
		if name == "" {
			if f.Anonymous && fv.Kind() == reflect.Struct {
				for k, x := range setFields(fv) { // inlined
					out[k] = x
				}
			}
			continue
		}
		if fv.Kind() == reflect.Struct && !isLeafStruct(fv.Type()) {
			if sub := setFields(fv); sub != nil {
				out[name] = sub
			}
			continue
		}
		out[name] = full[name]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isLeafStruct: structs with their own JSON form (durations, quantities,
// times) are values, not objects to walk.
func isLeafStruct(t reflect.Type) bool {
	_, ok := reflect.New(t).Interface().(json.Unmarshaler)
	return ok
}

// toDoc renders a configuration document: JSON, which is YAML too.
func toDoc(m map[string]any) string {
	if m == nil {
		m = map[string]any{}
	}
	m["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	m["kind"] = "KubeletConfiguration"
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}
