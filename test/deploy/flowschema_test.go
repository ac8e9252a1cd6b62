package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/dynconfig/dynconfig/test/cluster"
)

// The response headers in which the API server names the FlowSchema and
// the priority level a request was classified in.
const (
	flowSchemaHeader    = "X-Kubernetes-PF-FlowSchema-UID"
	priorityLevelHeader = "X-Kubernetes-PF-PriorityLevel-UID"
)

// TestFlowSchemaClassifiesTheController applies deploy/rollout/flowschema.yaml
// and the controller's ServiceAccount and grants to a real API server, and
// makes requests with the ServiceAccount's token: the API server must
// classify a Node list (and a PATCH, as a rollout makes) in the FlowSchema
// dynconfig-rollout and its priority level, and leave a Lease read to
// upstream's system-leader-election (the leader-election level). A
// component's status write with its node's identity must land in
// upstream's system-node-high, as deploy/rollout/README.md says.
func TestFlowSchemaClassifiesTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cl.ApplyManifests(ctx, abs(t, "rollout/flowschema.yaml"), abs(t, "overlays/cluster-wide/rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	fc := cl.Client.FlowcontrolV1()
	uidOf := func(get func() (types.UID, error)) types.UID {
		t.Helper()
		uid, err := get()
		if err != nil {
			t.Fatal(err)
		}
		return uid
	}
	fsUID := func(name string) types.UID {
		return uidOf(func() (types.UID, error) {
			fs, err := fc.FlowSchemas().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return fs.UID, nil
		})
	}
	plUID := func(name string) types.UID {
		return uidOf(func() (types.UID, error) {
			pl, err := fc.PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return pl.UID, nil
		})
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "apf-node"}}
	if _, err := cl.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controller, err := cl.ServiceAccountConfig(ctx, "kube-system", "dynconfig-rollout")
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := cl.NodeConfig(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what                   string
		cfg                    *rest.Config
		method, path, body     string
		flowSchema, priorityLv string
	}{
		{"the controller lists Nodes", controller, http.MethodGet, "/api/v1/nodes?limit=1", "", "dynconfig-rollout", "dynconfig-rollout"},
		{"the controller patches a Node", controller, http.MethodPatch, "/api/v1/nodes/apf-node",
			`{"metadata":{"annotations":{"dynconfig.io/config-source":null}}}`, "dynconfig-rollout", "dynconfig-rollout"},
		{"the controller reads its Lease", controller, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dynconfig-rollout", "",
			"system-leader-election", "leader-election"},
		{"a component with its node's identity writes its status", kubelet, http.MethodPatch, "/api/v1/nodes/apf-node/status",
			`{"metadata":{"annotations":{"dynconfig.io/config-status":"{\"phase\":\"Local\"}"}}}`, "system-node-high", "node-high"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			wantFS, wantPL := fsUID(tc.flowSchema), plUID(tc.priorityLv)
			hc, err := rest.HTTPClientFor(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var gotFS, gotPL string
			var status int
			// The API server takes a new FlowSchema in shortly after it is
			// stored.
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				req, err := http.NewRequestWithContext(ctx, tc.method, strings.TrimSuffix(tc.cfg.Host, "/")+tc.path, body)
				if err != nil {
					return false, err
				}
				if tc.body != "" {
					req.Header.Set("Content-Type", "application/merge-patch+json")
				}
				resp, err := hc.Do(req)
				if err != nil {
					return false, nil
				}
				_ = resp.Body.Close()
				gotFS, gotPL, status = resp.Header.Get(flowSchemaHeader), resp.Header.Get(priorityLevelHeader), resp.StatusCode
				if status == http.StatusNotFound && tc.method == http.MethodGet && !strings.Contains(tc.path, "leases") {
					return false, fmt.Errorf("%s %s: HTTP 404", req.Method, req.URL)
				}
				return gotFS == string(wantFS), nil
			})
			if err != nil {
				t.Fatalf("%s %s: %s %q, want %q (FlowSchema %s); HTTP %d", tc.method, tc.path, flowSchemaHeader, gotFS, wantFS, tc.flowSchema, status)
			}
			if gotPL != string(wantPL) {
				t.Errorf("%s %s: %s %q, want %q (priority level %s)", tc.method, tc.path, priorityLevelHeader, gotPL, wantPL, tc.priorityLv)
			}
			if status >= 300 && status != http.StatusNotFound {
				t.Errorf("%s %s: HTTP %d", tc.method, tc.path, status)
			}
			t.Logf("%s %s: FlowSchema %s (%s), priority level %s, HTTP %d", tc.method, tc.path, tc.flowSchema, gotFS, tc.priorityLv, status)
		})
	}
}
