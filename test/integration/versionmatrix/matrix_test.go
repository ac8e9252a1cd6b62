//go:build linux

package versionmatrix

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// The Node annotations of the default component (kubelet), and the parts
// of their values the test reads, spelt here as every version of the
// range writes them rather than through package nodeapi: the test is a
// reader of the contract of its own, which a change of N's nodeapi cannot
// move along with N's writers.
const (
	assignmentAnnotation = "dynconfig.io/config-source"
	statusAnnotation     = "dynconfig.io/config-status"
	claimAnnotation      = "dynconfig.io/config-source-rollout"
)

// wireStatus is what the test reads of a ConfigStatus.
type wireStatus struct {
	Phase  string                   `json:"phase"`
	Active *corev1.NodeConfigSource `json:"active"`
}

// wireClaim is what the test reads of a Claim.
type wireClaim struct {
	UID types.UID `json:"uid"`
}

// Budgets of the waits (the builds are done before any of them starts).
const (
	// matrixTimeout bounds one controller version's part of the matrix.
	matrixTimeout = 6 * time.Minute
	// waitTimeout bounds one wait for a state of the fleet or a rollout.
	waitTimeout = 3 * time.Minute
	// progressDeadline is the rollouts' progressDeadlineSeconds: a node
	// whose report the controller cannot read fails at it, with a reason
	// the test tells apart from the node's own verdict.
	progressDeadline = 90
	// trial is the configs' trial: short, the test waits for it.
	trial = "2s"
	// In TestVersionMatrix the good config's trial outlasts the progress
	// deadline: only a controller that reads the node's Trial report (and
	// when its trial ends) waits for it; one that cannot read it fails
	// the node at the deadline, as an older controller did on a newer
	// node's status before the skew rule.
	longTrial             = "25s"
	shortProgressDeadline = 20
)

// demoCrashProviderID, as the config's providerID, makes kubelet-like exit
// 1 right after it starts on the config (every version has the hook).
const demoCrashProviderID = "demo://crash-at-startup"

// TestVersionMatrix runs the rollout controller of each version (N-2, N-1,
// N; test/versions.txt) over a fleet of three nodes whose agents are one
// of each version: every pair of agent and controller versions the skew
// rule supports (all nine, nodeapi's doc) in one rollout per controller.
// For each controller version, on the real API server with that version's
// ConfigRollout CRD installed:
//
//   - a good config, its trial (25 s) longer than the progress deadline
//     (20 s), rolls out to all three and completes: every agent reported
//     its trial and then the promotion in a way the controller understood
//     (a report it could not read would fail the node at the deadline);
//   - a config that crash-loops the component (a bad config every version
//     catches) is assigned to all three at once with maxFailures 2: the
//     rollout halts only once each node failed, each failure is the node's
//     own report ("kubelet reports ..."), not the progress deadline that
//     an unreadable report would end in, and the halt reverts every node
//     to the good config, promoted, with the rollout's claims released.
func TestVersionMatrix(t *testing.T) {
	all := allVersions(t)
	for _, v := range all {
		v.Agent(t) // stop here, before a cluster starts, when one is missing
	}
	cl, kubeconfig := startCluster(t)
	for _, ctl := range all {
		t.Run("controller "+ctl.Name, func(t *testing.T) {
			m := newMatrix(t, cl, kubeconfig, "matrix-"+strings.ToLower(ctl.Name))
			ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
			defer cancel()
			m.run(ctx, ctl, all)
		})
	}
}

// matrix is one controller version's part of TestVersionMatrix.
type matrix struct {
	t          *testing.T
	cl         *cluster.Cluster
	client     kubernetes.Interface
	dyn        dynamic.Interface
	kubeconfig string
	ns         string // its ConfigMaps and ConfigRollouts, and the controller's --namespace
	label      string // on its Nodes, and the controller's --node-selector
	nodes      []string
	agents     map[string]*proctest.RestartLoop
}

// newMatrix makes the part of a test named name (its namespace, its
// Nodes' label) on the cluster.
func newMatrix(t *testing.T, cl *cluster.Cluster, kubeconfig, name string) *matrix {
	return &matrix{t: t, cl: cl, client: cl.Client, dyn: dynamic.NewForConfigOrDie(cl.Config), kubeconfig: kubeconfig,
		ns: name, label: name}
}

