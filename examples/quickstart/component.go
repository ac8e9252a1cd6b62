package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// componentEnv, when set (to the work dir), makes this program run as the
// demo component instead of the walk-through.
const componentEnv = "DYNCONFIG_QUICKSTART_COMPONENT"

// crashProviderID, as the config's providerID, makes the demo component
// exit 1 right after Bootstrap: a config that passes validation and still
// cannot run. (The kubelet profile rejects feature gates the kubelet does not
// know, so a made-up gate cannot carry the signal.)
const crashProviderID = "quickstart://crash-at-startup"

// componentVersion names the state dir's tracking dir.
const componentVersion = "quickstart-v1"

// pollInterval is how often the directory source looks for changes.
const pollInterval = 100 * time.Millisecond

// errCrashAtStartup is the demo component's deliberate startup failure.
var errCrashAtStartup = errors.New("config sets providerID " + crashProviderID + ": crashing at startup")

// layout names the files of a work dir.
type layout struct{ dir string }

// stateDir is the component's state dir (the kubelet's --dynamic-config-dir).
func (l layout) stateDir() string { return filepath.Join(l.dir, "state") }

// sourceDir is the directory source: assignment.yaml and configmaps/.
func (l layout) sourceDir() string { return filepath.Join(l.dir, "source") }

// statusFile is where the component writes its componentStatus.
func (l layout) statusFile() string { return filepath.Join(l.dir, "component.json") }

// logFile receives the stdout and stderr of every component process.
func (l layout) logFile() string { return filepath.Join(l.dir, "component.log") }

// componentStatus is what a component process tells the walk-through: its
// pid, the ConfigOK condition it last reported, and, once Bootstrap
// returned and the component did not crash, what it runs.
type componentStatus struct {
	PID       int            `json:"pid"`
	Condition *condition     `json:"condition,omitempty"`
	Running   *runningConfig `json:"running,omitempty"`
}

// condition is a status.Report with JSON names.
type condition struct {
	Status  corev1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
}

// runningConfig summarizes the config a component process runs: each
// config of the demo has its own maxPods, so this says which one it is.
type runningConfig struct {
	MaxPods int32 `json:"maxPods"`
}

// decodeStatus parses a status file; empty data is no status yet.
func decodeStatus(data []byte) (componentStatus, error) {
	var st componentStatus
	if len(data) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return componentStatus{}, fmt.Errorf("decode component status: %w", err)
	}
	return st, nil
}

// readOptional reads path; a missing file is empty.
func readOptional(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// statusWriter is the component's Reporter: it writes the componentStatus
// file atomically, so the walk-through never reads half of it.
type statusWriter struct {
	path string
	mu   sync.Mutex
	st   componentStatus
}

// ReportConfigOK records r as the component's condition.
func (w *statusWriter) ReportConfigOK(_ context.Context, r status.Report) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.Condition = &condition{Status: r.Status, Reason: r.Reason, Message: r.Message}
	return w.write()
}

// setRunning records the config the component runs.
func (w *statusWriter) setRunning(cfg *kubeletv1beta1.KubeletConfiguration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.Running = &runningConfig{MaxPods: cfg.MaxPods}
	return w.write()
}

func (w *statusWriter) write() error {
	data, err := json.Marshal(w.st)
	if err != nil {
		return fmt.Errorf("encode component status: %w", err)
	}
	if err := atomicfile.WriteFile(w.path, data, 0o644); err != nil {
		return fmt.Errorf("write component status %s: %w", w.path, err)
	}
	return nil
}

// componentMain runs the demo component over the work dir dir and returns
// the process exit code: 0 when stopped (or, from inside the Controller,
// to restart onto a new config), 1 on any error, including the deliberate
// crash at startup.
func componentMain(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// stdin is a pipe from the supervisor: EOF means the supervisor is
	// gone, and the component must not outlive it.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	logger := klog.Background().WithName("component")
	ctx = klog.NewContext(ctx, logger)
	defer klog.Flush()
	if err := runComponent(ctx, layout{dir: dir}); err != nil {
		logger.Error(err, "Component exits")
		return 1
	}
	logger.Info("Component stopped")
	return 0
}

// runComponent is the component: the Controller with the kubelet profile,
// the local config (kubelet defaults, no init file) and the directory
// source. Restart is left to its default, os.Exit(0), for the supervisor to
// restart the process on the new config.
func runComponent(ctx context.Context, l layout) error {
	pipeline, err := merge.New[kubeletv1beta1.KubeletConfiguration](kubelet.Profile{}, merge.Options{})
	if err != nil {
		return err
	}
	layers, err := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{})
	if err != nil {
		return err
	}
	src, err := source.NewDir(source.DirOptions{Path: l.sourceDir(), PayloadKey: kubelet.PayloadKey, PollInterval: pollInterval})
	if err != nil {
		return err
	}
	reporter := &statusWriter{path: l.statusFile(), st: componentStatus{PID: os.Getpid()}}
	c, err := dynconfig.New(dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Profile:          kubelet.Profile{},
		Layers:           layers,
		StateDir:         l.stateDir(),
		ComponentVersion: componentVersion,
		Remote:           src,
		Reporter:         reporter,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx)
	if err != nil {
		return err
	}
	if cfg.ProviderID == crashProviderID {
		return errCrashAtStartup
	}
	if err := reporter.setRunning(cfg); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Component running", "maxPods", cfg.MaxPods)
	return c.Run(ctx)
}
