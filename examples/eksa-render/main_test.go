package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// readTree returns every file under dir by its slash path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// TestGolden runs the program on the specs under testdata and compares
// everything it writes and prints with the golden files.
func TestGolden(t *testing.T) {
	tests := []struct {
		dir  string
		args []string
	}{
		{dir: "vsphere"},
		{dir: "docker-alternate", args: []string{"--policy", "alternate", "--allow", "tlsCipherSuites"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			caseDir := filepath.Join("testdata", tt.dir)
			out := t.TempDir()
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"--out", out}, tt.args...), filepath.Join(caseDir, "cluster.yaml"))
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			got := readTree(t, out)
			got["stdout"] = stdout.String()
			got["stderr"] = stderr.String()
			wantDir := filepath.Join(caseDir, "want")
			if *update {
				if err := os.RemoveAll(wantDir); err != nil {
					t.Fatal(err)
				}
				for p, data := range got {
					file := filepath.Join(wantDir, filepath.FromSlash(p))
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if diff := cmp.Diff(readTree(t, wantDir), got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

const cluster = `apiVersion: anywhere.eks.amazonaws.com/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  datacenterRef: {kind: VSphereDatacenterConfig}
`

const kcHeader = "{apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration"

// TestBadInputs is the table of bad inputs with the exact text the user sees.
func TestBadInputs(t *testing.T) {
	const cp = "spec.controlPlaneConfiguration.kubeletConfiguration: "
	const w0 = "spec.workerNodeGroupConfigurations[0].kubeletConfiguration: "
	tests := []struct {
		name string
		args []string
		spec string
		want string
	}{{
		name: "wrong kind",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: {apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeProxyConfiguration}\n",
		want: cp + `kind: expected "KubeletConfiguration", got "KubeProxyConfiguration"`,
	}, {
		name: "unknown key",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", maxPod: 10, nodeLabels: {a: b}}\n",
		want: cp + `unknown field "maxPod"` + "\n" +
			cp + `unknown field "nodeLabels": a kubelet flag (--node-labels), not a KubeletConfiguration field`,
	}, {
		name: "wrong type",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", maxPods: \"110\", evictionHard: [memory.available]}\n",
		want: cp + `evictionHard: expected object, got list` + "\n" +
			cp + `maxPods: expected int32, got string "110"`,
	}, {
		name: "blocked field",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", readOnlyPort: 10255}\n",
		want: cp + `readOnlyPort: field is managed by the platform (owner: "eks-a")`,
	}, {
		name: "unsupported Bottlerocket field",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: bottlerocket\n    kubeletConfiguration: " + kcHeader + ", maxPods: 50, staticPodPath: /etc/static, imageGCHighThresholdPercent: 90}\n",
		want: cp + `unsupported KubeletConfiguration fields for Bottlerocket: staticPodPath`,
	}, {
		name: "conflicting explicit field",
		args: []string{"--error-if-both"},
		spec: cluster + "  clusterNetwork: {dns: {resolvConf: {path: /etc/eksa.conf}}}\n  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", resolvConf: /etc/mine.conf}\n",
		want: cp + `resolvConf: field is also set by the platform (owner: "eks-a"); set it in one place only`,
	}, {
		name: "kubelet validation",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}\n",
		want: cp + `imageGCLowThresholdPercent: Invalid value: 60: must be less than imageGCHighThresholdPercent (50)`,
	}, {
		name: "every group's problems at once",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", providerID: x, maxPods: -1}\n" +
			"  workerNodeGroupConfigurations:\n  - name: md-0\n    osFamily: bottlerocket\n    kubeletConfiguration: " + kcHeader + ", cgroupDriver: systemd}\n" +
			"  - name: md-1\n    osFamily: ubuntu\n    kubeletConfiguration: {kind: KubeletConfiguration}\n",
		want: cp + `maxPods: Invalid value: -1: must not be negative` + "\n" +
			w0 + `unsupported KubeletConfiguration fields for Bottlerocket: cgroupDriver` + "\n" +
			`spec.workerNodeGroupConfigurations[1].kubeletConfiguration: apiVersion: missing, expected "kubelet.config.k8s.io/v1beta1"`,
	}, {
		name: "alternate: a user's invalid value is an error although the platform replaces it",
		args: []string{"--policy", "alternate"},
		spec: strings.Replace(cluster, "VSphereDatacenterConfig", "DockerDatacenterConfig", 1) +
			"  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", evictionHard: {memory.availble: 100Mi, nodefs.available: 150%}}\n" +
			"  workerNodeGroupConfigurations:\n  - name: md-0\n    osFamily: bottlerocket\n    kubeletConfiguration: " + kcHeader + ", tlsCipherSuites: [TLS_NOT_A_SUITE]}\n",
		want: cp + `evictionHard[memory.availble]: Unsupported value: "memory.availble": supported values: "memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available"; the user's value must be valid even though the platform's replaces it (owner: "eks-a")` + "\n" +
			cp + `evictionHard[nodefs.available]: Invalid value: "150%": a percentage threshold must be at most 100%; the user's value must be valid even though the platform's replaces it (owner: "eks-a")` + "\n" +
			w0 + `tlsCipherSuites[0]: Invalid value: "TLS_NOT_A_SUITE": not a cipher suite name known to crypto/tls; the user's value must be valid even though the platform's replaces it (owner: "eks-a")`,
	}, {
		name: "null map value",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", evictionHard: {memory.available: null, nodefs.available: 5%}}\n",
		want: cp + `evictionHard[memory.available]: null is not a value: remove the key to leave it out (an empty map is {})`,
	}, {
		name: "explicit empties Bottlerocket cannot express",
		args: []string{"--allow", "tlsCipherSuites"},
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: bottlerocket\n    kubeletConfiguration: " + kcHeader + ", tlsCipherSuites: [], kubeReserved: {}, evictionSoft: {}}\n",
		want: cp + `unsupported KubeletConfiguration fields for Bottlerocket: tlsCipherSuites` + "\n" +
			cp + `kubeReserved: cannot be expressed as Bottlerocket settings.kubernetes.kube-reserved: an empty map reserves nothing for Kubernetes components, ` +
			`but Bottlerocket always reserves cpu, memory and ephemeral-storage (its defaults for the resources the table leaves out)`,
	}, {
		name: "spec: unknown and duplicate fields",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    count: 3\n  workerNodeGroupConfigurations:\n  - name: md-0\n    osFamily: ubuntu\n    machineGroupRef: {}\n",
		want: `cluster spec: unknown field "spec.controlPlaneConfiguration.count"` + "\n" +
			`cluster spec: unknown field "spec.workerNodeGroupConfigurations[0].machineGroupRef"`,
	}, {
		name: "spec: duplicate key",
		spec: cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    osFamily: bottlerocket\n",
		want: "cluster spec: yaml: unmarshal errors:\n  line 8: key \"osFamily\" already set in map",
	}, {
		name: "spec: rules",
		spec: "apiVersion: v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n  datacenterRef: {kind: AWSDatacenterConfig}\n" +
			"  workerNodeGroupConfigurations:\n  - name: md-0\n    osFamily: windows\n    labels: {node-role.kubernetes.io/worker: \"\"}\n  - name: md-0\n    osFamily: ubuntu\n  - osFamily: ubuntu\n",
		want: `apiVersion: Invalid value: "v1": must be "anywhere.eks.amazonaws.com/v1alpha1"` + "\n" +
			`spec.datacenterRef.kind: Unsupported value: "AWSDatacenterConfig": supported values: "CloudStackDatacenterConfig", "DockerDatacenterConfig", "NutanixDatacenterConfig", "SnowDatacenterConfig", "TinkerbellDatacenterConfig", "VSphereDatacenterConfig"` + "\n" +
			`spec.controlPlaneConfiguration: Required value` + "\n" +
			`spec.workerNodeGroupConfigurations[0].osFamily: Unsupported value: "windows": supported values: "bottlerocket", "ubuntu"` + "\n" +
			`spec.workerNodeGroupConfigurations[0].labels[node-role.kubernetes.io/worker]: Forbidden: the kubelet refuses labels in the kubernetes.io and k8s.io namespaces except under kubelet.kubernetes.io, node.kubernetes.io and these keys: beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone` + "\n" +
			`spec.workerNodeGroupConfigurations[1].name: Duplicate value: "md-0"` + "\n" +
			`spec.workerNodeGroupConfigurations[2].name: Required value`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			specFile := filepath.Join(dir, "cluster.yaml")
			if err := os.WriteFile(specFile, []byte(tt.spec), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{"--out", out}, tt.args...), specFile), &stdout, &stderr)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if diff := cmp.Diff(tt.want, strings.TrimSuffix(stderr.String(), "\n")); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
			if files := readTree(t, out); len(files) > 0 {
				t.Errorf("wrote files despite errors: %v", files)
			}
		})
	}
}

