package cluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestControlPlane starts the cluster with Options.ControlPlane and checks
// what the option promises beyond "the processes run": the controller
// manager runs its controllers on ServiceAccount credentials (it creates
// their ServiceAccounts, attachdetach-controller among them, in
// kube-system), publishes the API server's CA from --root-ca-file as
// kube-root-ca.crt, and the API server carries the request header
// configuration the components authenticate with; both components hold
// their Lease; and they keep working across an API server restart (a
// namespace created after it gets its default ServiceAccount). Its last
// subtest, HeartbeatNode, checks cluster.HeartbeatNode on the same cluster
// (startHeartbeatCheck, set up first so that the node lifecycle
// controller's grace period runs while the rest does).
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler")
	}
	c := StartWithOptions(t, Options{ControlPlane: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	heartbeat := startHeartbeatCheck(ctx, t, c)

	for _, lease := range []string{ControllerManagerBinary, SchedulerBinary} {
		l, err := c.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("Lease kube-system/%s after StartWithOptions: %v, %v; want a holder", lease, l, err)
		}
	}
	auth, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if auth.Data["requestheader-client-ca-file"] == "" {
		t.Errorf("extension-apiserver-authentication has no requestheader-client-ca-file: the components' delegated authentication lacks it")
	}

	poll := func(what string, cond func(ctx context.Context) (bool, string)) {
		t.Helper()
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			var ok bool
			ok, last = cond(ctx)
			return ok, nil
		}); err != nil {
			t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
		}
	}
	poll("the controllers' ServiceAccounts (--use-service-account-credentials)", func(ctx context.Context) (bool, string) {
		list, err := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, sa := range list.Items {
			names = append(names, sa.Name)
		}
		return slices.Contains(names, "attachdetach-controller") && slices.Contains(names, "deployment-controller"),
			fmt.Sprintf("ServiceAccounts in kube-system: %v", names)
	})
	poll("kube-root-ca.crt in default holding the API server's CA (--root-ca-file)", func(ctx context.Context) (bool, string) {
		cm, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return bytes.Equal([]byte(cm.Data["ca.crt"]), c.Config.CAData), fmt.Sprintf("ca.crt of %d bytes, the CA %d", len(cm.Data["ca.crt"]), len(c.Config.CAData))
	})

	if err := c.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "after-restart-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll("the default ServiceAccount of namespace "+ns.Name+", created after an API server restart", func(ctx context.Context) (bool, string) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	t.Run("HeartbeatNode", heartbeat)
}
