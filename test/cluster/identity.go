package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// NodeGroup is the group every node identity is in; the Node authorizer
// and the NodeRestriction admission plugin act on its members.
const NodeGroup = "system:nodes"

// NodeUserPrefix prefixes a node's user name: system:node:<node name>.
const NodeUserPrefix = "system:node:"

// serviceAccountTokenSeconds is how long a token from ServiceAccountConfig
// is valid: longer than any test, and above the API server's minimum of
// 10 minutes.
const serviceAccountTokenSeconds = 2 * 60 * 60

// UserConfig returns a client config that authenticates as user name in
// groups, by a client certificate (CN=name, O=each group) signed by the
// client CA the API server trusts. The user has only what the authorizers
// give it: RBAC objects the test creates, and with NodeAuthorization what
// the Node authorizer gives a node identity. The certificate stays valid
// across RestartAPIServer.
func (c *Cluster) UserConfig(name string, groups ...string) (*rest.Config, error) {
	if name == "" {
		return nil, errors.New("cluster: UserConfig: empty user name")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, errors.New("cluster: UserConfig after Stop")
	}
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("cluster: client certificate for user %q: %w", name, err)
	}
	return rest.CopyConfig(u.Config()), nil
}

// NodeConfig returns a client config for the kubelet identity of node: a
// client certificate for user system:node:<node> in group system:nodes, as
// a kubelet gets by TLS bootstrap.
func (c *Cluster) NodeConfig(node string) (*rest.Config, error) {
	if node == "" {
		return nil, errors.New("cluster: NodeConfig: empty node name")
	}
	return c.UserConfig(NodeUserPrefix+node, NodeGroup)
}

// ServiceAccountConfig returns a client config that authenticates with a
// token of the ServiceAccount namespace/name from the TokenRequest API,
// valid for two hours and bound to no object. The ServiceAccount must
// exist.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	return c.serviceAccountToken(ctx, namespace, name, nil)
}

// PodTokenConfig returns a client config with the token a Pod's projected
// service account volume holds: one of the Pod's ServiceAccount, bound to
// the Pod (so its user info carries the Pod's name and, once the Pod is on
// a Node, authentication.kubernetes.io/node-name), valid for two hours.
// pod must exist; its ServiceAccount too ("default" when unset).
func (c *Cluster) PodTokenConfig(ctx context.Context, pod *corev1.Pod) (*rest.Config, error) {
	if pod.UID == "" {
		return nil, fmt.Errorf("cluster: PodTokenConfig: Pod %s/%s has no UID: pass the object the API server returned", pod.Namespace, pod.Name)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return c.serviceAccountToken(ctx, pod.Namespace, sa, &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
	})
}

func (c *Cluster) serviceAccountToken(ctx context.Context, namespace, name string, bound *authenticationv1.BoundObjectReference) (*rest.Config, error) {
	seconds := int64(serviceAccountTokenSeconds)
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds, BoundObjectRef: bound},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster: token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := &rest.Config{
		Host:            c.Config.Host,
		APIPath:         c.Config.APIPath,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData, ServerName: c.Config.ServerName},
		BearerToken:     tr.Status.Token,
	}
	return cfg, nil
}

// KubeConfigFor returns cfg as a kubeconfig file's content, for a process a
// test starts under that identity. cfg must carry its credentials inline: a
// client certificate and key, or a bearer token.
func KubeConfigFor(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CertData) == 0 && cfg.BearerToken == "" {
		return nil, errors.New("cluster: KubeConfigFor: the config has neither client certificate data nor a bearer token")
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host // as client-go reads a bare host:port
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("cluster: KubeConfigFor: host %q: %w", cfg.Host, err)
	}
	u.Path = cfg.APIPath
	const name = "dynconfig-test"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: u.String(), CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("cluster: KubeConfigFor: %w", err)
	}
	return data, nil
}