// startCluster starts the API server for a test, and writes a kubeconfig
// for the processes.
func startCluster(t *testing.T) (*cluster.Cluster, string) {
	cl := cluster.Start(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, cl.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return cl, kubeconfig
}

// setup creates the part's namespace and its three immutable ConfigMaps
// (old, good with goodTrial, and bad), and starts one node per agent version, each
// assigned old, and waits until all of them run it promoted.
func (m *matrix) setup(ctx context.Context, agents []*version, goodTrial string) (old, good, bad *corev1.ConfigMap) {
	t := m.t
	if _, err := m.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old = m.configMap(ctx, "old", kubeletPayload(100), trial, 0)
	good = m.configMap(ctx, "good", kubeletPayload(101), goodTrial, 0)
	bad = m.configMap(ctx, "bad", kubeletPayload(102)+"providerID: "+demoCrashProviderID+"\n", "10m", 1)

	m.agents = map[string]*proctest.RestartLoop{}
	dir := t.TempDir()
	for _, a := range agents {
		name := m.label + "-agent-" + strings.ToLower(a.Name)
		m.nodes = append(m.nodes, name)
		if _, err := m.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{m.label: "true", "agent-version": a.Name},
			Annotations: map[string]string{assignmentAnnotation: assignmentFor(old)},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m.agents[name] = proctest.StartLoop(t, a.Agent(t), []string{
			"--kubeconfig=" + m.kubeconfig, "--node-name=" + name,
			"--dynamic-config-dir=" + filepath.Join(dir, name), "--port=0",
			"--status-file=" + filepath.Join(dir, name+".json"),
		}, nil)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range m.nodes {
				t.Logf("agent on %s: %s", name, proctest.DescribeProcs(m.agents[name].All()))
				if procs := m.agents[name].All(); len(procs) > 0 {
					t.Logf("agent on %s, last stderr:\n%s", name, proctest.Tail(procs[len(procs)-1].Stderr(), 20))
				}
			}
		}
	})
	m.waitFleetOn(ctx, old)
	return old, good, bad
}

// startController installs version ctl's ConfigRollout CRD and starts its
// controller, watching the part's namespace and Nodes only.
func (m *matrix) startController(ctx context.Context, ctl *version) *proctest.Proc {
	t := m.t
	m.installCRD(ctx, ctl.CRD(t))
	p := proctest.Start(t, ctl.Controller(t), []string{
		"--kubeconfig=" + m.kubeconfig, "--namespace=" + m.ns, "--node-selector=" + m.label,
		"--leader-elect=false", "--metrics-address=",
	}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller %s stderr:\n%s", ctl.Name, proctest.Tail(p.Stderr(), 60))
		}
	})
	return p
}

