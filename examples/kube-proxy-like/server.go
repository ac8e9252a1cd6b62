package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/status"
)

// configzResponse is the body of /configz; the config's key is kube-proxy's
// own /configz key.
type configzResponse struct {
	KubeProxyConfig *kubeproxyv1alpha1.KubeProxyConfiguration `json:"kubeproxy.config.k8s.io"`
	ConfigOK        *conditionJSON                            `json:"configOK"`
}

// configz holds what /configz serves: the config in use, swapped by every
// reload, and the last ConfigOK report. It is a Reporter, so it sees every
// report.
type configz struct {
	mu     sync.Mutex
	cfg    *kubeproxyv1alpha1.KubeProxyConfiguration
	report *conditionJSON
}

// ReportConfigOK implements dynconfig.Reporter.
func (z *configz) ReportConfigOK(_ context.Context, r status.Report) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.report = &conditionJSON{Status: r.Status, Reason: r.Reason, Message: r.Message}
	return nil
}

// setConfig swaps the config in use.
func (z *configz) setConfig(cfg *kubeproxyv1alpha1.KubeProxyConfiguration) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.cfg = cfg
}

func (z *configz) snapshot() configzResponse {
	z.mu.Lock()
	defer z.mu.Unlock()
	return configzResponse{KubeProxyConfig: z.cfg, ConfigOK: z.report}
}

// newHandler serves /healthz ("ok"), /configz (JSON) and /metrics (the
// Prometheus exposition of gatherer).
func newHandler(z *configz, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /configz", func(w http.ResponseWriter, _ *http.Request) {
		resp := z.snapshot()
		if resp.KubeProxyConfig == nil {
			http.Error(w, "no config in use yet", http.StatusServiceUnavailable)
			return
		}
		data, err := json.Marshal(resp)
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
