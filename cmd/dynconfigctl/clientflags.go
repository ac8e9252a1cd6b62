package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiClient is what a command that talks to the API server gets from the
// kubectl client flags: the clientset and the namespace those flags select
// (--namespace, else the kubeconfig context's, else "default").
type apiClient struct {
	client    kubernetes.Interface
	namespace string
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
	loader := f.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return apiClient{}, fmt.Errorf("load kubeconfig: %w", err)
	}
	// With no kubeconfig anywhere, no --server and not in a Pod, the
	// loader falls back to http://localhost:8080 (kubectl's deprecated
	// default): say what is missing instead of talking to whatever
	// listens there.
	if raw, err := loader.RawConfig(); err == nil && len(raw.Clusters) == 0 && (f.APIServer == nil || *f.APIServer == "") &&
		os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return apiClient{}, errors.New("load kubeconfig: no kubeconfig found and no --server: give --kubeconfig, set $KUBECONFIG, or write ~/.kube/config")
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return apiClient{}, fmt.Errorf("load kubeconfig: namespace: %w", err)
	}
	cfg = rest.AddUserAgent(cfg, "dynconfigctl")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return apiClient{}, fmt.Errorf("create API client: %w", err)
	}
	return apiClient{client: client, namespace: ns}, nil
}
