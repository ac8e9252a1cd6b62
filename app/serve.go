package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/internal/statusfile"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// ShutdownTimeout bounds the graceful stop of the HTTP server.
const ShutdownTimeout = 5 * time.Second

// ConfigOKKey is the /configz key of the last condition report.
const ConfigOKKey = "configOK"

// Condition is a condition report in the JSON of the status file and of
// /configz: {"status", "reason", "message"} and, in the status file only,
// "pid".
type Condition = statusfile.Condition

// jsonObject is a value served by component-base's configz, which takes a
// runtime.Object with an apiVersion and kind: it encodes as the JSON of
// value, and its kind is only for configz's checks.
type jsonObject struct {
	gvk   schema.GroupVersionKind
	value any
}

func (o *jsonObject) GetObjectKind() schema.ObjectKind { return o }
func (o *jsonObject) DeepCopyObject() runtime.Object {
	c := *o
	return &c
}
func (o *jsonObject) SetGroupVersionKind(gvk schema.GroupVersionKind) { o.gvk = gvk }
func (o *jsonObject) GroupVersionKind() schema.GroupVersionKind       { return o.gvk }

// MarshalJSON encodes the value.
func (o *jsonObject) MarshalJSON() ([]byte, error) { return json.Marshal(o.value) }

// conditionGVK is the kind of the configOK entry of /configz.
var conditionGVK = schema.GroupVersionKind{Group: "dynconfig.io", Version: "v1alpha1", Kind: "ConfigOKReport"}

// configzEntries are the two entries of /configz, registered with
// component-base's configz (a registry of the process) by
// registerConfigz and removed by their unregister.
type configzEntries[T any] struct {
	gvk      schema.GroupVersionKind
	config   *configz.Config
	configOK *configz.Config
	mu       sync.Mutex // orders Sets
	unreg    func()
}

// registerConfigz registers key and ConfigOKKey with configz. The report
// entry is null until the first report.
func registerConfigz[T any](key string, gvk schema.GroupVersionKind) (*configzEntries[T], error) {
	cfg, err := configz.New(key)
	if err != nil {
		return nil, fmt.Errorf("/configz: %w", err)
	}
	ok, err := configz.New(ConfigOKKey)
	if err != nil {
		configz.Delete(key)
		return nil, fmt.Errorf("/configz: %w", err)
	}
	z := &configzEntries[T]{gvk: gvk, config: cfg, configOK: ok, unreg: func() { configz.Delete(key); configz.Delete(ConfigOKKey) }}
	if err := ok.Set(&jsonObject{gvk: conditionGVK, value: (*Condition)(nil)}); err != nil {
		z.unreg()
		return nil, fmt.Errorf("/configz: %w", err)
	}
	return z, nil
}

// SetConfig serves cfg as the config in use.
func (z *configzEntries[T]) SetConfig(cfg *T) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.config.Set(&jsonObject{gvk: z.gvk, value: cfg})
}

// ReportConfigOK implements dynconfig.Reporter: /configz serves the
// report.
func (z *configzEntries[T]) ReportConfigOK(_ context.Context, r status.Report) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.configOK.Set(&jsonObject{gvk: conditionGVK, value: &Condition{Status: r.Status, Reason: r.Reason, Message: r.Message}})
}

// ReporterChain sends every report to each of its Reporters, in order, and
// joins their errors: one failing Reporter does not silence the others.
type ReporterChain []dynconfig.Reporter

// ReportConfigOK implements dynconfig.Reporter.
func (rc ReporterChain) ReportConfigOK(ctx context.Context, r status.Report) error {
	var errs []error
	for _, rep := range rc {
		if err := rep.ReportConfigOK(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LogReporter logs every report through the context's logger, with the
// condition type as the message ("ConfigOK").
type LogReporter struct {
	// ConditionType is the message. Default: nodeapi.ConditionType.
	ConditionType corev1.NodeConditionType
}

// ReportConfigOK implements dynconfig.Reporter.
func (l LogReporter) ReportConfigOK(ctx context.Context, r status.Report) error {
	kv := []any{"status", r.Status, "reason", r.Reason, "message", r.Message}
	if r.Config != nil {
		kv = append(kv, "phase", r.Config.Phase)
	}
	msg := l.ConditionType
	if msg == "" {
		msg = nodeapi.ConditionType
	}
	klog.FromContext(ctx).Info(string(msg), kv...)
	return nil
}

// StatusFile replaces the file at Path with every report, atomically, so a
// reader sees one whole report: the last one written, as a Condition with
// PID, and a newline.
type StatusFile struct {
	// Path is the file; its directory must exist.
	Path string
	// PID is written into every report.
	PID int
}

// ReportConfigOK implements dynconfig.Reporter. Its write errors name
// --status-file, the flag that sets Path.
func (s *StatusFile) ReportConfigOK(_ context.Context, r status.Report) error {
	data, err := json.Marshal(Condition{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: s.PID})
	if err != nil {
		return fmt.Errorf("encode the condition report: %w", err)
	}
	if err := atomicfile.WriteFile(s.Path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("--status-file: %w", err)
	}
	return nil
}

// newStatusFile returns the StatusFile of --status-file, or nil when it is
// empty.
func newStatusFile(path string) dynconfig.Reporter {
	if path == "" {
		return nil
	}
	return &StatusFile{Path: path, PID: os.Getpid()}
}

// NewRegistry returns the Prometheus registry a component serves on
// /metrics: the Go runtime and process collectors; the Controller adds
// dynconfig's metrics with the label component=<name>.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewHandler serves GET /healthz ("ok" while healthy returns nil, else 500
// with its error), /configz (component-base configz: every registered
// entry of the process) and GET /metrics (the Prometheus exposition of
// gatherer).
func NewHandler(healthy func() error, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := healthy(); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, "unhealthy: %v", err)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	configzMux := http.NewServeMux()
	configz.InstallHandler(configzMux)
	mux.Handle("GET "+configz.DefaultConfigzPath, configzMux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// server is an HTTP server started by listen.
type server struct {
	ln     net.Listener
	srv    *http.Server
	served chan error
}

// listen listens on address:port and serves h in the background until
// shutdown, over TLS when tlsConfig is set. Its error names --address/--port.
func listen(address string, port int, h http.Handler, tlsConfig *tls.Config) (*server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("--address/--port: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	s := &server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1)}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// shutdown stops the server gracefully, waiting at most ShutdownTimeout for
// the requests in flight, also when ctx is already done.
func (s *server) shutdown(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
