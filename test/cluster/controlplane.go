package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// Names of the control-plane binaries Options.ControlPlane starts, in the
// bin directory. test/hack/ensure-bins.sh builds them from the same
// k8s.io/kubernetes module as bin/kubelet.
const (
	ControllerManagerBinary = "kube-controller-manager"
	SchedulerBinary         = "kube-scheduler"
)

// Users the two components authenticate as, by client certificate, as a
// kubeadm cluster's controller-manager.conf and scheduler.conf do. The
// bootstrap RBAC policy binds each to its ClusterRole.
const (
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
)

// envtest's file names in the API server's certificate directory: the
// ServiceAccount token signing key (the API server's
// --service-account-signing-key-file) and the client CA it trusts
// (--client-ca-file).
const (
	envtestSAKeyFile    = "sa-signer.key"
	envtestClientCAFile = "client-cert-auth-ca.crt"
)

// binding retries: a port from FreePort can be taken by another process
// before the component binds it; the start is then retried on a new port.
const bindAttempts = 3

// component is one running control-plane process beside the API server.
type component struct {
	name    string
	cmd     *exec.Cmd
	port    int
	started time.Time
	// exited is closed when the process has exited; waitErr is then its
	// exit error.
	exited  chan struct{}
	waitErr error
}

// startControlPlane starts kube-controller-manager and kube-scheduler
// against the running API server, with the flags kubeadm's static Pod
// manifests give them (cmd/kubeadm/app/phases/controlplane/manifests.go),
// and returns once both serve /healthz and hold their leader-election
// Lease. work is the test's scratch directory; certDir the API server's.
func (c *Cluster) startControlPlane(o Options, work, certDir string) error {
	begin := time.Now()
	paths, err := findExecutables(o.BinDir, ControllerManagerBinary, SchedulerBinary)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	kcmPath, schedPath := paths[0], paths[1]
	dir := filepath.Join(work, "controlplane")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// --root-ca-file: the CA of the API server's serving certificate, which
	// the controller manager publishes as every namespace's
	// kube-root-ca.crt and puts in ServiceAccount token Secrets.
	rootCA := filepath.Join(dir, "root-ca.crt")
	if err := os.WriteFile(rootCA, c.Config.CAData, 0o600); err != nil {
		return fmt.Errorf("cluster: writing the API server's CA: %w", err)
	}
	signCert, signKey, err := writeSigningCA(dir)
	if err != nil {
		return err
	}
	kcmKubeconfig, err := c.componentKubeconfig(dir, ControllerManagerBinary, ControllerManagerUser)
	if err != nil {
		return err
	}
	schedKubeconfig, err := c.componentKubeconfig(dir, SchedulerBinary, SchedulerUser)
	if err != nil {
		return err
	}

	kcmFlags := map[string][]string{
		"bind-address":              {"127.0.0.1"},
		"leader-elect":              {"true"},
		"kubeconfig":                {kcmKubeconfig},
		"authentication-kubeconfig": {kcmKubeconfig},
		"authorization-kubeconfig":  {kcmKubeconfig},
		// kubeadm: the cluster CA, which signs client certificates. Here
		// the CA envtest signs UserConfig's certificates with.
		"client-ca-file":                   {filepath.Join(certDir, envtestClientCAFile)},
		"root-ca-file":                     {rootCA},
		"service-account-private-key-file": {filepath.Join(certDir, envtestSAKeyFile)},
		"cluster-signing-cert-file":        {signCert},
		"cluster-signing-key-file":         {signKey},
		"use-service-account-credentials":  {"true"},
		"controllers":                      {"*,bootstrapsigner,tokencleaner"},
		// Not in kubeadm's list (its default /var/run/kubernetes): the
		// self-signed serving certificate goes to the test's directory.
		"cert-dir": {filepath.Join(dir, ControllerManagerBinary+"-certs")},
	}
	schedFlags := map[string][]string{
		"bind-address":              {"127.0.0.1"},
		"leader-elect":              {"true"},
		"kubeconfig":                {schedKubeconfig},
		"authentication-kubeconfig": {schedKubeconfig},
		"authorization-kubeconfig":  {schedKubeconfig},
		"cert-dir":                  {filepath.Join(dir, SchedulerBinary+"-certs")},
	}
	for name, values := range o.ControllerManagerFlags {
		kcmFlags[name] = values
	}
	for name, values := range o.SchedulerFlags {
		schedFlags[name] = values
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.StartTimeout)
	defer cancel()
	// Started one after the other, each ready before the next: on a busy
	// machine the two starting at once slow each other down as much.
	for _, s := range []struct {
		name, path string
		flags      map[string][]string
	}{
		{ControllerManagerBinary, kcmPath, kcmFlags},
		{SchedulerBinary, schedPath, schedFlags},
	} {
		p, err := c.startComponent(ctx, s.name, s.path, s.flags)
		if err != nil {
			return err
		}
		if err := c.waitLease(ctx, p, s.name); err != nil {
			return err
		}
		klog.InfoS("cluster: control-plane component ready", "component", s.name, "port", p.port, "after", time.Since(p.started).Round(time.Millisecond))
	}
	c.tb.Logf("cluster: kube-controller-manager and kube-scheduler ready %v after the API server", time.Since(begin).Round(time.Millisecond))
	return nil
}

