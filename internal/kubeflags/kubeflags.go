// Package kubeflags turns kubectl's client flags (k8s.io/cli-runtime's
// genericclioptions.ConfigFlags) into a REST config the way kubectl loads
// one, without kubectl's deprecated fallback to http://localhost:8080.
package kubeflags

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// ErrNoKubeconfig is returned when no kubeconfig was found, no --server
// was given and the process does not run in a Pod.
var ErrNoKubeconfig = errors.New("no kubeconfig found and no --server: give --kubeconfig, set $KUBECONFIG, or write ~/.kube/config")

// RESTConfig loads the client config that f names: --kubeconfig if given,
// else $KUBECONFIG, ~/.kube/config, or the in-cluster config; with the
// other flags (--context, --server, --as, ...) on top. It returns the
// config, with userAgent set, and the namespace (--namespace, else the
// context's). Where kubectl would fall back to http://localhost:8080 it
// returns ErrNoKubeconfig instead of talking to whatever listens there.
// Errors start with "load kubeconfig".
func RESTConfig(f *genericclioptions.ConfigFlags, userAgent string) (*rest.Config, string, error) {
	loader := f.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	if raw, err := loader.RawConfig(); err == nil && len(raw.Clusters) == 0 && (f.APIServer == nil || *f.APIServer == "") &&
		os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, "", fmt.Errorf("load kubeconfig: %w", ErrNoKubeconfig)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: namespace: %w", err)
	}
	return rest.AddUserAgent(cfg, userAgent), ns, nil
}