// TestUsage is the table of command-line errors: the exact text, exit code
// 2, and nothing written.
func TestUsage(t *testing.T) {
	const help = "\nRun 'eksa-render --help' for usage.\n"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "eksa-render: eksa-render takes 1 argument, CLUSTER.yaml, got 0" + help},
		{[]string{"a.yaml", "b.yaml"}, "eksa-render: eksa-render takes 1 argument, CLUSTER.yaml, got 2" + help},
		{[]string{"cluster.yaml"}, "eksa-render: --out is required" + help},
		{[]string{"--out", "x"}, "eksa-render: eksa-render takes 1 argument, CLUSTER.yaml, got 0" + help},
		{[]string{"--out", "x", "--policy", "strict", "cluster.yaml"}, `eksa-render: --policy "strict": want "proposed" or "alternate"` + help},
		{[]string{"--out", "x", "--allow", "tlsCipherSuites,", "cluster.yaml"}, `eksa-render: --allow "tlsCipherSuites,": a field must not be empty` + help},
		{[]string{"--nope"}, "eksa-render: unknown flag: --nope" + help},
		{[]string{"--out"}, "eksa-render: flag needs an argument: --out" + help},
		{[]string{"--error-if-both=maybe", "--out", "x", "cluster.yaml"}, `eksa-render: invalid argument "maybe" for "--error-if-both" flag: strconv.ParseBool: parsing "maybe": invalid syntax` + help},
		// The flag package's spelling, which this command had before cobra.
		{[]string{"-out", "x", "cluster.yaml"}, "eksa-render: -out: flags take two dashes: --out" + help},
		{[]string{"--out", "x", "-policy=alternate", "cluster.yaml"}, "eksa-render: -policy=alternate: flags take two dashes: --policy=alternate" + help},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if diff := cmp.Diff(tt.want, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
			if files := readTree(t, dir); len(files) > 0 {
				t.Errorf("wrote files: %v", files)
			}
		})
	}
}

