package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig/checkpoint"
)

const (
	renderBase  = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\nport: 10250\n"
	renderDrop  = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 70\n"
	renderInst  = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 10251\n"
	renderProxy = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n"
	// remotePayload is the assigned ConfigMap's config.
	remotePayload = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\nserializeImagePulls: false\n"
)

// renderEnv is what render reads: local files, a state dir whose current is
// a checkpoint of the ConfigMap remote, and an API server with node n1
// assigned remote.
type renderEnv struct {
	dir, stateDir string
	remote        *corev1.ConfigMap
	nodes         []runtime.Object
}

func newRenderEnv(t *testing.T) *renderEnv {
	t.Helper()
	e := &renderEnv{dir: t.TempDir()}
	for name, content := range map[string]string{
		"base.yaml": renderBase, "conf.d/10-pods.conf": renderDrop, "conf.d/README": "not a drop-in", "inst.yaml": renderInst,
		"proxy.yaml": renderProxy, "bad.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -1\nPort: 1\n",
		"badinst.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeAPIQPS: -2\n",
	} {
		writeTestFile(t, filepath.Join(e.dir, name), content)
	}
	e.remote = newConfigMap("kube-system", "kubelet-r", "uid-r", "7", map[string]string{"kubelet": remotePayload})
	e.stateDir = filepath.Join(e.dir, "state")
	s := openStore(t, e.stateDir, "v1", nil)
	if _, err := s.Save(e.remote); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrent(sourceOf(e.remote)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.nodes = []runtime.Object{
		e.remote,
		node("n1", map[string]string{"dynconfig.io/config-source": `{"configMap":{"namespace":"kube-system","name":"kubelet-r","uid":"uid-r","kubeletConfigKey":"kubelet"}}`}),
		node("n2", nil),
		node("n3", map[string]string{"dynconfig.io/config-source": `{"configMap":{"namespace":"kube-system","name":"gone","uid":"uid-g"}}`}),
		node("n4", map[string]string{"dynconfig.io/config-source": `{"configMap":{"namespace":"kube-system","name":"kubelet-r","uid":"uid-old"}}`}),
		node("n5", map[string]string{"dynconfig.io/config-source": `{"configMap":{"namespace":"kube-system","name":"kubelet-r","uid":"uid-r","kubeletConfigKey":"other"}}`}),
		node("n6", map[string]string{"dynconfig.io/config-source": `{"configMap":{"namespace":"kube-system","name":"kubelet-r"}}`}),
		// The legacy spec.configSource, which the kubelet's Node source
		// falls back to without the annotation.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n7"}, Spec: corev1.NodeSpec{ConfigSource: sourceOf(e.remote)}},
	}
	return e
}

func (e *renderEnv) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	client := fake.NewClientset(e.nodes...)
	d := testDeps(t, nil)
	d.newClient = func(f *genericclioptions.ConfigFlags) (apiClient, error) {
		return apiClient{client: client, namespace: namespaceOf(f)}, nil
	}
	var expanded []string
	for _, a := range args {
		a = strings.ReplaceAll(a, "$STATE", e.stateDir)
		expanded = append(expanded, strings.ReplaceAll(a, "$D", e.dir))
	}
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"render"}, expanded...), &out, &errOut, d)
	return out.String(), errOut.String(), code
}

