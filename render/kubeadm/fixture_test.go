package kubeadm

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite golden files and the kubeadm fixture")

// defaultsFixture is the KubeletConfiguration kubeadm 1.37 generates for a
// cluster with its default networking, on a machine running
// systemd-resolved (Ubuntu), before it applies patches.
const defaultsFixture = "testdata/kubeadm-1.37-kubeletconfiguration.yaml"

// kubeadmDefault builds that configuration from kubeadm's rules, read in
// k8s.io/kubernetes v1.37.0:
//
//   - cmd/kubeadm/app/componentconfigs/kubelet.go, kubeletConfig.Default:
//     featureGates {}, staticPodPath DefaultManifestsDir, clusterDNS the
//     tenth address of the service subnet, clusterDomain the cluster's DNS
//     domain, authentication.x509.clientCAFile <certificatesDir>/ca.crt,
//     authentication.anonymous.enabled false, authorization.mode Webhook,
//     authentication.webhook.enabled true, healthzBindAddress 127.0.0.1,
//     healthzPort 10248, rotateCertificates true, cgroupDriver systemd;
//   - cmd/kubeadm/app/componentconfigs/kubelet_unix.go, mutateResolverConfig:
//     resolvConf /run/systemd/resolve/resolv.conf when systemd-resolved is
//     active;
//   - cmd/kubeadm/app/apis/kubeadm/v1beta4/defaults.go: serviceSubnet
//     10.96.0.0/12 (so clusterDNS 10.96.0.10), dnsDomain cluster.local,
//     certificatesDir /etc/kubernetes/pki, DefaultManifestsDir
//     /etc/kubernetes/manifests;
//   - cmd/kubeadm/app/componentconfigs/configset.go, configBase.Marshal: the
//     object is encoded with apimachinery's YAML serializer, that is
//     encoding/json and then YAML, so zero durations appear as "0s" and
//     structs without omitempty as {}; that is also what the patch applies
//     to (cmd/kubeadm/app/phases/kubelet/config.go, WriteConfigToDisk).
func kubeadmDefault() *kubeletv1beta1.KubeletConfiguration {
	c := &kubeletv1beta1.KubeletConfiguration{
		FeatureGates:       map[string]bool{},
		StaticPodPath:      "/etc/kubernetes/manifests",
		ClusterDNS:         []string{"10.96.0.10"},
		ClusterDomain:      "cluster.local",
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To[int32](10248),
		RotateCertificates: true,
		CgroupDriver:       "systemd",
		ResolverConfig:     ptr.To("/run/systemd/resolve/resolv.conf"),
	}
	c.APIVersion = kubeletv1beta1.SchemeGroupVersion.String()
	c.Kind = "KubeletConfiguration"
	c.Authentication.X509.ClientCAFile = "/etc/kubernetes/pki/ca.crt"
	c.Authentication.Anonymous.Enabled = ptr.To(false)
	c.Authentication.Webhook.Enabled = ptr.To(true)
	c.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	return c
}

// TestKubeadmFixture keeps the fixture file and kubeadmDefault in step.
func TestKubeadmFixture(t *testing.T) {
	want, err := yaml.Marshal(kubeadmDefault())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(defaultsFixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(defaultsFixture)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-kubeadm rules +file):\n%s", filepath.Base(defaultsFixture), diff)
	}
}