// TestHelp: --help explains the command and exits 0.
func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	for _, want := range []string{"Usage:\n  eksa-render --out DIR", "Exit status: 0 when every group rendered, 1 when", "--policy string", "--allow strings", "--error-if-both"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help does not say %q:\n%s", want, stdout.String())
		}
	}
}

// TestFileErrors: a spec that cannot be read and an output directory that
// cannot be written are errors (exit 1) naming the path.
func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(spec, []byte(cluster+"  controlPlaneConfiguration: {osFamily: ubuntu}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"missing spec", []string{"--out", dir, filepath.Join(dir, "nope.yaml")}, "eksa-render: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory\n"},
		{"spec is a directory", []string{"--out", dir, dir}, "eksa-render: read " + dir + ": is a directory\n"},
		{"out is a file", []string{"--out", blocker, spec}, "eksa-render: mkdir " + blocker + ": not a directory\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if diff := cmp.Diff(tt.want, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExplicitEmpties checks that an explicitly empty map or list in a
// group's kubeletConfiguration reaches the kubeadm patch: evictionHard: {}
// is "no hard eviction", clusterDNS: [] is "no cluster DNS".
func TestExplicitEmpties(t *testing.T) {
	dir := t.TempDir()
	spec := cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", evictionHard: {}, clusterDNS: [], maxPods: 20}\n"
	specFile := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--out", out, specFile}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	got := readTree(t, out)["control-plane/patches/kubeletconfiguration.yaml"]
	want := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
clusterDNS: []
evictionHard: {}
maxPods: 20
readOnlyPort: 0
tlsCipherSuites:
- TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}

// TestExplicitZeros checks that a zero value a user wrote is never dropped
// silently: the kubeadm patch carries it, and Bottlerocket's settings carry
// it or the run fails naming the field. serverTLSBootstrap: false turns off
// what Bottlerocket turns on by default (server-tls-bootstrap = true), and
// maxPods: 0 is no pod count (the kubelet replaces it with 110, Bottlerocket
// would reserve no kube-reserved memory for it).
func TestExplicitZeros(t *testing.T) {
	zeros := ", serverTLSBootstrap: false, eventBurst: 0, kubeAPIBurst: 0, registryBurst: 0, evictionMaxPodGracePeriod: 0, " +
		"shutdownGracePeriod: 0s, cpuCFSQuota: false, registryPullQPS: 0}"
	dir := t.TempDir()
	spec := cluster + "  controlPlaneConfiguration:\n    osFamily: ubuntu\n    kubeletConfiguration: " + kcHeader + ", maxPods: 0" + zeros + "\n" +
		"  workerNodeGroupConfigurations:\n  - name: br\n    osFamily: bottlerocket\n    kubeletConfiguration: " + kcHeader + zeros + "\n"
	specFile := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--out", out, specFile}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	files := readTree(t, out)
	wantPatch := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
cpuCFSQuota: false
eventBurst: 0
evictionMaxPodGracePeriod: 0
kubeAPIBurst: 0
maxPods: 0
readOnlyPort: 0
registryBurst: 0
registryPullQPS: 0
serverTLSBootstrap: false
shutdownGracePeriod: 0s
tlsCipherSuites:
- TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
`
	if diff := cmp.Diff(wantPatch, files["control-plane/patches/kubeletconfiguration.yaml"]); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	wantTOML := `[settings.kubernetes]
cpu-cfs-quota-enforced = false
event-burst = 0
eviction-max-pod-grace-period = 0
kube-api-burst = 0
registry-burst = 0
registry-qps = 0
server-tls-bootstrap = false
shutdown-grace-period = "0s"
`
	if diff := cmp.Diff(wantTOML, files["br/settings.toml"]); diff != "" {
		t.Errorf("settings.toml (-want +got):\n%s", diff)
	}

	// maxPods: 0 on Bottlerocket is refused, naming the field.
	spec = cluster + "  controlPlaneConfiguration:\n    osFamily: bottlerocket\n    kubeletConfiguration: " + kcHeader + ", maxPods: 0, clusterDomain: \"\"}\n"
	if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"--out", filepath.Join(dir, "out2"), specFile}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s", code, stdout.String())
	}
	const cp = "spec.controlPlaneConfiguration.kubeletConfiguration: "
	wantErr := cp + `clusterDomain: cannot be expressed as Bottlerocket settings.kubernetes.cluster-domain: an empty domain gives the kubelet no cluster domain, ` +
		`but Bottlerocket always writes one (cluster.local when the setting is unset) and accepts no empty domain` + "\n" +
		cp + `maxPods: cannot be expressed as Bottlerocket settings.kubernetes.max-pods: 0 is not a pod count: the kubelet replaces it with its default of 110, ` +
		`and Bottlerocket, which sizes the kube-reserved memory from max-pods, would reserve none; set the number of pods, or leave maxPods out for Bottlerocket's default` + "\n"
	if diff := cmp.Diff(wantErr, stderr.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
