package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dynconfig/dynconfig/internal/kubeflags"
)

// apiClient is what a command that talks to the API server gets from the
// kubectl client flags: the clientset and the namespace those flags select
// (--namespace, else the kubeconfig context's, else "default").
type apiClient struct {
	client    kubernetes.Interface
	namespace string
	// dynamic reads ConfigRollouts; nil in tests that have none.
	dynamic dynamic.Interface
}

// addClientFlags adds the kubectl client flags (--kubeconfig, --context,
// --cluster, --user, --namespace, --server, --token, --as, ...) of
// k8s.io/cli-runtime to cmd, with kubectl's names and meanings. The
// discovery cache (--cache-dir) is left out: no command here uses
// discovery.
func addClientFlags(cmd *cobra.Command) *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(false)
	f.CacheDir = nil
	f.AddFlags(cmd.Flags())
	return f
}

// newClientFromFlags builds a clientset from the kubectl client flags, with
// the loading rules kubectl has: --kubeconfig if given, else $KUBECONFIG,
// ~/.kube/config, or the in-cluster config.
func newClientFromFlags(f *genericclioptions.ConfigFlags) (apiClient, error) {
	cfg, ns, err := kubeflags.RESTConfig(f, "dynconfigctl")
	if err != nil {
		return apiClient{}, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return apiClient{}, fmt.Errorf("create API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return apiClient{}, fmt.Errorf("create API client: %w", err)
	}
	return apiClient{client: client, namespace: ns, dynamic: dyn}, nil
}