func (m *matrix) run(ctx context.Context, ctl *version, agents []*version) {
	t := m.t
	_, good, bad := m.setup(ctx, agents, longTrial)
	p := m.startController(ctx, ctl)

	// A good config on every node at once, its trial longer than the
	// progress deadline.
	ro := m.rollout(ctx, "good", good, func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		s.ProgressDeadlineSeconds = ptr.To(int32(shortProgressDeadline))
	})
	got := m.waitRollout(ctx, ro, "completed", func(r *v1alpha1.ConfigRollout) bool { return r.Status.Phase == v1alpha1.PhaseCompleted })
	if got.Status.Promoted != int32(len(m.nodes)) || got.Status.Failed != 0 {
		t.Errorf("good rollout completed with %d promoted, %d failed, want %d and 0: %s", got.Status.Promoted, got.Status.Failed, len(m.nodes), got.Status.Message)
	}
	m.waitFleetOn(ctx, good)
	t.Logf("controller %s: the good rollout completed: %s", ctl.Name, got.Status.Message)

	// A bad config on every node at once; it halts when all three failed.
	ro = m.rollout(ctx, "bad", bad, func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		s.MaxFailures = int32(len(m.nodes) - 1)
	})
	got = m.waitRollout(ctx, ro, "halted", func(r *v1alpha1.ConfigRollout) bool { return r.Status.Phase == v1alpha1.PhaseHalted },
		v1alpha1.PhaseCompleted)
	reasons := map[string]string{}
	for _, f := range got.Status.Failures {
		reasons[f.Node] = f.Reason
	}
	for _, name := range m.nodes {
		if r, ok := reasons[name]; !ok || !strings.HasPrefix(r, "kubelet reports ") {
			t.Errorf("bad rollout halted; node %s (agent %s): failure %q (recorded %t), want the node's own report (\"kubelet reports ...\"); all failures %+v",
				name, agentOf(name), r, ok, got.Status.Failures)
		}
	}
	t.Logf("controller %s: the bad rollout halted: %s; failures %+v", ctl.Name, got.Status.Message, got.Status.Failures)
	m.waitRollout(ctx, ro, "every node reverted and released", func(r *v1alpha1.ConfigRollout) bool {
		return r.Status.Phase == v1alpha1.PhaseHalted && r.Status.Reverting == 0 && len(m.claims(ctx, r)) == 0
	}, v1alpha1.PhaseCompleted) // Halted is the phase waited in: not a wrong one
	m.waitFleetOn(ctx, good)
	if p.Exited() {
		t.Errorf("controller %s exited with %d", ctl.Name, p.Code())
	}
}

// agentOf is the agent version of a matrix node, from its name.
func agentOf(node string) string {
	i := strings.LastIndex(node, "-agent-")
	return strings.ToUpper(node[i+len("-agent-"):])
}

// installCRD creates or replaces the ConfigRollout CRD with the manifest at
// path (the controller version's own, as its deploy/ installs it) and
// waits until ConfigRollouts are served.
func (m *matrix) installCRD(ctx context.Context, path string) {
	t := m.t
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	crds := m.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	u := &unstructured.Unstructured{Object: obj}
	if cur, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = crds.Update(ctx, u, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("replacing the CRD with %s: %v", path, err)
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	} else if _, err := crds.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the CRD from %s: %v", path, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := m.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(m.ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("ConfigRollouts never served: %v", err)
	}
}

// kubeletPayload is a valid KubeletConfiguration; maxPods tells the
// configs apart.
func kubeletPayload(maxPods int) string {
	return fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: %d\n", maxPods)
}

// configMap creates an immutable ConfigMap with payload, its trial
// duration and, when threshold > 0, its crash-loop threshold.
func (m *matrix) configMap(ctx context.Context, name, payload, trial string, threshold int) *corev1.ConfigMap {
	m.t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns, Annotations: map[string]string{components.TrialDurationAnnotation: trial}},
		Data:       map[string]string{kubelet.PayloadKey: payload},
		Immutable:  ptr.To(true),
	}
	if threshold > 0 {
		cm.Annotations[components.CrashLoopThresholdAnnotation] = fmt.Sprint(threshold)
	}
	got, err := m.client.CoreV1().ConfigMaps(m.ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		m.t.Fatalf("creating ConfigMap %s: %v", name, err)
	}
	return got
}

// assignmentFor is the assignment annotation's value for cm, as a person
// writes it (every version reads it).
func assignmentFor(cm *corev1.ConfigMap) string {
	b, err := json.Marshal(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: kubelet.PayloadKey}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func nodesStep(v intstr.IntOrString) v1alpha1.RolloutStep { return v1alpha1.RolloutStep{Nodes: &v} }

// rollout creates a ConfigRollout of cm over the part's nodes, with the
// fields every version's CRD has.
func (m *matrix) rollout(ctx context.Context, name string, cm *corev1.ConfigMap, edit func(*v1alpha1.ConfigRolloutSpec)) string {
	m.t.Helper()
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns},
		Spec: v1alpha1.ConfigRolloutSpec{
			ConfigMapName:           cm.Name,
			NodeSelector:            &metav1.LabelSelector{MatchLabels: map[string]string{m.label: "true"}},
			ProgressDeadlineSeconds: ptr.To(int32(progressDeadline)),
		},
	}
	edit(&ro.Spec)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		m.t.Fatal(err)
	}
	delete(obj, "status")
	if _, err := m.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(m.ns).Create(ctx,
		&unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		m.t.Fatalf("creating ConfigRollout %s: %v", name, err)
	}
	return name
}