// TestRender renders from each source of the base, with the local layers
// over it, and checks the values and the layer of each field.
func TestRender(t *testing.T) {
	e := newRenderEnv(t)
	tests := []struct {
		name     string
		args     []string
		wantBase string
		// want maps field paths to value and layer.
		want map[string][2]any
	}{
		{
			name: "local layers", args: []string{"--config", "$D/base.yaml", "--config-dir", "$D/conf.d", "--instance", "$D/inst.yaml"},
			wantBase: "--config $D/base.yaml",
			want: map[string][2]any{
				"maxPods": {float64(70), "$D/conf.d/10-pods.conf"}, "port": {float64(10251), "$D/inst.yaml"},
				"serializeImagePulls": {true, "defaults"}, "address": {"0.0.0.0", "defaults"},
			},
		},
		{
			name: "flags on top", args: []string{"--config", "$D/base.yaml", "--instance", "$D/inst.yaml", "--set", "port=10260", "--set", "featureGates[KubeletTracing]=true", "--set", "evictionHard[memory.available]=200Mi"},
			wantBase: "--config $D/base.yaml",
			want: map[string][2]any{
				"port": {float64(10260), "--set port"}, "maxPods": {float64(50), "$D/base.yaml"},
				"featureGates": {map[string]any{"KubeletTracing": true}, ""},
			},
		},
		{
			name: "defaults only", args: nil, wantBase: "none (the built-in defaults)",
			want: map[string][2]any{"maxPods": {float64(110), "defaults"}, "port": {float64(10250), "defaults"}},
		},
		{
			name: "state dir", args: []string{"--state-dir", "$STATE", "--config", "$D/base.yaml", "--instance", "$D/inst.yaml"},
			wantBase: "configmap kube-system/kubelet-r key kubelet (UID uid-r, resourceVersion 7), current in state dir $STATE",
			want: map[string][2]any{
				"maxPods": {float64(110), "configmap kube-system/kubelet-r key kubelet"}, "serializeImagePulls": {false, "configmap kube-system/kubelet-r key kubelet"},
				"port": {float64(10251), "$D/inst.yaml"},
			},
		},
		{
			name: "node", args: []string{"--node", "n1", "--config", "$D/base.yaml", "--config-dir", "$D/conf.d"},
			wantBase: "configmap kube-system/kubelet-r key kubelet (UID uid-r, resourceVersion 7), assigned to node n1",
			want: map[string][2]any{
				"maxPods": {float64(70), "$D/conf.d/10-pods.conf"}, "serializeImagePulls": {false, "configmap kube-system/kubelet-r key kubelet"},
				"port": {float64(10250), "defaults"},
			},
		},
		{
			name: "node without assignment", args: []string{"--node", "n2", "--config", "$D/base.yaml"},
			wantBase: "node n2 has no dynconfig.io/config-source annotation (its local config); --config $D/base.yaml",
			want:     map[string][2]any{"maxPods": {float64(50), "$D/base.yaml"}},
		},
		{
			name: "node's legacy spec.configSource", args: []string{"--node", "n7", "--config", "$D/base.yaml"},
			wantBase: "configmap kube-system/kubelet-r key kubelet (UID uid-r, resourceVersion 7), assigned to node n7 by its legacy spec.configSource",
			want:     map[string][2]any{"maxPods": {float64(110), "configmap kube-system/kubelet-r key kubelet"}},
		},
		{
			name: "kube-proxy does not read spec.configSource", args: []string{"--node", "n7", "--component", "kube-proxy", "--config", "$D/proxy.yaml"},
			wantBase: "node n7 has no dynconfig.io/config-source.kube-proxy annotation (its local config); --config $D/proxy.yaml",
			want:     map[string][2]any{"mode": {"nftables", "$D/proxy.yaml"}},
		},
		{
			name: "kube-proxy", args: []string{"--component", "kube-proxy", "--config", "$D/proxy.yaml"},
			wantBase: "--config $D/proxy.yaml",
			want:     map[string][2]any{"mode": {"nftables", "$D/proxy.yaml"}, "kind": {"KubeProxyConfiguration", "$D/proxy.yaml"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := e.run(t, append(tt.args, "-o", "json")...)
			if code != exitOK {
				t.Fatalf("exit code %d: %s", code, stderr)
			}
			var got struct {
				Base       string            `json:"base"`
				Config     map[string]any    `json:"config"`
				Provenance map[string]string `json:"provenance"`
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%v\n%s", err, stdout)
			}
			expand := func(s string) string {
				return strings.ReplaceAll(strings.ReplaceAll(s, "$STATE", e.stateDir), "$D", e.dir)
			}
			if want := expand(tt.wantBase); got.Base != want {
				t.Errorf("base %q, want %q", got.Base, want)
			}
			for path, want := range tt.want {
				if v := got.Config[path]; !cmp.Equal(v, want[0]) {
					t.Errorf("%s = %v, want %v", path, v, want[0])
				}
				if layer := got.Provenance[path]; want[1] != "" && layer != expand(want[1].(string)) {
					t.Errorf("%s set by %q, want %q", path, layer, expand(want[1].(string)))
				}
			}
			// Every layer named is a field of the config.
			for path := range got.Provenance {
				top, _, _ := strings.Cut(strings.SplitN(path, "[", 2)[0], ".")
				if _, ok := got.Config[top]; !ok && got.Provenance[path] != "defaults" { // an empty default is omitted
					t.Errorf("provenance of %s, which the config does not have", path)
				}
			}
		})
	}
}

// TestRenderYAML: the default output is a config file, the provenance in
// comments, and it validates as it is.
func TestRenderYAML(t *testing.T) {
	e := newRenderEnv(t)
	stdout, stderr, code := e.run(t, "--config", "$D/base.yaml", "--config-dir", "$D/conf.d")
	if code != exitOK {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	for _, want := range []string{
		"# Base: --config " + e.dir + "/base.yaml\n",
		"\nmaxPods: 70\n",
		"# Provenance (field: the layer that set it; a field not listed is set by no layer and has its zero value):\n",
		"\n#   maxPods: " + e.dir + "/conf.d/10-pods.conf\n",
		"\n#   port: " + e.dir + "/base.yaml\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output does not contain %q:\n%s", want, stdout)
		}
	}
	out := filepath.Join(e.dir, "rendered.yaml")
	if err := os.WriteFile(out, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if vout, verr, code := e.run(t); code != exitOK {
		t.Fatalf("render: %d %s %s", code, vout, verr)
	}
	var vout, verr bytes.Buffer
	if code := run(context.Background(), []string{"validate", out}, &vout, &verr, testDeps(t, nil)); code != exitOK {
		t.Errorf("the rendered config does not validate: %s", verr.String())
	}
}

// TestRenderBadInput is the table of bad inputs of render: exact errors and
// exit codes, and nothing on stdout.
func TestRenderBadInput(t *testing.T) {
	e := newRenderEnv(t)
	// A state dir whose current checkpoint is damaged, and one whose
	// current is local.
	damaged := filepath.Join(e.dir, "damaged")
	s := openStore(t, damaged, "v1", nil)
	if _, err := s.Save(e.remote); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrent(sourceOf(e.remote)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cp := filepath.Join(damaged, "checkpoints", "uid-r_7")
	data, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, bytes.Replace(data, []byte("maxPods: 110"), []byte("maxPods: 111"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(e.dir, "missing-cp")
	s = openStore(t, missing, "v1", nil)
	if _, err := s.Save(e.remote); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrent(sourceOf(e.remote)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.RemoveAll(filepath.Join(missing, "checkpoints", "uid-r_7")); err != nil {
		t.Fatal(err)
	}

	const usage = "\nRun 'dynconfigctl render --help' for usage.\n"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // exact; $D is the env's dir
	}{
		{name: "unknown component", args: []string{"--component", "kube-scheduler"}, wantCode: exitUsage, wantStderr: `dynconfigctl: --component "kube-scheduler": render knows kubelet and kube-proxy` + usage},
		{name: "node and state dir", args: []string{"--node", "n1", "--state-dir", "$STATE"}, wantCode: exitUsage, wantStderr: "dynconfigctl: --node and --state-dir are both a source of the remote config; give one" + usage},
		{name: "empty --config", args: []string{"--config", ""}, wantCode: exitUsage, wantStderr: "dynconfigctl: --config must not be empty" + usage},
		{name: "empty --node", args: []string{"--node="}, wantCode: exitUsage, wantStderr: "dynconfigctl: --node must not be empty" + usage},
		{name: "bad output", args: []string{"-o", "wide"}, wantCode: exitUsage, wantStderr: `dynconfigctl: --output "wide": want yaml or json` + usage},
		{name: "--set without =", args: []string{"--set", "maxPods"}, wantCode: exitUsage, wantStderr: `dynconfigctl: --set "maxPods": want PATH=VALUE (for example maxPods=150 or featureGates[KubeletTracing]=true)` + usage},
		{name: "--set without a path", args: []string{"--set", "=1"}, wantCode: exitUsage, wantStderr: `dynconfigctl: --set "=1": want PATH=VALUE (for example maxPods=150 or featureGates[KubeletTracing]=true)` + usage},
		{name: "--set value not YAML", args: []string{"--set", "maxPods=["}, wantCode: exitUsage, wantStderr: `dynconfigctl: --set "maxPods=[": VALUE is not YAML: yaml: line 1: did not find expected node content` + usage},
		{name: "--set unknown field", args: []string{"--set", "maxpods=1"}, wantCode: exitError, wantStderr: "dynconfigctl: --set maxpods: field path \"maxpods\": no field \"maxpods\" in v1beta1.KubeletConfiguration\n"},
		{name: "--set wrong type", args: []string{"--set", "maxPods=many"}, wantCode: exitError, wantStderr: "dynconfigctl: --set maxPods: maxPods: expected int32, got string \"many\"\n"},
		{name: "--set invalid value", args: []string{"--set", "port=-5"}, wantCode: exitError, wantStderr: "dynconfigctl: merged config: port: Invalid value: -5: must be between 1 and 65535, inclusive (set by --set port)\n"},
		{name: "argument", args: []string{"n1"}, wantCode: exitUsage, wantStderr: `dynconfigctl: render takes no arguments, got ["n1"]` + usage},
		{name: "missing --config", args: []string{"--config", "$D/nope.yaml"}, wantCode: exitError, wantStderr: "dynconfigctl: read --config $D/nope.yaml: no such file or directory\n"},
		{name: "--config is a directory", args: []string{"--config", "$D/conf.d"}, wantCode: exitError, wantStderr: "dynconfigctl: read --config $D/conf.d: is a directory\n"},
		{name: "missing --instance", args: []string{"--instance", "$D/nope.yaml"}, wantCode: exitError, wantStderr: "dynconfigctl: read --instance $D/nope.yaml: no such file or directory\n"},
		{
			name: "missing --config-dir", args: []string{"--config-dir", "$D/nope.d"}, wantCode: exitError,
			wantStderr: "dynconfigctl: merge: reading drop-in directory $D/nope.d: lstat $D/nope.d: no such file or directory\n",
		},
		{
			name: "decode errors, before validation", args: []string{"--config", "$D/bad.yaml", "--instance", "$D/badinst.yaml"}, wantCode: exitError,
			wantStderr: "dynconfigctl: $D/bad.yaml: unknown field \"Port\"\n",
		},
		{
			name: "invalid merged config", args: []string{"--config", "$D/base.yaml", "--instance", "$D/badinst.yaml"}, wantCode: exitError,
			wantStderr: "dynconfigctl: merged config: kubeAPIQPS: Invalid value: -2: must not be negative (set by $D/badinst.yaml)\n",
		},
		{name: "missing state dir", args: []string{"--state-dir", "$D/nope"}, wantCode: exitError, wantStderr: "dynconfigctl: state dir $D/nope does not exist\n"},
		{
			name: "not a state dir", args: []string{"--state-dir", "$D/conf.d"}, wantCode: exitError,
			wantStderr: "dynconfigctl: $D/conf.d is not a dynconfig state dir: it has no meta/ directory (a state dir holds checkpoints/, meta/ and tracking/)\n",
		},
		{
			name: "damaged checkpoint", args: []string{"--state-dir", "$D/damaged"}, wantCode: exitError,
			wantStderr: "dynconfigctl: state dir $D/damaged: current's checkpoint uid-r/7 cannot be read: corrupt file $D/damaged/checkpoints/uid-r_7: checksum mismatch: " +
				"file says sha256 \"23069929449865c7130ef7d3d1f165e9de662cb5cd3dd739da181c70cab98f74\", payload has \"8dce030c2012500055e98b75d71aa371e5df736bf843df9ba58bd325860453cb\"\n",
		},
		{
			name: "missing checkpoint", args: []string{"--state-dir", "$D/missing-cp"}, wantCode: exitError,
			wantStderr: "dynconfigctl: state dir $D/missing-cp: current's checkpoint uid-r/7 is missing; inspect it with dynconfigctl inspect\n",
		},
		{name: "missing node", args: []string{"--node", "n9"}, wantCode: exitError, wantStderr: "dynconfigctl: node n9 not found\n"},
		{name: "assigned ConfigMap gone", args: []string{"--node", "n3"}, wantCode: exitError, wantStderr: "dynconfigctl: node n3 is assigned ConfigMap kube-system/gone, which is not found\n"},
		{
			name: "assigned ConfigMap replaced", args: []string{"--node", "n4"}, wantCode: exitError,
			wantStderr: "dynconfigctl: node n4: its assignment of ConfigMap kube-system/kubelet-r: invalid NodeConfigSource.ConfigMap, uid uid-old and kube-system/kubelet-r do not refer to the same object (its uid is uid-r)\n",
		},
		{
			name: "assigned key missing", args: []string{"--node", "n5"}, wantCode: exitError,
			wantStderr: "dynconfigctl: ConfigMap kube-system/kubelet-r has no data key \"other\" (keys present: kubelet)\n",
		},
		{
			name: "assignment without uid", args: []string{"--node", "n6"}, wantCode: exitError,
			wantStderr: "dynconfigctl: node \"n6\" annotation dynconfig.io/config-source: invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := e.run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			want := strings.ReplaceAll(strings.ReplaceAll(tt.wantStderr, "$STATE", e.stateDir), "$D", e.dir)
			if diff := cmp.Diff(want, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if stdout != "" {
				t.Errorf("a failing render wrote to stdout:\n%s", stdout)
			}
		})
	}
}

// Issue 21: render --state-dir shows what the component runs after its
// next restart: with current marked bad, its last-known-good (or the local
// --config when that is local), never the marked config.
func TestRenderStateDirHonoursBadMarks(t *testing.T) {
	e := newRenderEnv(t)
	good := newConfigMap("kube-system", "kubelet-g", "uid-g", "3", map[string]string{
		"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 77\n"})
	markBad := func(withLKG bool) {
		s := openStore(t, e.stateDir, "v1", nil)
		defer s.Close()
		if withLKG {
			if _, err := s.Save(good); err != nil {
				t.Fatal(err)
			}
			if err := s.SetLastKnownGood(sourceOf(good)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.RecordStartup(); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkBad(sourceOf(e.remote), checkpoint.BadMark{Reason: "failed to validate current (UID: uid-r)"}); err != nil {
			t.Fatal(err)
		}
	}
	markBad(false)
	out, errOut, code := e.run(t, "--state-dir", "$STATE", "--config", "$D/base.yaml", "-o", "json")
	if code != 0 || strings.Contains(out, "110") || !strings.Contains(out, "marked bad") || !strings.Contains(out, "runs the local config") {
		t.Fatalf("local last-known-good: code %d\n%s\n%s\nwant the local --config rendered, saying current is marked bad", code, out, errOut)
	}
	markBad(true)
	out, errOut, code = e.run(t, "--state-dir", "$STATE", "--config", "$D/base.yaml", "-o", "json")
	if code != 0 || !strings.Contains(out, `"maxPods": 77`) || !strings.Contains(out, "runs last-known-good") {
		t.Fatalf("remote last-known-good: code %d\n%s\n%s\nwant kubelet-g (maxPods 77) rendered", code, out, errOut)
	}
}

// TestRenderHostileConfigPaths: a FIFO, /dev/zero or a 1 GiB file as
// --config, --instance, a drop-in of --config-dir or --config-dir itself
// fails at once (the library's reader, merge.ReadFile: nothing is waited on
// or read whole), exit 1, naming the path and what it is.
func TestRenderHostileConfigPaths(t *testing.T) {
	e := newRenderEnv(t)
	for _, d := range []string{"fifo.d", "zero.d", "huge.d"} {
		writeTestFile(t, filepath.Join(e.dir, d, "10-ok.conf"), renderDrop)
	}
	for _, p := range []string{"fifo.yaml", "fifo.d/20-x.conf"} {
		if err := syscall.Mkfifo(filepath.Join(e.dir, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/dev/zero", filepath.Join(e.dir, "zero.d", "20-x.conf")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"huge.yaml", "huge.d/20-x.conf"} {
		writeTestFile(t, filepath.Join(e.dir, p), "")
		if err := os.Truncate(filepath.Join(e.dir, p), 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // exact stderr; $D is the env's dir
	}{
		{"--config is a FIFO", []string{"--config", "$D/fifo.yaml"}, "dynconfigctl: read --config $D/fifo.yaml: not a regular file (p---------)\n"},
		{"--config is /dev/zero", []string{"--config", "/dev/zero"}, "dynconfigctl: read --config /dev/zero: not a regular file (Dc---------)\n"},
		{"--config is a 1 GiB file", []string{"--config", "$D/huge.yaml"}, "dynconfigctl: read --config $D/huge.yaml: larger than a config document may be: 1073741824 bytes, limit 4194304\n"},
		{"--instance is a FIFO", []string{"--instance", "$D/fifo.yaml"}, "dynconfigctl: read --instance $D/fifo.yaml: not a regular file (p---------)\n"},
		{"a drop-in is a FIFO", []string{"--config-dir", "$D/fifo.d"}, "dynconfigctl: merge: reading drop-in directory $D/fifo.d: read $D/fifo.d/20-x.conf: not a regular file (p---------)\n"},
		{"a drop-in is /dev/zero", []string{"--config-dir", "$D/zero.d"}, "dynconfigctl: merge: reading drop-in directory $D/zero.d: read $D/zero.d/20-x.conf: not a regular file (Dc---------)\n"},
		{"a drop-in is a 1 GiB file", []string{"--config-dir", "$D/huge.d"}, "dynconfigctl: merge: reading drop-in directory $D/huge.d: read $D/huge.d/20-x.conf: larger than a config document may be: 1073741824 bytes, limit 4194304\n"},
		{"--config-dir is a FIFO", []string{"--config-dir", "$D/fifo.yaml"}, "dynconfigctl: merge: reading drop-in directory $D/fifo.yaml: not a directory (p---------)\n"},
		{"--config-dir is /dev/zero", []string{"--config-dir", "/dev/zero"}, "dynconfigctl: merge: reading drop-in directory /dev/zero: not a directory (Dc---------)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				stderr string
				code   int
			}
			done := make(chan result, 1)
			go func() {
				_, stderr, code := e.run(t, tc.args...)
				done <- result{stderr, code}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(inspectTimeout):
				t.Fatalf("render %v did not finish within %v: it hangs", tc.args, inspectTimeout)
			}
			if r.code != exitError {
				t.Errorf("exit code %d, want %d", r.code, exitError)
			}
			if want := strings.ReplaceAll(tc.want, "$D", e.dir); r.stderr != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, want)
			}
		})
	}
}
