package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/nodeapi"
)

func cmSource(ns, name, uid, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv, KubeletConfigKey: "kubelet"}}
}

// assignmentValue is an assignment annotation, as assign writes it.
func assignmentValue(t *testing.T, ns, name, uid string) string {
	t.Helper()
	v, err := nodeapi.EncodeAssignment(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: ns, Name: name, UID: types.UID(uid), KubeletConfigKey: "kubelet"}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func statusValue(t *testing.T, s nodeapi.ConfigStatus) string {
	t.Helper()
	v, err := s.MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// statusFleet is a fleet in every state status shows.
func statusFleet(t *testing.T) []*corev1.Node {
	a := cmSource("kube-system", "kubelet-a", "uid-a", "11")
	b := cmSource("kube-system", "kubelet-b", "uid-b", "12")
	p := cmSource("kube-system", "proxy-p", "uid-p", "13")
	trialEnds := metav1.NewTime(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC))
	cond := func(typ corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: s, Reason: reason}
	}
	return []*corev1.Node{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "blue"}, Annotations: map[string]string{
				"dynconfig.io/config-source":                 assignmentValue(t, "kube-system", "kubelet-a", "uid-a"),
				"dynconfig.io/config-status":                 statusValue(t, nodeapi.ConfigStatus{Assigned: a, Active: a, LastKnownGood: a, Phase: nodeapi.PhasePromoted}),
				"dynconfig.io/config-source.kube-proxy":      assignmentValue(t, "kube-system", "proxy-p", "uid-p"),
				"dynconfig.io/config-status.kube-proxy":      statusValue(t, nodeapi.ConfigStatus{Assigned: p, Active: p, Phase: nodeapi.PhaseTrial, TrialEnds: &trialEnds}),
				"team":                                       "infra",
				"dynconfig.io/config-source.not.a.component": "x",
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond("ConfigOK", corev1.ConditionTrue, "all checks passed"),
				cond("KubeProxyConfigOK", corev1.ConditionTrue, "all checks passed"),
			}},
		},
		{
			// A new assignment the kubelet has not picked up, after a
			// rollback.
			ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"pool": "blue"}, Annotations: map[string]string{
				"dynconfig.io/config-source": assignmentValue(t, "kube-system", "kubelet-b", "uid-b"),
				"dynconfig.io/config-status": statusValue(t, nodeapi.ConfigStatus{Assigned: a, Active: b, LastKnownGood: b, Phase: nodeapi.PhaseRolledBack, Error: "failed to validate current (UID: uid-a)"}),
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond("ConfigOK", corev1.ConditionFalse, "failed to validate current (UID: uid-a)")}},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"pool": "green"}}},
		{
			// Assigned, nothing reported yet.
			ObjectMeta: metav1.ObjectMeta{Name: "n5", Labels: map[string]string{"pool": "green"}, Annotations: map[string]string{
				"dynconfig.io/config-source.node-agent": assignmentValue(t, "agents", "agent-1", "uid-1"),
			}},
		},
	}
}

