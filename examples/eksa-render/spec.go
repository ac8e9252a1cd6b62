package main

import (
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/provision"
)

// Cluster is the part of an EKS Anywhere Cluster object this example reads.
// Every other field is an error: the decoder is strict.
type Cluster struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   Metadata    `json:"metadata"`
	Spec       ClusterSpec `json:"spec"`
}

// Metadata is the object's metadata; only the name is read.
type Metadata struct {
	Name string `json:"name"`
}

// ClusterSpec holds the node groups and the cluster-wide kubelet inputs.
type ClusterSpec struct {
	// DatacenterRef's kind names the provider (VSphereDatacenterConfig...),
	// which decides the kubelet fields EKS Anywhere sets itself.
	DatacenterRef                 Ref             `json:"datacenterRef"`
	ClusterNetwork                *ClusterNetwork `json:"clusterNetwork,omitempty"`
	ControlPlaneConfiguration     *NodeGroup      `json:"controlPlaneConfiguration"`
	WorkerNodeGroupConfigurations []NodeGroup     `json:"workerNodeGroupConfigurations"`
}

// Ref refers to another object by kind and name.
type Ref struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
}

// ClusterNetwork holds the DNS settings.
type ClusterNetwork struct {
	DNS *DNS `json:"dns,omitempty"`
}

// DNS holds the resolver configuration.
type DNS struct {
	ResolvConf *ResolvConf `json:"resolvConf,omitempty"`
}

// ResolvConf is clusterNetwork.dns.resolvConf, the explicit field behind the
// kubelet's resolvConf.
type ResolvConf struct {
	Path string `json:"path"`
}

// NodeGroup is the control plane or one worker node group.
type NodeGroup struct {
	// Name names a worker group (and its output directory); the control
	// plane has none.
	Name string `json:"name,omitempty"`
	// OSFamily is ubuntu (kubeadm patch) or bottlerocket (settings TOML).
	OSFamily string `json:"osFamily"`
	// Labels are the node labels, the explicit field behind --node-labels.
	Labels map[string]string `json:"labels"`
	// KubeletConfiguration is the user's KubeletConfiguration, kept as an
	// unstructured map as a cluster spec type would keep it.
	KubeletConfiguration map[string]any `json:"kubeletConfiguration"`
}

// The OS families a node group may have.
const (
	Ubuntu       = "ubuntu"
	Bottlerocket = "bottlerocket"
)

// controlPlaneDir is the output directory of the control plane.
const controlPlaneDir = "control-plane"

// provider maps a datacenterRef kind to its provider.
func provider(kind string) (provision.Provider, bool) {
	switch kind {
	case "DockerDatacenterConfig":
		return provision.ProviderDocker, true
	case "VSphereDatacenterConfig":
		return provision.ProviderVSphere, true
	case "NutanixDatacenterConfig":
		return provision.ProviderNutanix, true
	case "TinkerbellDatacenterConfig":
		return provision.ProviderTinkerbell, true
	case "CloudStackDatacenterConfig":
		return provision.ProviderCloudStack, true
	case "SnowDatacenterConfig":
		return provision.ProviderSnow, true
	}
	return "", false
}

// DecodeSpec decodes a cluster spec strictly: YAML or JSON, duplicate keys,
// unknown fields and wrong types are errors, then the spec's own rules are
// checked. Every problem found is returned, one per line.
func DecodeSpec(data []byte) (*Cluster, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("cluster spec: %w", err)
	}
	var c Cluster
	strict, err := sigsjson.UnmarshalStrict(j, &c)
	if err != nil {
		return nil, fmt.Errorf("cluster spec: %w", err)
	}
	if len(strict) > 0 {
		errs := make([]error, len(strict))
		for i, e := range strict {
			errs[i] = fmt.Errorf("cluster spec: %w", e)
		}
		return nil, errors.Join(errs...)
	}
	if errs := c.validate(); len(errs) > 0 {
		list := make([]error, len(errs))
		for i, e := range errs {
			list[i] = e
		}
		return nil, errors.Join(list...)
	}
	return &c, nil
}

// groups returns the node groups in output order with their field paths
// and output directory names.
func (c *Cluster) groups() []group {
	var out []group
	if c.Spec.ControlPlaneConfiguration != nil {
		out = append(out, group{NodeGroup: c.Spec.ControlPlaneConfiguration, path: field.NewPath("spec", "controlPlaneConfiguration"), dir: controlPlaneDir, controlPlane: true})
	}
	for i := range c.Spec.WorkerNodeGroupConfigurations {
		w := &c.Spec.WorkerNodeGroupConfigurations[i]
		out = append(out, group{NodeGroup: w, path: field.NewPath("spec", "workerNodeGroupConfigurations").Index(i), dir: w.Name})
	}
	return out
}

// group is a node group with where it is in the spec and where it goes.
type group struct {
	*NodeGroup
	path         *field.Path
	dir          string
	controlPlane bool
}

func (c *Cluster) validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != "anywhere.eks.amazonaws.com/v1alpha1" {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, `must be "anywhere.eks.amazonaws.com/v1alpha1"`))
	}
	if c.Kind != "Cluster" {
		errs = append(errs, field.Invalid(field.NewPath("kind"), c.Kind, `must be "Cluster"`))
	}
	if _, ok := provider(c.Spec.DatacenterRef.Kind); !ok {
		kinds := []string{"CloudStackDatacenterConfig", "DockerDatacenterConfig", "NutanixDatacenterConfig", "SnowDatacenterConfig", "TinkerbellDatacenterConfig", "VSphereDatacenterConfig"}
		errs = append(errs, field.NotSupported(field.NewPath("spec", "datacenterRef", "kind"), c.Spec.DatacenterRef.Kind, kinds))
	}
	if rc := c.resolvConf(); rc != nil && rc.Path == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "clusterNetwork", "dns", "resolvConf", "path"), ""))
	}
	if c.Spec.ControlPlaneConfiguration == nil {
		errs = append(errs, field.Required(field.NewPath("spec", "controlPlaneConfiguration"), ""))
	} else if c.Spec.ControlPlaneConfiguration.Name != "" {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "controlPlaneConfiguration", "name"), "the control plane has no name"))
	}
	seen := map[string]bool{}
	for _, g := range c.groups() {
		if !g.controlPlane {
			p := g.path.Child("name")
			switch {
			case g.Name == "":
				errs = append(errs, field.Required(p, ""))
			case g.Name == controlPlaneDir:
				errs = append(errs, field.Invalid(p, g.Name, "is reserved for the control plane's output"))
			case seen[g.Name]:
				errs = append(errs, field.Duplicate(p, g.Name))
			default:
				for _, msg := range validation.IsDNS1123Label(g.Name) {
					errs = append(errs, field.Invalid(p, g.Name, msg))
				}
			}
			seen[g.Name] = true
		}
		if g.OSFamily != Ubuntu && g.OSFamily != Bottlerocket {
			errs = append(errs, field.NotSupported(g.path.Child("osFamily"), g.OSFamily, []string{Bottlerocket, Ubuntu}))
		}
		errs = append(errs, provision.NodeLabels(g.Labels).Validate(g.path.Child("labels"))...)
	}
	return errs
}

// resolvConf returns clusterNetwork.dns.resolvConf, or nil.
func (c *Cluster) resolvConf() *ResolvConf {
	if n := c.Spec.ClusterNetwork; n != nil && n.DNS != nil {
		return n.DNS.ResolvConf
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
