package kubeproxy

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/components"
)

// Profile tells dynconfig how to handle kube-proxy's
// kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration. Its zero value is
// ready to use and it holds no state, so one value may be shared freely.
type Profile struct{}

// GroupVersionKind returns kubeproxy.config.k8s.io/v1alpha1, Kind=KubeProxyConfiguration.
func (Profile) GroupVersionKind() schema.GroupVersionKind {
	return v1alpha1.SchemeGroupVersion.WithKind("KubeProxyConfiguration")
}

// PayloadKey returns "config.conf", the ConfigMap key under which kubeadm
// stores kube-proxy's configuration (ConfigMap kube-system/kube-proxy).
func (Profile) PayloadKey() string {
	return "config.conf"
}

// Default fills every unset field of cfg with kube-proxy's v1alpha1 default,
// assuming Linux. It never replaces a value that is set; see the package
// documentation for what "unset" means for non-pointer fields. A nil cfg is
// left alone.
func (Profile) Default(cfg *v1alpha1.KubeProxyConfiguration) {
	setDefaults(cfg)
}

// Trial returns the trial settings of a config from the annotations of its
// ConfigMap (dynconfig.io/trial-duration, dynconfig.io/crash-loop-threshold),
// falling back to components.DefaultTrial for the ones not set. kube-proxy
// has no opinion of its own here, so this is the shared rule unchanged.
func (Profile) Trial(annotations map[string]string) (components.Trial, error) {
	return components.TrialFromAnnotations(annotations, components.DefaultTrial())
}