// TestStatus runs status against a fake API server: the exact table, wide
// table and filters.
func TestStatus(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStdout string
		wantStderr string
	}{
		{
			name: "table",
			wantStdout: `NODE   COMPONENT    ASSIGNED                          ACTIVE                  LKG                     CONDITION                PHASE
n1     kubelet      kube-system/kubelet-a             kube-system/kubelet-a   kube-system/kubelet-a   ConfigOK=True            Promoted
n1     kube-proxy   kube-system/proxy-p               kube-system/proxy-p     local                   KubeProxyConfigOK=True   Trial
n2     kubelet      kube-system/kubelet-b (pending)   kube-system/kubelet-b   kube-system/kubelet-b   ConfigOK=False           RolledBack
n5     node-agent   agents/agent-1                    <none>                  <none>                  <none>                   <none>
`,
		},
		{
			name: "wide", args: []string{"-o", "wide", "--selector", "pool=blue"},
			wantStdout: `NODE   COMPONENT    ASSIGNED                          ACTIVE                     LKG                        CONDITION                PHASE        TRIAL-ENDS             REASON
n1     kubelet      kube-system/kubelet-a@11          kube-system/kubelet-a@11   kube-system/kubelet-a@11   ConfigOK=True            Promoted     <none>                 all checks passed
n1     kube-proxy   kube-system/proxy-p@13            kube-system/proxy-p@13     local                      KubeProxyConfigOK=True   Trial        2026-03-01T11:00:00Z   all checks passed
n2     kubelet      kube-system/kubelet-b (pending)   kube-system/kubelet-b@12   kube-system/kubelet-b@12   ConfigOK=False           RolledBack   <none>                 failed to validate current (UID: uid-a)
`,
		},
		{
			name: "component", args: []string{"--component", "kube-proxy"},
			wantStdout: `NODE   COMPONENT    ASSIGNED              ACTIVE                LKG     CONDITION                PHASE
n1     kube-proxy   kube-system/proxy-p   kube-system/proxy-p   local   KubeProxyConfigOK=True   Trial
`,
		},
		{
			name: "nodes by name", args: []string{"n2", "n3"},
			wantStdout: `NODE   COMPONENT   ASSIGNED                          ACTIVE                  LKG                     CONDITION        PHASE
n2     kubelet     kube-system/kubelet-b (pending)   kube-system/kubelet-b   kube-system/kubelet-b   ConfigOK=False   RolledBack
`,
		},
		{
			name: "no headers", args: []string{"--component", "kube-proxy", "--no-headers"},
			wantStdout: "n1    kube-proxy   kube-system/proxy-p   kube-system/proxy-p   local   KubeProxyConfigOK=True   Trial\n",
		},
		{name: "nothing selected", args: []string{"-l", "pool=red"}, wantStderr: "No dynconfig component found on 0 node(s).\n"},
		{name: "no such component", args: []string{"--component", "kube-scheduler"}, wantStderr: "No component kube-scheduler found on 4 node(s).\n"},
		{name: "json, nothing", args: []string{"-o", "json", "-l", "pool=red"}, wantStdout: "{\n  \"items\": []\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runStatusCommand(t, append([]string{"status"}, tt.args...), statusFleet(t)...)
			if code != exitOK {
				t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStderr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// runStatusCommand runs a dynconfigctl command line against a fake API
// server that holds nodes.
func runStatusCommand(t *testing.T, args []string, nodes ...*corev1.Node) (stdout, stderr string, code int) {
	t.Helper()
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	d := testDeps(t, nil)
	d.newClient = func(f *genericclioptions.ConfigFlags) (apiClient, error) {
		return apiClient{client: client, namespace: namespaceOf(f)}, nil
	}
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut, d)
	return out.String(), errOut.String(), code
}

// TestStatusJSON: -o json and -o yaml carry the whole status, and decode
// back to what the nodes hold.
func TestStatusJSON(t *testing.T) {
	fleet := statusFleet(t)
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			stdout, stderr, code := runStatusCommand(t, []string{"status", "-o", format, "n1"}, fleet...)
			if code != exitOK {
				t.Fatalf("exit code %d: %s", code, stderr)
			}
			var got statusList
			if err := yaml.UnmarshalStrict([]byte(stdout), &got); err != nil {
				t.Fatalf("decode %s: %v\n%s", format, err, stdout)
			}
			if len(got.Items) != 2 {
				t.Fatalf("%d items, want 2 (kubelet, kube-proxy):\n%s", len(got.Items), stdout)
			}
			for _, item := range got.Items {
				want, err := nodeapi.ReadConfigStatus(fleet[0], item.Component)
				if err != nil {
					t.Fatal(err)
				}
				if !want.Equal(item.Status) {
					t.Errorf("%s: status %+v, want %+v", item.Component, item.Status, want)
				}
				if item.Condition == nil || item.Condition.Type != nodeapi.ConditionTypeFor(item.Component) {
					t.Errorf("%s: condition %+v", item.Component, item.Condition)
				}
				if item.Assignment == nil || item.Node != "n1" {
					t.Errorf("%s: assignment %+v, node %q", item.Component, item.Assignment, item.Node)
				}
			}
		})
	}
}

