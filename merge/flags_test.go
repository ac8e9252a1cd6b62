package merge

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// mapStringBool is a --feature-gates style flag value, as component-base's
// cliflag.MapStringBool renders it: "A=true,B=false".
type mapStringBool map[string]bool

func (m mapStringBool) String() string {
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s=%t", k, v))
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func (m mapStringBool) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		m[k] = b
	}
	return nil
}

func (mapStringBool) Type() string { return "mapStringBool" }

func kubeletFlags() (*pflag.FlagSet, map[string]FlagBinding) {
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.Int32("port", 10250, "")
	fs.Int32("max-pods", 110, "")
	fs.StringSlice("cluster-dns", nil, "")
	fs.Duration("sync-frequency", time.Minute, "")
	fs.Bool("fail-swap-on", true, "")
	fs.String("hostname-override", "", "not a config field")
	fs.Var(mapStringBool{}, "feature-gates", "")
	fs.String("provider-id", "", "")
	bindings := map[string]FlagBinding{
		"port":           {Path: "port"},
		"max-pods":       {Path: "maxPods"},
		"cluster-dns":    {Path: "clusterDNS"},
		"sync-frequency": {Path: "syncFrequency"},
		"fail-swap-on":   {Path: "failSwapOn"},
		"feature-gates":  {Path: "featureGates", Merge: true},
		"provider-id":    {Path: "providerID"},
	}
	return fs, bindings
}

func TestFlagOverrides(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{})
	fs, bindings := kubeletFlags()
	args := []string{"--port=10251", "--cluster-dns=10.0.0.10,10.0.0.11", "--sync-frequency=30s",
		"--fail-swap-on=false", "--hostname-override=node-1", "--feature-gates=B=true,C=false"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	overrides, err := p.FlagOverrides(fs, bindings)
	if err != nil {
		t.Fatalf("FlagOverrides: %v", err)
	}
	wantOverrides := []Override{
		{Path: "clusterDNS", Value: []any{"10.0.0.10", "10.0.0.11"}, Source: "flag --cluster-dns"},
		{Path: "failSwapOn", Value: false, Source: "flag --fail-swap-on"},
		{Path: "featureGates", Value: map[string]any{"B": true, "C": false}, Source: "flag --feature-gates", Merge: true},
		{Path: "port", Value: json.Number("10251"), Source: "flag --port"},
		{Path: "syncFrequency", Value: "30s", Source: "flag --sync-frequency"},
	}
	if diff := cmp.Diff(wantOverrides, overrides); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}

	res, err := p.Merge(Layers{
		Base:     doc("kubelet.yaml", kubeletHeader+"port: 1\nmaxPods: 30\nclusterDNS: [1.1.1.1]\nfeatureGates:\n  A: true\n  B: false\n"),
		Instance: doc("instance.yaml", kubeletHeader+"port: 2\n"),
		Flags:    overrides,
	})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	c := res.Object
	if c.Port != 10251 || c.MaxPods != 30 || *c.FailSwapOn || c.SyncFrequency.Duration != 30*time.Second {
		t.Errorf("port=%d maxPods=%d failSwapOn=%v syncFrequency=%v", c.Port, c.MaxPods, *c.FailSwapOn, c.SyncFrequency)
	}
	if diff := cmp.Diff([]string{"10.0.0.10", "10.0.0.11"}, c.ClusterDNS); diff != "" {
		t.Errorf("clusterDNS (-want +got):\n%s", diff)
	}
	// --feature-gates merges into the file's gates, as the kubelet does.
	if diff := cmp.Diff(map[string]bool{"A": true, "B": true, "C": false}, c.FeatureGates); diff != "" {
		t.Errorf("featureGates (-want +got):\n%s", diff)
	}
	for path, want := range map[string]string{
		"port":                           "flag --port",
		"maxPods":                        "kubelet.yaml",
		"featureGates[A]":                "kubelet.yaml",
		"featureGates[B]":                "flag --feature-gates",
		"clusterDNS":                     "flag --cluster-dns",
		"syncFrequency":                  "flag --sync-frequency",
		"fileCheckFrequency":             DefaultsLayer,
		"authentication.x509":            "",
		"kind":                           "instance.yaml",
		"authorization.mode":             DefaultsLayer,
		"featureGates":                   "",
		"featureGates[C]":                "flag --feature-gates",
		"evictionHard":                   "",
		"evictionHard[memory.available]": DefaultsLayer,
	} {
		if got := res.Provenance[path]; got != want {
			t.Errorf("provenance[%s] = %q, want %q", path, got, want)
		}
	}
}

func TestOverrideErrors(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	_, err := p.Merge(Layers{
		Base: doc("kubelet.yaml", kubeletHeader),
		Flags: []Override{
			{Path: "port", Value: "ten", Source: "flag --port"},
			{Path: "nope", Value: 1, Source: "flag --nope"},
			{Path: "featureGates", Value: map[string]any{"A": "yes"}},
			{Path: "authentication.webhook.cacheTTL", Value: "5 minutes", Source: "flag --authentication-token-webhook-cache-ttl"},
		},
	})
	want := strings.Join([]string{
		`flag --port: port: expected int32, got string "ten"`,
		`flag --nope: field path "nope": no field "nope" in v1beta1.KubeletConfiguration`,
		`flags: featureGates[A]: expected bool, got string "yes"`,
		`flag --authentication-token-webhook-cache-ttl: authentication.webhook.cacheTTL: cannot decode string "5 minutes" as v1.Duration: time: unknown unit " minutes" in duration "5 minutes"`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}

	fs, bindings := kubeletFlags()
	bindings["max-pods"] = FlagBinding{Path: "authentication"}
	if err := fs.Parse([]string{"--max-pods=3"}); err != nil {
		t.Fatal(err)
	}
	_, err = p.FlagOverrides(fs, bindings)
	if want := "merge: flag --max-pods (authentication): bound to an object; bind flags to single fields"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestOverrideDeleteAndPaths: a nil value deletes, map keys can be set one by one.
func TestOverrideDeleteAndPaths(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	res, err := p.Merge(Layers{
		Base: doc("kubelet.yaml", kubeletHeader+"port: 1\nevictionHard:\n  memory.available: 1Gi\n"),
		Flags: []Override{
			{Path: "port", Value: nil},
			{Path: "evictionHard[nodefs.available]", Value: "10%"},
			{Path: "authentication.anonymous.enabled", Value: true},
		},
	})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	c := res.Object
	if c.Port != 0 || !*c.Authentication.Anonymous.Enabled {
		t.Errorf("port=%d anonymous=%v", c.Port, c.Authentication.Anonymous.Enabled)
	}
	if diff := cmp.Diff(map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}, c.EvictionHard); diff != "" {
		t.Errorf("evictionHard (-want +got):\n%s", diff)
	}
}
