package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	dynconfig "github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// profile is what dynconfigctl knows of a component's config type: enough to
// validate and render its documents without knowing the Go type.
type profile struct {
	// component is the component's name ("kubelet", "kube-proxy").
	component  string
	gvk        schema.GroupVersionKind
	payloadKey string
	// merge runs the profile's pipeline (decoding, strict unless
	// opts.Lenient, defaults, validation) over layers. dropInDir, when set, is read with the
	// kubelet's --config-dir rules into layers.DropIns first.
	merge func(layers merge.Layers, dropInDir string, opts merge.Options) (*mergedConfig, error)
}

// mergedConfig is a merge.Result without its type.
type mergedConfig struct {
	object     any
	provenance map[string]string
	warnings   []string
}

// newProfile wraps a typed profile.
func newProfile[T any](component string, p dynconfig.Profile[T]) profile {
	return profile{
		component:  component,
		gvk:        p.GroupVersionKind(),
		payloadKey: p.PayloadKey(),
		merge: func(layers merge.Layers, dropInDir string, opts merge.Options) (*mergedConfig, error) {
			pl, err := merge.New[T](p, opts)
			if err != nil {
				return nil, err
			}
			if dropInDir != "" {
				docs, err := pl.ReadDropIns(dropInDir)
				if err != nil {
					return nil, err
				}
				layers.DropIns = docs
			}
			res, err := pl.Merge(layers)
			if err != nil {
				return nil, err
			}
			return &mergedConfig{object: res.Object, provenance: res.Provenance, warnings: res.Warnings}, nil
		},
	}
}

// profiles are the components dynconfigctl validates and renders.
var profiles = []profile{
	newProfile[kubeletv1beta1.KubeletConfiguration](nodeapi.DefaultComponent, kubelet.Profile{}),
	newProfile[kubeproxyv1alpha1.KubeProxyConfiguration]("kube-proxy", kubeproxy.Profile{}),
}

// lookupProfile returns the profile of a component ("" is the kubelet).
func lookupProfile(component string) (profile, bool) {
	component = nodeapi.ComponentOrDefault(component)
	for _, p := range profiles {
		if p.component == component {
			return p, true
		}
	}
	return profile{}, false
}

// profileForKind returns the profile whose documents carry apiVersion and
// kind.
func profileForKind(apiVersion, kind string) (profile, bool) {
	for _, p := range profiles {
		if p.gvk.GroupVersion().String() == apiVersion && p.gvk.Kind == kind {
			return p, true
		}
	}
	return profile{}, false
}

// knownComponents lists the components of profiles, for messages.
func knownComponents() string {
	var names []string
	for _, p := range profiles {
		names = append(names, p.component)
	}
	return strings.Join(names, " and ")
}

// knownKinds lists the apiVersion/kind of every profile, for messages.
func knownKinds() string {
	var kinds []string
	for _, p := range profiles {
		kinds = append(kinds, fmt.Sprintf("%s %s", p.gvk.GroupVersion().String(), p.gvk.Kind))
	}
	return strings.Join(kinds, ", ")
}
