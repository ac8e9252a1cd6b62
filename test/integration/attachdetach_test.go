//go:build linux

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/test/cluster"
)

// What the attach-detach test names.
const (
	// controllerManagedAttachAnnotation is the annotation a kubelet puts on
	// its Node when the attach-detach controller (not the kubelet) attaches
	// its volumes: the kubelet's default, enableControllerAttachDetach.
	controllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"
	// attachDriver is the CSI driver the test's CSIDriver object declares;
	// no such driver runs: the test plays its external attacher.
	attachDriver = "attach.dynconfig.test"
	// attachDetachSA is the kube-system ServiceAccount whose credentials
	// kube-controller-manager's attach-detach controller writes Node
	// status with under --use-service-account-credentials.
	attachDetachSA   = "attachdetach-controller"
	attachDetachUser = "system:serviceaccount:kube-system:" + attachDetachSA
)

// TestAttachDetachWithDeployApplied runs the real attach-detach controller
// (kube-controller-manager as kubeadm runs it, on ServiceAccount
// credentials) on a cluster with Node,RBAC authorization and deploy/
// applied as `kubectl apply -k deploy/` applies it. A CSIDriver requires
// attachment; a PersistentVolume of that driver is bound to a claim by the
// PV controller; a Pod using the claim is bound to a Node by the
// scheduler; the attach-detach controller creates the VolumeAttachment,
// the test plays the CSI driver's external attacher and marks it
// attached, and then kube-controller-manager must write the volume into
// the Node's status.volumesAttached (a PATCH of nodes/status as
// system:serviceaccount:kube-system:attachdetach-controller). That field
// is what a kubelet waits for before it mounts the volume: an admission
// policy of deploy/ that refused the patch would leave every such Pod
// without its volume.
func TestAttachDetachWithDeployApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("the full control plane: skipped with -short")
	}
	ctx := testContext(t, 6*time.Minute)
	cl := cluster.StartWithOptions(t, cluster.Options{
		NodeAuthorization: true,
		ControlPlane:      true,
		// -v=2: the attach-detach controller logs why a Node status
		// update failed only at this level.
		ControllerManagerFlags: map[string][]string{"v": {"2"}},
	})
	admin := newClient(t, cl.Config, 200, 400)
	if _, err := cl.ApplyKustomization(ctx, deployDir); err != nil {
		t.Fatal(err)
	}

	node := registerAttachNode(ctx, t, cl, objectName(t, "attach"))
	waitOwnNodePolicy(ctx, t, cl, node)

	if _, err := admin.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: attachDriver},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(true),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CSIDriver %s: %v", attachDriver, err)
	}
	pvName, claimName, handle := objectName(t, "pv"), objectName(t, "claim"), "volume-1"
	size := resource.MustParse("1Gi")
	if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			// Pre-bound to the claim, as a statically provisioned volume.
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: claimName},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: attachDriver, VolumeHandle: handle}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolume %s: %v", pvName, err)
	}
	if _, err := admin.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claimName, Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolumeClaim %s: %v", claimName, err)
	}
	// The PV controller completes the binding.
	waitFor(ctx, t, controlPlaneWait, "claim "+claimName+" Bound by the PV controller", func(ctx context.Context) (bool, string) {
		c, err := admin.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return c.Status.Phase == corev1.ClaimBound, string(c.Status.Phase)
	}, nil)

	podName := objectName(t, "uses-volume")
	if _, err := admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: namespace},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
			}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Pod %s: %v", podName, err)
	}
	waitFor(ctx, t, controlPlaneWait, "Pod "+podName+" bound to "+node+" by the scheduler", func(ctx context.Context) (bool, string) {
		p, err := admin.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == node, fmt.Sprintf("spec.nodeName %q, conditions %v", p.Spec.NodeName, p.Status.Conditions)
	}, nil)

	// The attach-detach controller asks the driver to attach: a
	// VolumeAttachment for the PV on the Node.
	var va *storagev1.VolumeAttachment
	waitFor(ctx, t, controlPlaneWait, "a VolumeAttachment of "+pvName+" to "+node+" from the attach-detach controller", func(ctx context.Context) (bool, string) {
		list, err := admin.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i, a := range list.Items {
			if a.Spec.Attacher == attachDriver && a.Spec.NodeName == node && ptr.Deref(a.Spec.Source.PersistentVolumeName, "") == pvName {
				va = &list.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d VolumeAttachments, none for %s on %s", len(list.Items), pvName, node)
	}, nil)

	// The external attacher's part: the volume is attached.
	va.Status.Attached = true
	if _, err := admin.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking VolumeAttachment %s attached: %v", va.Name, err)
	}

	// kube-controller-manager reports it on the Node.
	want := corev1.UniqueVolumeName("kubernetes.io/csi/" + attachDriver + "^" + handle)
	waitFor(ctx, t, controlPlaneWait, "Node "+node+" status.volumesAttached to list "+string(want)+", written by kube-controller-manager",
		func(ctx context.Context) (bool, string) {
			n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			listed := slices.ContainsFunc(n.Status.VolumesAttached, func(v corev1.AttachedVolume) bool { return v.Name == want })
			return listed && writtenByControllerManager(n), fmt.Sprintf("status.volumesAttached %v, managers of it %v",
				n.Status.VolumesAttached, volumesAttachedManagers(n))
		},
		func() string { return attachDetachRefusal(ctx, cl, node, want) })
}