// TestStatusBadInput is the table of bad inputs of status, on the command
// line and in the nodes' annotations: exact errors and exit codes, and the
// rows that can be printed are printed.
func TestStatusBadInput(t *testing.T) {
	good := statusFleet(t)[0]
	broken := func(name string, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	tests := []struct {
		name       string
		args       []string
		nodes      []*corev1.Node
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "bad output", args: []string{"-o", "table"}, wantCode: exitUsage, wantStderr: "dynconfigctl: --output \"table\": want wide, json or yaml\nRun 'dynconfigctl status --help' for usage.\n"},
		{
			name: "bad selector", args: []string{"-l", "=blue"}, wantCode: exitUsage,
			wantStderr: "dynconfigctl: --selector \"=blue\": found '=', expected: !, identifier, or 'end of string'\nRun 'dynconfigctl status --help' for usage.\n",
		},
		{name: "no headers with json", args: []string{"-o", "json", "--no-headers"}, wantCode: exitUsage, wantStderr: "dynconfigctl: --no-headers goes with a table, not -o json\nRun 'dynconfigctl status --help' for usage.\n"},
		{name: "selector and nodes", args: []string{"-l", "pool=blue", "n1"}, wantCode: exitUsage, wantStderr: "dynconfigctl: --selector does not go with NODE arguments\nRun 'dynconfigctl status --help' for usage.\n"},
		{name: "empty node", args: []string{""}, wantCode: exitUsage, wantStderr: "dynconfigctl: a NODE must not be empty\nRun 'dynconfigctl status --help' for usage.\n"},
		{
			name: "bad component", args: []string{"--component", "KubeProxy"}, wantCode: exitUsage,
			wantStderr: "dynconfigctl: --component: component name \"KubeProxy\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\nRun 'dynconfigctl status --help' for usage.\n",
		},
		{name: "zero timeout", args: []string{"--timeout", "0s"}, wantCode: exitUsage, wantStderr: "dynconfigctl: --timeout must be positive, got 0s\nRun 'dynconfigctl status --help' for usage.\n"},
		{name: "missing nodes", args: []string{"n1", "n7", "n8"}, nodes: []*corev1.Node{good}, wantCode: exitError, wantStderr: "dynconfigctl: node n7 not found\nnode n8 not found\n"},
		{
			name: "undecodable status", nodes: []*corev1.Node{broken("n9", map[string]string{
				"dynconfig.io/config-status": `{"phase":"Trial","phase":"Sleeping"}`,
			})},
			wantCode: exitError,
			wantStdout: `NODE   COMPONENT   ASSIGNED   ACTIVE      LKG         CONDITION   PHASE
n9     kubelet     local      <invalid>   <invalid>   <none>      <invalid>
`,
			wantStderr: "dynconfigctl: node \"n9\" annotation dynconfig.io/config-status: decoding the config status: duplicate field \"phase\"\n",
		},
		{
			// A newer component's phase and field (the skew rule of
			// nodeapi): shown as it is, no error.
			name: "status of a newer component", nodes: []*corev1.Node{broken("n9", map[string]string{
				"dynconfig.io/config-status": `{"phase":"Sleeping","sleep":{"until":"never"}}`,
			})},
			wantStdout: `NODE   COMPONENT   ASSIGNED   ACTIVE   LKG     CONDITION   PHASE
n9     kubelet     local      local    local   <none>      Sleeping
`,
		},
		{
			name: "assignment with a misspelt field", nodes: []*corev1.Node{broken("n9", map[string]string{
				"dynconfig.io/config-source.kube-proxy": `{"configMap":{"namespace":"kube-system","name":"p","UID":"u"}}`,
			})},
			wantCode: exitError,
			wantStdout: `NODE   COMPONENT    ASSIGNED    ACTIVE   LKG      CONDITION   PHASE
n9     kube-proxy   <invalid>   <none>   <none>   <none>      <none>
`,
			wantStderr: "dynconfigctl: node \"n9\" annotation dynconfig.io/config-source.kube-proxy: invalid NodeConfigSource: unknown field \"configMap.UID\"\n",
		},
		{
			name: "assignment without a uid", nodes: []*corev1.Node{broken("n9", map[string]string{
				"dynconfig.io/config-source": `{"configMap":{"namespace":"kube-system","name":"p"}}`,
			})},
			wantCode: exitError,
			wantStdout: `NODE   COMPONENT   ASSIGNED    ACTIVE   LKG      CONDITION   PHASE
n9     kubelet     <invalid>   <none>   <none>   <none>      <none>
`,
			wantStderr: "dynconfigctl: node \"n9\" annotation dynconfig.io/config-source: invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid\n",
		},
		{
			name: "every bad node, and the good ones", nodes: []*corev1.Node{good, broken("n8", map[string]string{"dynconfig.io/config-status": "{"}), broken("n9", map[string]string{"dynconfig.io/config-source": "[]"})},
			args:     []string{"--component", "kubelet"},
			wantCode: exitError,
			wantStdout: `NODE   COMPONENT   ASSIGNED                ACTIVE                  LKG                     CONDITION       PHASE
n1     kubelet     kube-system/kubelet-a   kube-system/kubelet-a   kube-system/kubelet-a   ConfigOK=True   Promoted
n8     kubelet     local                   <invalid>               <invalid>               <none>          <invalid>
n9     kubelet     <invalid>               <none>                  <none>                  <none>          <none>
`,
			wantStderr: "dynconfigctl: node \"n8\" annotation dynconfig.io/config-status: decoding the config status: unexpected end of JSON input\n" +
				"node \"n9\" annotation dynconfig.io/config-source: invalid NodeConfigSource: json: cannot unmarshal array into Go value of type v1.NodeConfigSource\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runStatusCommand(t, append([]string{"status"}, tt.args...), tt.nodes...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStderr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusPages: a fleet larger than a page is listed page by page, and
// every page is shown.
func TestStatusPages(t *testing.T) {
	fleet := statusFleet(t)
	client := fake.NewClientset()
	var continues []string
	client.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).GetListOptions()
		continues = append(continues, opts.Continue)
		if opts.Limit != 500 {
			t.Errorf("limit %d, want 500", opts.Limit)
		}
		if opts.Continue == "" {
			return true, &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: "page-2"}, Items: []corev1.Node{*fleet[1]}}, nil
		}
		return true, &corev1.NodeList{Items: []corev1.Node{*fleet[0]}}, nil
	})
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, &out, client, statusOptions{pageSize: 500}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"", "page-2"}, continues); diff != "" {
		t.Errorf("continue tokens (-want +got):\n%s", diff)
	}
	// Sorted by node across pages.
	var nodes []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		nodes = append(nodes, strings.Fields(line)[0])
	}
	if diff := cmp.Diff([]string{"n1", "n1", "n2"}, nodes); diff != "" {
		t.Errorf("rows (-want +got):\n%s\n%s", diff, out.String())
	}
}