// waitRollout polls the rollout until cond holds; it fails the test when
// the rollout reaches a phase of wrong first (a wait for anything else
// than a halt: Halted) or the wait times out, with the rollout's status.
func (m *matrix) waitRollout(ctx context.Context, name, what string, cond func(*v1alpha1.ConfigRollout) bool,
	wrong ...v1alpha1.RolloutPhase) *v1alpha1.ConfigRollout {
	m.t.Helper()
	var last *v1alpha1.ConfigRollout
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		u, err := m.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(m.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		var ro v1alpha1.ConfigRollout
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
			return false, err
		}
		last = &ro
		if cond(&ro) {
			return true, nil
		}
		if len(wrong) == 0 {
			wrong = []v1alpha1.RolloutPhase{v1alpha1.PhaseHalted}
		}
		if slices.Contains(wrong, ro.Status.Phase) {
			return false, fmt.Errorf("the rollout is %s", ro.Status.Phase)
		}
		return false, nil
	})
	if err != nil {
		status := "none read"
		if last != nil {
			status = fmt.Sprintf("phase %s, message %q, failures %+v, promoted %d, failed %d", last.Status.Phase, last.Status.Message,
				last.Status.Failures, last.Status.Promoted, last.Status.Failed)
		}
		m.t.Fatalf("ConfigRollout %s not %s: %v; %s; nodes: %s", name, what, err, status, m.describeNodes(ctx))
	}
	return last
}

// claims returns the nodes of the part that carry the rollout's claim.
func (m *matrix) claims(ctx context.Context, ro *v1alpha1.ConfigRollout) []string {
	m.t.Helper()
	nodes, err := m.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: m.label})
	if err != nil {
		m.t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		v, ok := n.Annotations[claimAnnotation]
		if !ok {
			continue
		}
		var c wireClaim
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			m.t.Errorf("node %s: claim %s: %v", n.Name, v, err)
			continue
		}
		if c.UID == ro.UID {
			out = append(out, n.Name)
		}
	}
	return out
}

// waitFleetOn waits until every node of the part is assigned cm and
// reports it active and promoted.
func (m *matrix) waitFleetOn(ctx context.Context, cm *corev1.ConfigMap) {
	m.t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range m.nodes {
			n, err := m.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil // keep why: the last answer the nodes gave
			}
			if ok, w := nodeOn(n, cm); !ok {
				why = name + ": " + w
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		m.t.Fatalf("the fleet never all ran ConfigMap %s promoted: %s", cm.Name, why)
	}
}

// nodeOn says whether n is assigned cm and reports it active and promoted
// (and if not, what it shows instead).
func nodeOn(n *corev1.Node, cm *corev1.ConfigMap) (bool, string) {
	var src corev1.NodeConfigSource
	if err := json.Unmarshal([]byte(n.Annotations[assignmentAnnotation]), &src); err != nil || src.ConfigMap == nil || src.ConfigMap.UID != cm.UID {
		return false, fmt.Sprintf("assigned %s (%v)", n.Annotations[assignmentAnnotation], err)
	}
	var s wireStatus
	if err := json.Unmarshal([]byte(n.Annotations[statusAnnotation]), &s); err != nil {
		return false, fmt.Sprintf("status %s: %v", n.Annotations[statusAnnotation], err)
	}
	if s.Phase != "Promoted" || s.Active == nil || s.Active.ConfigMap == nil || s.Active.ConfigMap.UID != cm.UID {
		return false, "status " + n.Annotations[statusAnnotation]
	}
	return true, ""
}

// describeNodes says, for a failure message, what each node of the part
// is assigned and reports.
func (m *matrix) describeNodes(ctx context.Context) string {
	var b strings.Builder
	for _, name := range m.nodes {
		n, err := m.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", name, err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: assigned %s; status %s; claim %s", name, n.Annotations[assignmentAnnotation],
			n.Annotations[statusAnnotation], n.Annotations[claimAnnotation])
	}
	return b.String()
}