// registerAttachNode creates a Node as a kubelet registers one, with the
// annotation that hands its volumes to the attach-detach controller, and
// keeps it Ready and schedulable (cluster.HeartbeatNode: no kubelet runs).
func registerAttachNode(ctx context.Context, t *testing.T, cl *cluster.Cluster, name string) string {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{controllerManagedAttachAnnotation: "true"}}}
	if _, err := cl.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Node %s: %v", name, err)
	}
	if err := cl.HeartbeatNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitOwnNodePolicy waits until deploy/'s own-node policy is enforced: a
// dry-run status patch of node as the kube-proxy-like component's
// ServiceAccount, with no Pod on any Node, is refused by it. The
// component's ClusterRole grants the patch, so only the policy refuses it.
func waitOwnNodePolicy(ctx context.Context, t *testing.T, cl *cluster.Cluster, node string) {
	t.Helper()
	client := newClient(t, serviceAccountImpersonation(cl, proxySANamespace, proxySAName), 50, 100)
	waitFor(ctx, t, waitTimeout, "the "+ownNodePolicy+" policy to refuse a kube-proxy-like status patch of "+node, func(ctx context.Context) (bool, string) {
		err := dryRunStatusPatch(ctx, client, node, []byte(`{"status":{"conditions":[{"type":"KubeProxyConfigOK","status":"True"}]}}`))
		return err != nil && strings.Contains(err.Error(), ownNodePolicy), fmt.Sprintf("%v", err)
	}, nil)
}

// serviceAccountImpersonation is the admin's config impersonating the
// ServiceAccount namespace/name with the groups its token gives (and no
// Pod-bound extras).
func serviceAccountImpersonation(cl *cluster.Cluster, namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(cl.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name, Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	return cfg
}

func dryRunStatusPatch(ctx context.Context, client kubernetes.Interface, node string, patch []byte) error {
	_, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
	return err
}

// writtenByControllerManager: kube-controller-manager (its user agent
// names the field manager) owns status.volumesAttached.
func writtenByControllerManager(n *corev1.Node) bool {
	return slices.Contains(volumesAttachedManagers(n), "kube-controller-manager")
}

// volumesAttachedManagers lists the field managers that own
// status.volumesAttached through the status subresource.
func volumesAttachedManagers(n *corev1.Node) []string {
	var out []string
	for _, m := range n.ManagedFields {
		if m.Subresource == "status" && m.FieldsV1 != nil && bytes.Contains(m.FieldsV1.Raw, []byte(`"f:volumesAttached"`)) {
			out = append(out, m.Manager)
		}
	}
	return out
}

// attachDetachRefusal says why the Node's status lacks the volume: what
// the API server answers to the attach-detach controller's patch (tried
// again as a dry run, impersonating it) and the controller's own log of
// its failed updates.
func attachDetachRefusal(ctx context.Context, cl *cluster.Cluster, node string, volume corev1.UniqueVolumeName) string {
	var b strings.Builder
	if client, err := kubernetes.NewForConfig(serviceAccountImpersonation(cl, metav1.NamespaceSystem, attachDetachSA)); err != nil {
		fmt.Fprintf(&b, "impersonating %s: %v\n", attachDetachUser, err)
	} else {
		patch := fmt.Sprintf(`{"status":{"volumesAttached":[{"name":%q,"devicePath":""}]}}`, volume)
		err := dryRunStatusPatch(ctx, client, node, []byte(patch))
		fmt.Fprintf(&b, "the same status patch as %s, dry run: %v\n", attachDetachUser, errOrAllowed(err))
	}
	data, err := os.ReadFile(filepath.Join(cl.LogDir(), cluster.ControllerManagerBinary+".log"))
	if err != nil {
		fmt.Fprintf(&b, "reading the controller manager's log: %v\n", err)
		return b.String()
	}
	var lines []string
	for l := range strings.Lines(string(data)) {
		if strings.Contains(l, "Could not update node status") || strings.Contains(l, "UpdateNodeStatuses failed") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	fmt.Fprintf(&b, "kube-controller-manager's last node status failures:\n%s", strings.Join(lines, ""))
	return b.String()
}

func errOrAllowed(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
