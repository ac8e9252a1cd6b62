package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The parts of BenchmarkRolloutController that measure the machine rather
// than the controller: the CPU and memory of the processes involved, the
// PATCH rate the API server sustains, the controller of an earlier commit
// to compare with, and a sample of real node-side Controllers.

// procStat returns a process's CPU time (user and system) and its
// resident memory, from /proc.
func procStat(pid int) (cpu time.Duration, rssBytes int64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14, stime 15 (clock ticks, 100 a second), rss 24
	// (pages).
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 22 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	pages, err3 := strconv.ParseInt(fields[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, pages * int64(os.Getpagesize()), nil
}

// childPID finds the process named comm that this process started (envtest
// starts kube-apiserver and etcd as children of the test binary); 0 if
// there is none.
func childPID(comm string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		open, closing := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(string(raw[closing+1:]))
		if len(fields) < 2 || string(raw[open+1:closing]) != comm {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			return pid
		}
	}
	return 0
}

// cpuOf returns the CPU time of pid so far; 0 when it cannot be read.
func cpuOf(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	cpu, _, err := procStat(pid)
	if err != nil {
		return 0
	}
	return cpu
}

// loadAverage is /proc/loadavg's first three fields: the machine is
// shared, and each timing is reported next to it.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// benchProbeAnnotation is what probePatchRate writes on the Nodes: an
// annotation nothing reads, so that the patches cost what a rollout's
// patch costs the API server (a Node read, merged, validated, stored and
// sent to every Node watch) and start nothing.
const benchProbeAnnotation = "bench.dynconfig.io/probe"

// probePatchRate measures how many Node PATCHes a second the API server
// sustains here, now: an unthrottled client patches the named Nodes, 64
// at a time, with the controller and the simulated components watching
// (they decode every change, as during a rollout). It returns the rate
// and the API server's and etcd's CPU per PATCH.
func probePatchRate(ctx context.Context, client kubernetes.Interface, names []string, round int) (rate float64, apiCPU, etcdCPU time.Duration, err error) {
	api, etcd := childPID("kube-apiserver"), childPID("etcd")
	apiBefore, etcdBefore := cpuOf(api), cpuOf(etcd)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, benchProbeAnnotation, strconv.Itoa(round)))
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				if _, err := client.CoreV1().Nodes().Patch(ctx, names[i], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(len(names)))
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		return 0, 0, 0, fmt.Errorf("probing the API server's PATCH rate: %w", firstErr)
	}
	n := time.Duration(len(names))
	return float64(len(names)) / took.Seconds(), (cpuOf(api) - apiBefore) / n, (cpuOf(etcd) - etcdBefore) / n, nil
}

// benchBaselineCommit is the commit whose rollout controller the benchmark
// compares with: DYNCONFIG_ROLLOUT_BENCH_BASELINE (a commit of this
// repository), default the parent of a033b87, the last controller that
// kept one record per node in the ConfigRollout's status. "none" skips
// the comparison.
func benchBaselineCommit() string {
	if v := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_BASELINE"); v != "" {
		return v
	}
	return "e6e4a0b"
}

// benchBaselineSizes are the sizes at which the baseline also runs:
// DYNCONFIG_ROLLOUT_BENCH_BASELINE_SIZES, default 1000 (its status grows
// by about 150 bytes a node: etcd refuses it past about 10,000).
func benchBaselineSizes() map[int]bool {
	return benchSizeSet("DYNCONFIG_ROLLOUT_BENCH_BASELINE_SIZES", "1000")
}

// benchSizeSet reads a comma-separated list of sizes from the environment
// variable key (def when unset).
func benchSizeSet(key, def string) map[int]bool {
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	out := map[int]bool{}
	for f := range strings.SplitSeq(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out[n] = true
		}
	}
	return out
}

// buildBaseline builds cmd/dynconfig-rollout as it was at commit, from
// this repository's history (git archive into a temporary directory: the
// working tree is not touched), and returns the binary.
func buildBaseline(b *testing.B, commit string) string {
	b.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	dir := b.TempDir()
	archive := exec.Command("git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	untar.Stdin = pipe
	var archiveErr bytes.Buffer
	archive.Stderr = &archiveErr
	if err := untar.Start(); err != nil {
		b.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		b.Fatalf("git archive %s: %v\n%s", commit, err, archiveErr.Bytes())
	}
	if err := untar.Wait(); err != nil {
		b.Fatalf("tar -x (git archive %s): %v", commit, err)
	}
	bin := filepath.Join(dir, "dynconfig-rollout-"+commit)
	build := exec.Command("go", "build", "-o", bin, "./cmd/dynconfig-rollout")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/dynconfig-rollout at %s: %v\n%s", commit, err, out)
	}
	return bin
}

// benchRealControllers is how many of the fleet's nodes run the library's
// real Controller (in this process, each with its own client and state
// dir) instead of a simulated component: DYNCONFIG_ROLLOUT_BENCH_REAL,
// default 8.
var benchRealControllers = envInt("DYNCONFIG_ROLLOUT_BENCH_REAL", 8)

// startRealControllers bootstraps and runs a real Controller on each named
// Node (in Reload mode, as TestScale's), until b ends.
func startRealControllers(ctx context.Context, b *testing.B, h *harness, names []string) {
	b.Helper()
	root := b.TempDir()
	controllers := make([]*dynconfig.Controller[kubeletConfig], len(names))
	for i, name := range names {
		c, err := newScaleController(h, name, filepath.Join(root, name), func(context.Context, *kubeletConfig) error { return nil })
		if err != nil {
			b.Fatalf("real Controller on node %s: %v", name, err)
		}
		if _, err := c.Bootstrap(ctx); err != nil {
			b.Fatalf("real Controller on node %s: Bootstrap: %v", name, err)
		}
		controllers[i] = c
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	for i, c := range controllers {
		running.Go(func() {
			if err := c.Run(runCtx); err != nil {
				b.Errorf("real Controller on node %s: Run: %v", names[i], err)
			}
		})
	}
	b.Cleanup(func() {
		stop()
		running.Wait()
		for i, c := range controllers {
			if err := c.Close(); err != nil {
				b.Errorf("real Controller on node %s: Close: %v", names[i], err)
			}
		}
	})
}

// apiCodes sums the API server's apiserver_request_total by response
// code: what it refused (409, 429) and failed (5xx) during a run.
func apiCodes(ctx context.Context, b *testing.B, client kubernetes.Interface) map[string]float64 {
	b.Helper()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("scraping /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		b.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// countPromoted counts the named Nodes whose component reports the
// ConfigMap promoted.
func countPromoted(ctx context.Context, b *testing.B, client kubernetes.Interface, names []string, cm *corev1.ConfigMap) int {
	b.Helper()
	n := 0
	for _, name := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		st, err := nodeapi.ReadConfigStatus(node, "")
		if err != nil || st == nil {
			continue
		}
		if st.Phase == nodeapi.PhasePromoted && st.Active != nil && st.Active.ConfigMap != nil && st.Active.ConfigMap.UID == cm.UID {
			n++
		}
	}
	return n
}
