package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/status"
)

// configzResponse is the body of /configz.
type configzResponse struct {
	KubeletConfig *kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	ConfigOK      *conditionJSON                       `json:"configOK"`
}

// configz holds what /configz serves: the config in use and the last
// ConfigOK report. It is a Reporter, so it sees every report.
type configz struct {
	mu     sync.Mutex
	cfg    *kubeletv1beta1.KubeletConfiguration
	report *conditionJSON
}

// ReportConfigOK implements dynconfig.Reporter.
func (z *configz) ReportConfigOK(_ context.Context, r status.Report) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.report = &conditionJSON{Status: r.Status, Reason: r.Reason, Message: r.Message}
	return nil
}

// setConfig records the config in use.
func (z *configz) setConfig(cfg *kubeletv1beta1.KubeletConfiguration) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.cfg = cfg
}

func (z *configz) snapshot() configzResponse {
	z.mu.Lock()
	defer z.mu.Unlock()
	return configzResponse{KubeletConfig: z.cfg, ConfigOK: z.report}
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
		if resp.KubeletConfig == nil {
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
