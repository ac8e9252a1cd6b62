package source

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

func TestNewFixedOptions(t *testing.T) {
	ok := FixedOptions{Client: fake.NewClientset(), Namespace: "kube-system", Name: "kube-proxy", PayloadKey: "config.conf"}
	for _, tc := range []struct {
		name   string
		mutate func(*FixedOptions)
		want   string // substring of the error; "" for success
	}{
		{"valid", func(*FixedOptions) {}, ""},
		{"no client", func(o *FixedOptions) { o.Client = nil }, "FixedOptions.Client is required"},
		{"no namespace", func(o *FixedOptions) { o.Namespace = "" }, "FixedOptions.Namespace is required"},
		{"bad namespace", func(o *FixedOptions) { o.Namespace = "kube.system" }, `FixedOptions.Namespace "kube.system" is invalid`},
		{"no name", func(o *FixedOptions) { o.Name = "" }, "FixedOptions.Name is required"},
		{"bad name", func(o *FixedOptions) { o.Name = "a,metadata.name=b" }, `FixedOptions.Name "a,metadata.name=b" is invalid`},
		{"no payload key", func(o *FixedOptions) { o.PayloadKey = "" }, "FixedOptions.PayloadKey is required"},
		{"bad payload key", func(o *FixedOptions) { o.PayloadKey = "../x" }, `FixedOptions.PayloadKey "../x" is invalid`},
		{"negative resync", func(o *FixedOptions) { o.Resync = -1 }, "FixedOptions.Resync must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ok
			tc.mutate(&opts)
			f, err := NewFixed(opts)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if f.opts.Resync != DefaultResync || f.opts.Clock == nil {
					t.Errorf("defaults not applied: resync %v, clock %v", f.opts.Resync, f.opts.Clock)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewFixed error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFixedAssigned(t *testing.T) {
	cm := cmap("kube-system", "kube-proxy", "uid-1", "7", map[string]string{"config.conf": "x"})
	for _, tc := range []struct {
		name    string
		objs    []k8sruntime.Object
		key     string
		getErr  error
		want    Assignment
		wantErr string
		invalid bool
	}{
		{
			name: "current UID", objs: []k8sruntime.Object{cm}, key: "config.conf",
			want: Assignment{Source: resolvedRef("kube-system", "kube-proxy", "uid-1", "7", "config.conf"), ConfigMap: withType(cm)},
		},
		{name: "absent", key: "config.conf", wantErr: "ConfigMap kube-system/kube-proxy does not exist", invalid: true},
		{name: "missing key", objs: []k8sruntime.Object{cm}, key: "other", wantErr: `ConfigMap kube-system/kube-proxy (UID: uid-1) has no key "other"`, invalid: true},
		{name: "API error", objs: []k8sruntime.Object{cm}, key: "config.conf", getErr: apierrors.NewTooManyRequests("slow down", 1),
			wantErr: "get ConfigMap kube-system/kube-proxy: slow down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objs...)
			if tc.getErr != nil {
				client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
					return true, nil, tc.getErr
				})
			}
			f, err := NewFixed(FixedOptions{Client: client, Namespace: "kube-system", Name: "kube-proxy", PayloadKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Assigned(context.Background())
			checkAssigned(t, got, err, tc.want, tc.wantErr, false, tc.invalid)
		})
	}
}

// TestFixedRun checks that Run calls back on every change of the
// ConfigMap and that the assignment follows its UID through a delete and
// re-create.
func TestFixedRun(t *testing.T) {
	cm := cmap("kube-system", "kube-proxy", "uid-1", "7", map[string]string{"config.conf": "x"})
	other := cmap("kube-system", "unrelated", "uid-u", "8", map[string]string{"config.conf": "u"})
	client := fake.NewClientset(cm, other)
	watches := recordConfigMapWatches(client)
	f, err := NewFixed(FixedOptions{Client: client, Namespace: "kube-system", Name: "kube-proxy", PayloadKey: "config.conf",
		Clock: testingclock.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := observe(t, f)
	o.waitFor("kube-system/kube-proxy uid=uid-1 rv=7 data=map[config.conf:x]")
	watches.waitOpen(t, map[string]int{"kube-system metadata.name=kube-proxy": 1})

	updateConfigMap(t, client, "kube-system", "kube-proxy", "9", map[string]string{"config.conf": "y"})
	o.waitFor("kube-system/kube-proxy uid=uid-1 rv=9 data=map[config.conf:y]")

	if err := client.CoreV1().ConfigMaps("kube-system").Delete(ctx, "kube-proxy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o.waitFor("error: ConfigMap kube-system/kube-proxy does not exist")

	re := cmap("kube-system", "kube-proxy", "uid-2", "10", map[string]string{"config.conf": "z"})
	if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, re, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o.waitFor("kube-system/kube-proxy uid=uid-2 rv=10 data=map[config.conf:z]")

	// With a synced cache, Assigned makes no request.
	eventually(t, "cache synced", func() bool {
		f.mu.Lock()
		w := f.watch
		f.mu.Unlock()
		c, ok := w.lookup("kube-system", "kube-proxy")
		return ok && c.UID == "uid-2"
	})
	client.ClearActions()
	if a, err := f.Assigned(ctx); err != nil || a.Source.ConfigMap.UID != "uid-2" {
		t.Fatalf("Assigned = %+v, %v", a, err)
	}
	if got := gets(client); len(got) != 0 {
		t.Errorf("with a synced cache, Assigned made GETs %q, want none", got)
	}

	o.shutdown()
	watches.waitOpen(t, map[string]int{})
}

// TestFixedRunResync steps a fake clock past the jittered resync period.
// The ConfigMap does not exist, so no informer event can call back instead.
func TestFixedRunResync(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f, err := NewFixed(FixedOptions{Client: fake.NewClientset(), Namespace: "ns", Name: "cm", PayloadKey: "k", Clock: clk, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	o := observe(t, f)
	for range 3 {
		eventually(t, "resync timer set", clk.HasWaiters)
		clk.Step(time.Hour + time.Hour/10 + time.Second)
		o.waitFor("error: ConfigMap ns/cm does not exist")
	}
}