// writeSigningCA writes a new self-signed CA's certificate and key for
// the controller manager's CSR signer (--cluster-signing-cert-file and
// --cluster-signing-key-file). envtest keeps its client CA's key in memory,
// so this is a CA of its own: certificates the signer issues are not
// trusted by the API server for client authentication.
func writeSigningCA(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("cluster: signing CA key: %w", err)
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "dynconfig-test-cluster-signing-ca"}, key)
	if err != nil {
		return "", "", fmt.Errorf("cluster: signing CA certificate: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", "", fmt.Errorf("cluster: signing CA key: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "signing-ca.crt"), filepath.Join(dir, "signing-ca.key")
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return "", "", fmt.Errorf("cluster: signing CA certificate: %w", err)
	}
	if err := certutil.WriteCert(certFile, certPEM); err != nil {
		return "", "", fmt.Errorf("cluster: writing %s: %w", certFile, err)
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return "", "", fmt.Errorf("cluster: writing %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

// componentKubeconfig writes a kubeconfig for user (a client certificate
// from UserConfig, no groups) to dir/<name>.kubeconfig.
func (c *Cluster) componentKubeconfig(dir, name, user string) (string, error) {
	cfg, err := c.UserConfig(user)
	if err != nil {
		return "", err
	}
	data, err := KubeConfigFor(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("cluster: writing %s: %w", path, err)
	}
	return path, nil
}

// startComponent starts the binary at path with flags and a free secure
// port, logging to <name>.log, and waits until its /healthz answers ok. A
// start that loses its port to another process is retried on a new one.
func (c *Cluster) startComponent(ctx context.Context, name, path string, flags map[string][]string) (*component, error) {
	var lastErr error
	for range bindAttempts {
		p, err := c.spawn(name, path, flags)
		if err != nil {
			return nil, err
		}
		err = waitHealthz(ctx, p)
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !p.hasExited() || !c.logContains(name, "address already in use") {
			break
		}
	}
	return nil, lastErr
}

// spawn starts one process of the component; the cluster stops it.
func (c *Cluster) spawn(name, path string, flags map[string][]string) (*component, error) {
	log, err := c.openLog(name + ".log")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	f := make(map[string][]string, len(flags)+1)
	for k, v := range flags {
		f[k] = v
	}
	port := 0
	if v, ok := f["secure-port"]; ok && len(v) == 1 {
		port, err = strconv.Atoi(v[0])
		if err != nil {
			return nil, fmt.Errorf("cluster: %s: --secure-port=%s: %w", name, v[0], err)
		}
	} else {
		port = FreePort(c.tb)
		f["secure-port"] = []string{strconv.Itoa(port)}
	}
	cmd := exec.Command(path, flagArgs(f)...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a signal to the test's group does not
	// reach it before the cluster stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: starting %s: %w", path, err)
	}
	p := &component{name: name, cmd: cmd, port: port, started: time.Now(), exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	c.mu.Lock()
	c.components = append(c.components, p)
	c.mu.Unlock()
	return p, nil
}

// flagArgs writes flags as --name=value arguments, sorted by name so the
// command line in a log is the same on every run.
func flagArgs(flags map[string][]string) []string {
	names := make([]string, 0, len(flags))
	for n := range flags {
		names = append(names, n)
	}
	slices.Sort(names)
	var args []string
	for _, n := range names {
		for _, v := range flags[n] {
			args = append(args, "--"+n+"="+v)
		}
	}
	return args
}

func (p *component) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// waitHealthz polls https://127.0.0.1:<port>/healthz until it answers ok.
// The serving certificate is self-signed by the component (as a kubeadm
// cluster's liveness probe, the check does not verify it); /healthz is
// one of the paths the components allow without authorization.
func waitHealthz(ctx context.Context, p *component) error {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a readiness probe of a self-signed local server
	}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", p.port)
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p.hasExited() {
			return false, fmt.Errorf("exited: %v", p.waitErr)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: %s not healthy at %s (last answer: %s): %w", p.name, url, last, err)
	}
	return nil
}

// waitLease waits until the component holds its leader-election Lease
// (kube-system/<name>): with --leader-elect it starts its controllers only
// then.
func (c *Cluster) waitLease(ctx context.Context, p *component, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p.hasExited() {
			return false, fmt.Errorf("exited: %v", p.waitErr)
		}
		l, err := c.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			last = "no holder"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: %s holds no Lease kube-system/%s (last: %s): %w", name, name, last, err)
	}
	return nil
}

// logContains reports whether the component's log has s.
func (c *Cluster) logContains(name, s string) bool {
	data, err := os.ReadFile(filepath.Join(c.logDir, name+".log"))
	return err == nil && strings.Contains(string(data), s)
}

// stopComponents stops the control-plane processes, newest first: SIGTERM,
// then SIGKILL after timeout. Each one's CPU time goes to the test log.
// The caller holds c.mu.
func (c *Cluster) stopComponents(timeout time.Duration) []error {
	var errs []error
	for i := len(c.components) - 1; i >= 0; i-- {
		p := c.components[i]
		if p.hasExited() {
			errs = append(errs, fmt.Errorf("cluster: %s exited before the cluster stopped it: %v (see %s.log)", p.name, p.waitErr, p.name))
		} else {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(timeout):
				_ = p.cmd.Process.Kill()
				<-p.exited
				errs = append(errs, fmt.Errorf("cluster: %s did not stop within %v of SIGTERM: killed", p.name, timeout))
			}
		}
		if st := p.cmd.ProcessState; st != nil {
			c.tb.Logf("cluster: %s (pid %d) used %.1f CPU-s in %v", p.name, p.cmd.Process.Pid,
				(st.UserTime() + st.SystemTime()).Seconds(), time.Since(p.started).Round(time.Second))
		}
	}
	c.components = nil
	return errs
}
