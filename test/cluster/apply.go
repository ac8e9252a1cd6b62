package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// applyFieldManager owns the fields ApplyManifests sets.
const applyFieldManager = "dynconfig-test"

// Manifest is one object of a manifest file.
type Manifest struct {
	// File is the path it was read from; Index its position there (0 for
	// the first document).
	File  string
	Index int
	// Object is the decoded object.
	Object *unstructured.Unstructured
}

// ReadManifests reads YAML (or JSON) files of one or more documents each,
// as kubectl apply -f reads them, skipping empty documents. Every object
// needs apiVersion, kind and metadata.name; an error names the file and
// the document.
func ReadManifests(paths ...string) ([]Manifest, error) {
	var out []Manifest
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("cluster: reading manifest: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for doc := 0; ; doc++ {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("cluster: manifest %s, document %d: %w", path, doc, err)
			}
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			switch {
			case u.GetAPIVersion() == "" || u.GetKind() == "":
				return nil, fmt.Errorf("cluster: manifest %s, document %d: apiVersion and kind are required", path, doc)
			case u.GetName() == "":
				return nil, fmt.Errorf("cluster: manifest %s, document %d (%s): metadata.name is required", path, doc, u.GetKind())
			}
			out = append(out, Manifest{File: path, Index: doc, Object: u})
		}
	}
	return out, nil
}

// ApplyManifests reads the files (ReadManifests) and server-side applies
// every object, in file order, as the admin. The objects are applied as
// they are written: a namespaced object without a namespace goes to
// "default", as with kubectl. RBAC objects and admission policies take
// effect shortly after they are stored; a test that depends on them must
// wait until they do.
func (c *Cluster) ApplyManifests(ctx context.Context, paths ...string) ([]Manifest, error) {
	manifests, err := ReadManifests(paths...)
	if err != nil {
		return nil, err
	}
	if err := c.applyObjects(ctx, manifests); err != nil {
		return nil, err
	}
	return manifests, nil
}

// ApplyKustomization builds the kustomization in dir as `kubectl apply -k`
// does (kustomize's default options) and server-side applies every object
// it yields, in kustomize's order, as the admin; ApplyManifests' notes
// apply. A Manifest's File is dir and its Index the object's position in
// the build.
func (c *Cluster) ApplyKustomization(ctx context.Context, dir string) ([]Manifest, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("cluster: kustomize build %s: %w", dir, err)
	}
	var manifests []Manifest
	for i, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("cluster: kustomize build %s, object %d (%s): %w", dir, i, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("cluster: kustomize build %s, object %d (%s): %w", dir, i, r.CurId(), err)
		}
		manifests = append(manifests, Manifest{File: dir, Index: i, Object: u})
	}
	if len(manifests) == 0 {
		return nil, fmt.Errorf("cluster: kustomize build %s: no objects", dir)
	}
	if err := c.applyObjects(ctx, manifests); err != nil {
		return nil, err
	}
	return manifests, nil
}

// applyObjects server-side applies each manifest's object, in order.
func (c *Cluster) applyObjects(ctx context.Context, manifests []Manifest) error {
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("cluster: discovery client: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(disc)
	if err != nil {
		return fmt.Errorf("cluster: discovering API resources: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("cluster: dynamic client: %w", err)
	}
	for _, m := range manifests {
		u := m.Object
		gvk := u.GroupVersionKind()
		what := fmt.Sprintf("manifest %s, document %d (%s %s)", m.File, m.Index, gvk.Kind, u.GetName())
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("cluster: %s: %w", what, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := u.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: applyFieldManager, Force: true}); err != nil {
			return fmt.Errorf("cluster: applying %s: %w", what, err)
		}
	}
	return nil
}
