package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dynconfig/dynconfig/status"
)

// ShutdownTimeout bounds the graceful stop of a Server.
const ShutdownTimeout = 5 * time.Second

// Configz holds what /configz serves: the config in use and the last
// ConfigOK report. It is a Reporter, so it sees every report; its methods
// may be called from any goroutine.
type Configz[T any] struct {
	key    string
	mu     sync.Mutex
	cfg    *T
	report *Condition
}

// NewConfigz returns a Configz whose body names the config key, as the
// component's own /configz does ("kubeletconfig" for the kubelet).
func NewConfigz[T any](key string) *Configz[T] {
	return &Configz[T]{key: key}
}

// ReportConfigOK implements dynconfig.Reporter.
func (z *Configz[T]) ReportConfigOK(_ context.Context, r status.Report) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.report = &Condition{Status: r.Status, Reason: r.Reason, Message: r.Message}
	return nil
}

// SetConfig records (or swaps) the config in use.
func (z *Configz[T]) SetConfig(cfg *T) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.cfg = cfg
}

// Snapshot returns the config in use (nil before SetConfig) and the last
// report (nil before the first).
func (z *Configz[T]) Snapshot() (*T, *Condition) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.cfg, z.report
}

// body is the JSON of /configz, {"KEY": cfg, "configOK": report} in that
// order, the order a struct with those two fields encodes in; ok is false
// while there is no config.
func (z *Configz[T]) body() (data []byte, ok bool, err error) {
	cfg, report := z.Snapshot()
	if cfg == nil {
		return nil, false, nil
	}
	key, err := json.Marshal(z.key)
	if err != nil {
		return nil, true, err
	}
	c, err := json.Marshal(cfg)
	if err != nil {
		return nil, true, err
	}
	r, err := json.Marshal(report)
	if err != nil {
		return nil, true, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	b.Write(key)
	b.WriteByte(':')
	b.Write(c)
	b.WriteString(`,"configOK":`)
	b.Write(r)
	b.WriteByte('}')
	return b.Bytes(), true, nil
}

// NewHandler serves GET /healthz ("ok"), GET /configz (the JSON of z, 503
// until z has a config) and GET /metrics (the Prometheus exposition of
// gatherer).
func NewHandler[T any](z *Configz[T], gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /configz", func(w http.ResponseWriter, _ *http.Request) {
		data, ok, err := z.body()
		if !ok {
			http.Error(w, "no config in use yet", http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, "encode config: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// Server is an HTTP server started by Listen.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	served chan error
}

// Listen listens on address:port and serves h in the background until
// Shutdown. Its error names --address/--port.
func Listen(address string, port int, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("--address/--port: %w", err)
	}
	s := &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1)}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on (with port 0, the port the
// kernel chose).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops the server gracefully, waiting at most ShutdownTimeout
// for the requests in flight; ctx passes its values, not its cancellation,
// so a component stopped by a signal still shuts down gracefully. It
// returns the shutdown's error joined with the server's, if it failed.
func (s *Server) Shutdown(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// NodeName returns flag, the value of --node-name, or when it is empty the
// host name, lowercased.
func NodeName(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("--node-name not set and the host name is unknown: %w", err)
	}
	return strings.ToLower(host), nil
}

// NewClient returns a clientset for the kubeconfig file at path; an empty
// path means the in-cluster config. Its errors do not name the flag: the
// components wrap them.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	return client, nil
}
