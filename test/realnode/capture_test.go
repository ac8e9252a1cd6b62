//go:build linux

package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// capturedNodeFile is the Node TestCaptureNode captured from the real
// kubelet: the fixture of the rollout controller's memory benchmarks next
// to the hand-written production Node (test/integration checks that the
// hand-written one has every field of this one).
const capturedNodeFile = "../../rollout/controller/testdata/node-realnode.json"

// handWrittenNodeFile is the production worker Node the benchmarks
// use, written by hand on the kubelet's shape (with what kubeadm, a CNI,
// a CSI driver and a cloud add): it must have every field the real
// kubelet writes.
const handWrittenNodeFile = "../../rollout/controller/testdata/node.json"

// capturedNodeName replaces the real node's name (realnode-<pid>) in the
// captured Node, so that a capture differs from the last only where the
// kubelet's Node does.
const capturedNodeName = "realnode-capture"

// TestCaptureNode runs the real v1.37 kubelet under dynconfig (the run
// role), with a pod running and a ConfigMap assigned and promoted, and
// reads its Node as the API server serves it: labels, annotations
// (dynconfig's assignment and status among them), managedFields,
// conditions (ConfigOK too), addresses, capacity, allocatable,
// daemonEndpoints, nodeInfo, images, runtimeHandlers, features. It
// requires that every field path of that Node is in capturedNodeFile (a
// kubelet that writes a new field makes the fixture stale: capture it
// again) and in handWrittenNodeFile. With DYNCONFIG_CAPTURE_NODE=1 it first
// writes the Node to capturedNodeFile (test/hack/capture-node.sh).
func TestCaptureNode(t *testing.T) {
	cl, n := managedNode(t)
	n.runPod(cl.Client, "web")
	cm := n.configMap("capture", "maxPods: 100\n", "2s", threshold)
	assigned := time.Now()
	n.assign(cm)
	n.eventually("the assigned config promoted", n.phase(nodeapi.PhasePromoted, cm))
	n.eventually("Node Ready on the assigned config", n.ready(100, assigned))
	raw, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.name).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte(n.name), []byte(capturedNodeName))
	var node corev1.Node
	if err := json.Unmarshal(raw, &node); err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Annotations[nodeapi.StatusAnnotation]; !ok {
		t.Fatalf("the captured Node has no %s annotation", nodeapi.StatusAnnotation)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	indented.WriteByte('\n')
	t.Logf("the real kubelet's Node: %d bytes of JSON as the API server serves it, %d labels, %d annotations, %d managedFields, %d conditions, %d images",
		len(raw), len(node.Labels), len(node.Annotations), len(node.ManagedFields), len(node.Status.Conditions), len(node.Status.Images))
	if os.Getenv("DYNCONFIG_CAPTURE_NODE") == "1" {
		if err := os.WriteFile(capturedNodeFile, indented.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Clean(capturedNodeFile))
	}
	live, err := nodeFieldPaths(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path, fix string
		notReady  bool // the fixture is of a Ready node in a full control plane
	}{
		{capturedNodeFile, "capture it again (test/hack/capture-node.sh)", false},
		{handWrittenNodeFile, "add it there", true},
	} {
		fixture, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatalf("%v (DYNCONFIG_CAPTURE_NODE=1 writes the captured one)", err)
		}
		have, err := nodeFieldPaths(fixture)
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		for _, p := range live {
			if f.notReady && strings.HasPrefix(p, ".spec.taints") {
				// The kubelet registers its Node with the
				// node.kubernetes.io/not-ready taint, and only
				// kube-controller-manager's node lifecycle controller,
				// which this test does not run, takes it off.
				continue
			}
			if !slices.Contains(have, p) {
				t.Errorf("the real kubelet's Node has %s, %s does not: %s", p, f.path, f.fix)
			}
		}
	}
}

// nodeFieldPaths returns the field paths of a Node's JSON, sorted, with
// the keys of maps that vary from node to node left out (labels,
// annotations, capacity, allocatable, managedFields' fieldsV1) and list
// items as "[]".
func nodeFieldPaths(raw []byte) ([]string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := prefix + "." + k
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
				switch {
				case k == "labels", k == "annotations", k == "capacity", k == "allocatable", k == "fieldsV1":
				default:
					walk(p, e)
				}
			}
		case []any:
			for _, e := range v {
				walk(prefix+"[]", e)
			}
		}
	}
	walk("", v)
	slices.Sort(out)
	return slices.Compact(out), nil
}