// TestStatusLegacyConfigSource: for the kubelet, a Node without the
// annotation but with the legacy spec.configSource is assigned that source,
// as the Node source reads it; other components never read it.
func TestStatusLegacyConfigSource(t *testing.T) {
	legacy := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "old", UID: "uid-old", KubeletConfigKey: "kubelet"}}
	withLegacy := func(name string, annotations map[string]string, src *corev1.NodeConfigSource) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: corev1.NodeSpec{ConfigSource: src}}
	}
	nodes := []*corev1.Node{
		withLegacy("n1", nil, legacy),
		// The annotation wins, even empty.
		withLegacy("n2", map[string]string{"dynconfig.io/config-source": ""}, legacy),
		// kube-proxy does not read spec.configSource.
		withLegacy("n3", map[string]string{"dynconfig.io/config-status.kube-proxy": statusValue(t, nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal})}, nil),
		withLegacy("n4", nil, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "no-uid"}}),
	}
	nodes[2].Spec.ConfigSource = legacy
	stdout, stderr, code := runStatusCommand(t, []string{"status"}, nodes...)
	wantOut := `NODE   COMPONENT    ASSIGNED                              ACTIVE   LKG      CONDITION   PHASE
n1     kubelet      kube-system/old (spec.configSource)   <none>   <none>   <none>      <none>
n2     kubelet      local                                 <none>   <none>   <none>      <none>
n3     kubelet      kube-system/old (spec.configSource)   <none>   <none>   <none>      <none>
n3     kube-proxy   local                                 local    local    <none>      Local
n4     kubelet      <invalid>                             <none>   <none>   <none>      <none>
`
	wantErr := `dynconfigctl: node "n4" spec.configSource: invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid` + "\n"
	if code != exitError {
		t.Errorf("exit code %d, want 1", code)
	}
	if diff := cmp.Diff(wantOut, stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantErr, stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
