package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/status"
)

// greeterConfig stands in for a third-party component's config type.
type greeterConfig struct {
	metav1.TypeMeta `json:",inline"`
	Greeting        string `json:"greeting,omitempty"`
	Repeat          int32  `json:"repeat,omitempty"`
}

// greeterProfile is its profile: greeting defaults to "hello", repeat to 1.
type greeterProfile struct{}

func (greeterProfile) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "greeter.test", Version: "v1", Kind: "GreeterConfiguration"}
}
func (greeterProfile) PayloadKey() string { return "greeter" }
func (greeterProfile) Default(c *greeterConfig) {
	if c.Greeting == "" {
		c.Greeting = "hello"
	}
	if c.Repeat == 0 {
		c.Repeat = 1
	}
}
func (greeterProfile) Validate(c *greeterConfig) field.ErrorList {
	var errs field.ErrorList
	if c.Repeat < 1 || c.Repeat > 10 {
		errs = append(errs, field.Invalid(field.NewPath("repeat"), c.Repeat, "must be between 1 and 10"))
	}
	return errs
}

// testFeature is a gate of the test component.
const testFeature featuregate.Feature = "LoudGreeting"

// testComponent returns the test component; its Run and Start are the
// given ones.
func testComponent(start, run func(ctx context.Context, cfg *greeterConfig, env Env) error) Component[greeterConfig] {
	return Component[greeterConfig]{
		Name:    "greeter",
		Short:   "A test component",
		Version: "v1.2.3",
		Profile: greeterProfile{},
		ConfigFlags: func(fs *pflag.FlagSet) map[string]merge.FlagBinding {
			fs.String("greeting", "", "Config field greeting.")
			return map[string]merge.FlagBinding{"greeting": {Path: "greeting"}}
		},
		Features: map[featuregate.Feature]featuregate.FeatureSpec{testFeature: {Default: false, PreRelease: featuregate.Alpha}},
		Start:    start,
		Run:      run,
	}
}

// execute runs the test component's command in process, logging to t.
func execute[T any](t *testing.T, c Component[T], args ...string) (code int, stdout, stderr string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var out, errOut bytes.Buffer
	code = Execute(ctx, NewCommand(c), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelp checks the flags --help lists, by section, and that none of
// klog's legacy flags (log_dir, logtostderr, ... all with an underscore or
// no longer supported) is among them.
func TestHelp(t *testing.T) {
	code, stdout, stderr := execute(t, testComponent(nil, nil), "--help")
	if code != ExitOK || stderr != "" {
		t.Fatalf("--help: exit code %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"A test component\n\nUsage:\n  greeter --dynamic-config-dir=DIR [flags]\n",
		"\nConfig flags:\n", "--config string", "--config-dir string", "--instance-config string", "--dynamic-config-dir string", "--greeting string",
		"\nFeature gate flags:\n", "--feature-gates mapStringBool", "LoudGreeting=true|false (ALPHA - default=false)",
		"\nRemote config flags:\n", "--kubeconfig string", "dynconfig.io/config-source.greeter annotation", "--node-name string",
		"--configmap string", "--source-dir string", "--source-poll-interval duration", "--disable-remote-config",
		"\nServing flags:\n", "--address string", "--port int", "--status-file string",
		"\nLogging flags:\n", "-v, --v Level", "--vmodule pattern=N,...", "--logging-format string", "--log-flush-frequency duration",
		"\nGlobal flags:\n", "-h, --help", "--version",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, legacy := range []string{"log_dir", "log_file", "logtostderr", "alsologtostderr", "stderrthreshold", "skip_headers",
		"add_dir_header", "one_output", "log_backtrace_at", "log-dir", "logtostderr"} {
		if strings.Contains(stdout, legacy) {
			t.Errorf("help lists the legacy klog flag %s", legacy)
		}
	}
	flagName := regexp.MustCompile(`--[a-z0-9_-]+`)
	for _, name := range flagName.FindAllString(stdout, -1) {
		if strings.Contains(name, "_") {
			t.Errorf("help lists a flag with an underscore: %s", name)
		}
	}
	if t.Failed() {
		t.Logf("help:\n%s", stdout)
	}
}

// TestHelpConfigFieldFeatureGates checks that with FeatureGatesPath,
// --feature-gates is a config field and there is no feature gate section.
func TestHelpConfigFieldFeatureGates(t *testing.T) {
	c := testComponent(nil, nil)
	c.Features = nil
	c.FeatureGatesPath = "gates"
	code, stdout, _ := execute(t, c, "-h")
	if code != ExitOK {
		t.Fatalf("exit code %d", code)
	}
	if !strings.Contains(stdout, "Config field gates: a set of NAME=true|false pairs") || strings.Contains(stdout, "Feature gate flags:") {
		t.Errorf("help:\n%s", stdout)
	}
}

// TestConfigFieldFeatureGatesSetLoggingGates checks that with
// FeatureGatesPath a logging gate on --feature-gates enables its logging
// option, and that without it the option is refused.
func TestConfigFieldFeatureGatesSetLoggingGates(t *testing.T) {
	for _, tc := range []struct {
		gates    string
		wantCode int
		wantErr  string
	}{
		{gates: "LoggingAlphaOptions=true", wantCode: ExitError,
			wantErr: "greeter: dynconfig: invalid local config: failed to validate: merged config: gates[LoggingAlphaOptions]: Invalid value: true: not a greeter gate (set by flag --feature-gates)\n"},
		{gates: "Other=true", wantCode: ExitUsage,
			wantErr: "greeter: options.json.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled\nRun 'greeter --help' for usage.\n"},
	} {
		t.Run(tc.gates, func(t *testing.T) {
			c := gatedComponent()
			code, stdout, stderr := execute(t, c, "--dynamic-config-dir="+t.TempDir(), "--port=0", "--feature-gates="+tc.gates,
				"--logging-format=json", "--log-json-split-stream")
			if code != tc.wantCode || stderr != tc.wantErr || stdout != "" {
				t.Errorf("exit code %d, stdout %q, stderr\n%q\nwant %d, stderr\n%q", code, stdout, stderr, tc.wantCode, tc.wantErr)
			}
		})
	}
}

// gatedConfig is a config with a featureGates field that accepts no gate
// but "Other".
type gatedConfig struct {
	metav1.TypeMeta `json:",inline"`
	Gates           map[string]bool `json:"gates,omitempty"`
}

type gatedProfile struct{ greeterProfile }

func (gatedProfile) Default(*gatedConfig) {}
func (gatedProfile) Validate(c *gatedConfig) field.ErrorList {
	var errs field.ErrorList
	for name, on := range c.Gates {
		if name != "Other" {
			errs = append(errs, field.Invalid(field.NewPath("gates").Key(name), on, "not a greeter gate"))
		}
	}
	return errs
}

// gatedComponent is a component whose --feature-gates is its config's
// gates field.
func gatedComponent() Component[gatedConfig] {
	return Component[gatedConfig]{Name: "greeter", Profile: gatedProfile{}, FeatureGatesPath: "gates"}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		arg     string
		want    string
	}{
		{name: "given", version: "v1.2.3", arg: "--version", want: "greeter v1.2.3\n"},
		{name: "true", version: "v1.2.3", arg: "--version=true", want: "greeter v1.2.3\n"},
		// A test binary's main module has no version, and component-base's
		// is not set by -ldflags here.
		{name: "default", arg: "--version", want: "greeter v0.0.0-dev\n"},
		{name: "raw", version: "v1.2.3", arg: "--version=raw", want: fmt.Sprintf("%#v\n", versionInfo("v1.2.3"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testComponent(nil, nil)
			c.Version = tc.version
			code, stdout, stderr := execute(t, c, tc.arg)
			if code != ExitOK || stdout != tc.want || stderr != "" {
				t.Errorf("--version: exit code %d, stdout %q, stderr %q; want 0, %q, nothing", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestBadInvocations runs the command on command lines it must refuse,
// each with its exit code and exact error text, and on a local config it
// must refuse (exit 1). Nothing is written to stdout.
func TestBadInvocations(t *testing.T) {
	dir := t.TempDir()
	const help = "Run 'greeter --help' for usage.\n"
	state := "--dynamic-config-dir=" + dir
	badConfig := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badConfig, []byte("apiVersion: greeter.test/v1\nkind: GreeterConfiguration\nrepeat: 11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "unknown flag", args: []string{state, "--nope"}, wantCode: ExitUsage,
			wantErr: "greeter: unknown flag: --nope\n" + help},
		{name: "legacy klog flag", args: []string{state, "--logtostderr"}, wantCode: ExitUsage,
			wantErr: "greeter: unknown flag: --logtostderr\n" + help},
		{name: "missing required flag", wantCode: ExitUsage,
			wantErr: "greeter: required flag(s) \"dynamic-config-dir\" not set\n" + help},
		{name: "argument", args: []string{state, "extra"}, wantCode: ExitUsage,
			wantErr: "greeter: greeter takes no arguments, got [\"extra\"]\n" + help},
		{name: "unknown feature gate", args: []string{state, "--feature-gates=Nope=true"}, wantCode: ExitUsage,
			wantErr: "greeter: invalid argument \"Nope=true\" for \"--feature-gates\" flag: unrecognized feature gate: Nope\n" + help},
		{name: "feature gate without value", args: []string{state, "--feature-gates=LoudGreeting"}, wantCode: ExitUsage,
			wantErr: "greeter: invalid argument \"LoudGreeting\" for \"--feature-gates\" flag: missing bool value for LoudGreeting\n" + help},
		{name: "bad log format", args: []string{state, "--logging-format=xml"}, wantCode: ExitUsage,
			wantErr: "greeter: format: Invalid value: \"xml\": Unsupported log format\n" + help},
		{name: "alpha logging option without its gate", args: []string{state, "--logging-format=json", "--log-json-split-stream"},
			wantCode: ExitUsage,
			wantErr:  "greeter: options.json.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled\n" + help},
		{name: "bad version value", args: []string{"--version=loud"}, wantCode: ExitUsage,
			wantErr: "greeter: invalid argument \"loud\" for \"--version\" flag: want true, false or raw\n" + help},
		{name: "bad verbosity", args: []string{state, "--v=loud"}, wantCode: ExitUsage,
			wantErr: "greeter: invalid argument \"loud\" for \"-v, --v\" flag: strconv.ParseUint: parsing \"loud\": invalid syntax\n" + help},
		{name: "bad configmap", args: []string{state, "--configmap=just-a-name"}, wantCode: ExitUsage,
			wantErr: "greeter: --configmap \"just-a-name\": want NAMESPACE/NAME\n" + help},
		{name: "bad port", args: []string{state, "--port=70000"}, wantCode: ExitUsage,
			wantErr: "greeter: --port 70000: must be between 0 and 65535\n" + help},
		{name: "bad poll interval", args: []string{state, "--source-poll-interval=0s"}, wantCode: ExitUsage,
			wantErr: "greeter: --source-poll-interval 0s: must be positive\n" + help},
		{name: "two remote sources", args: []string{state, "--kubeconfig=k", "--source-dir=s"}, wantCode: ExitUsage,
			wantErr: "greeter: if any flags in the group [kubeconfig source-dir] are set none of the others can be; [kubeconfig source-dir] were all set\n" + help},
		{name: "invalid local config", args: []string{state, "--config=" + badConfig}, wantCode: ExitError,
			wantErr: "greeter: dynconfig: invalid local config: failed to validate: merged config: repeat: Invalid value: 11: must be between 1 and 10 (set by " + badConfig + ")\n"},
		{name: "missing config file", args: []string{state, "--config=" + filepath.Join(dir, "nope.yaml")}, wantCode: ExitError,
			wantErr: "greeter: dynconfig: invalid local config: read config file: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := execute(t, testComponent(nil, nil), tc.args...)
			if code != tc.wantCode || stderr != tc.wantErr || stdout != "" {
				t.Errorf("exit code %d, stdout %q, stderr\n%q\nwant %d, no stdout, stderr\n%q", code, stdout, stderr, tc.wantCode, tc.wantErr)
			}
		})
	}
}

// TestUsageError checks that only errors marked by UsageError (or
// wrapping one) are usage errors.
func TestUsageError(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{err: nil, want: false},
		{err: base, want: false},
		{err: UsageError(base), want: true},
		{err: fmt.Errorf("context: %w", UsageError(base)), want: true},
	} {
		if got := IsUsageError(tc.err); got != tc.want {
			t.Errorf("IsUsageError(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
	if UsageError(nil) != nil {
		t.Error("UsageError(nil) is not nil")
	}
	if err := UsageError(base); !errors.Is(err, base) || err.Error() != "boom" {
		t.Errorf("UsageError(boom) = %v, does not wrap boom", err)
	}
}

// started is a command running in process.
type started struct {
	addr   string
	cancel context.CancelFunc
	done   chan int
	stdout *proctest.SyncBuffer
	stderr *proctest.SyncBuffer
}

// start runs cmd in process until the test ends, and waits until it
// serves.
func start(t *testing.T, cmd *cobra.Command, args ...string) *started {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	s := &started{cancel: cancel, done: make(chan int, 1), stdout: &proctest.SyncBuffer{}, stderr: &proctest.SyncBuffer{}}
	go func() { s.done <- Execute(ctx, cmd, args, s.stdout, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(s.stdout.String()))
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				s.addr = addr
				return s
			}
		}
		select {
		case code := <-s.done:
			t.Fatalf("exited with code %d before serving; stderr:\n%s", code, s.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("not serving after 10s; stdout %q", s.stdout.String())
	return nil
}

// stop cancels the command's context and returns its exit code.
func (s *started) stop() int {
	s.cancel()
	code := <-s.done
	s.done <- code
	return code
}

// get GETs path from the started command.
func (s *started) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// recordingReporter records the status of every report.
type recordingReporter struct {
	mu  sync.Mutex
	got []corev1.ConditionStatus
}

func (r *recordingReporter) ReportConfigOK(_ context.Context, rep status.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rep.Status)
	return nil
}

func (r *recordingReporter) statuses() []corev1.ConditionStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]corev1.ConditionStatus(nil), r.got...)
}

// TestServes runs the test component on a local config and a flag and
// reads /healthz, /configz and /metrics, and the status file; SIGTERM's
// cancellation ends it with exit code 0.
func TestServes(t *testing.T) {
	dir := t.TempDir()
	statusPath := filepath.Join(dir, "status.json")
	var gotCfg *greeterConfig
	var gotEnv Env
	c := testComponent(nil, func(ctx context.Context, cfg *greeterConfig, env Env) error {
		gotCfg, gotEnv = cfg, env
		<-ctx.Done()
		return ctx.Err()
	})
	extra := &recordingReporter{}
	c.Reporters = []dynconfig.Reporter{extra}
	// "_" stands for "-" in flag names, as in Kubernetes components.
	s := start(t, NewCommand(c), "--dynamic_config_dir="+filepath.Join(dir, "state"), "--port=0", "--greeting=hi",
		"--status-file="+statusPath, "--node-name=node-a", "--feature-gates=LoudGreeting=true,LoggingAlphaOptions=true",
		"--logging-format=json", "--log-json-split-stream")

	if code, body := s.get(t, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	code, body := s.get(t, "/configz")
	if code != http.StatusOK {
		t.Fatalf("/configz = %d %s", code, body)
	}
	var z struct {
		Config   *greeterConfig `json:"greeter"`
		ConfigOK *Condition     `json:"configOK"`
	}
	if err := json.Unmarshal([]byte(body), &z); err != nil {
		t.Fatalf("/configz %s: %v", body, err)
	}
	wantCond := &Condition{Status: corev1.ConditionTrue, Reason: status.ReasonLocalDefault,
		Message: status.CurrentMessage(status.Ref{}, status.LocalDefault)}
	if diff := cmp.Diff(&greeterConfig{TypeMeta: metav1.TypeMeta{APIVersion: "greeter.test/v1", Kind: "GreeterConfiguration"},
		Greeting: "hi", Repeat: 1}, z.Config); diff != "" {
		t.Errorf("/configz config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCond, z.ConfigOK); diff != "" {
		t.Errorf("/configz configOK (-want +got):\n%s\nbody %s", diff, body)
	}
	if _, body := s.get(t, "/metrics"); !strings.Contains(body, status.MetricActiveConfigInfo+`{component="greeter",`) ||
		!strings.Contains(body, "go_goroutines ") {
		t.Errorf("/metrics lacks the active config series with component=\"greeter\", or the Go collector:\n%s", body)
	}
	data, err := os.ReadFile(statusPath)
	if err != nil {
		t.Fatal(err)
	}
	var sf Condition
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Condition{Status: wantCond.Status, Reason: wantCond.Reason, Message: wantCond.Message, PID: os.Getpid()}, sf); diff != "" {
		t.Errorf("status file (-want +got):\n%s", diff)
	}
	if code := s.stop(); code != ExitOK {
		t.Errorf("exit code %d after cancel, want 0; stderr:\n%s", code, s.stderr.String())
	}
	if got := extra.statuses(); len(got) == 0 || got[0] != corev1.ConditionTrue {
		t.Errorf("the component's Reporter saw %v, want the startup report (True) first", got)
	}
	if gotCfg == nil || gotCfg.Greeting != "hi" || gotEnv.NodeName != "node-a" || !gotEnv.FeatureGates.Enabled(testFeature) {
		t.Errorf("Run saw config %+v, env %+v; want greeting hi, node-a, %s enabled", gotCfg, gotEnv, testFeature)
	}
	// The command removed its /configz entries: a second one can run.
	s2 := start(t, NewCommand(testComponent(nil, nil)), "--dynamic-config-dir="+filepath.Join(dir, "state2"), "--port=0")
	if code, _ := s2.get(t, "/configz"); code != http.StatusOK {
		t.Errorf("second command: /configz = %d", code)
	}
}

// cancelKey keys the cancel func of the command's context in the tests.
type cancelKey struct{}

// cancelRun cancels the command's context, as a signal does.
func cancelRun(ctx context.Context) { ctx.Value(cancelKey{}).(context.CancelFunc)() }

// TestStartAndRunFailures checks the exit codes of a component whose Start
// or Run fails, or whose Run ends by itself.
func TestStartAndRunFailures(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		start, run func(ctx context.Context, cfg *greeterConfig, env Env) error
		wantCode   int
		wantStdout bool
	}{
		{name: "start fails", start: func(context.Context, *greeterConfig, Env) error { return boom }, wantCode: ExitError},
		{name: "run fails", run: func(context.Context, *greeterConfig, Env) error { return boom }, wantCode: ExitError, wantStdout: true},
		{name: "run ends", run: func(context.Context, *greeterConfig, Env) error { return nil }, wantCode: ExitOK, wantStdout: true},
		{name: "stopped while starting", start: func(ctx context.Context, _ *greeterConfig, _ Env) error {
			// What a Start waiting on something sees when SIGTERM comes.
			cancelRun(ctx)
			<-ctx.Done()
			return fmt.Errorf("waiting for the network: %w", ctx.Err())
		}, wantCode: ExitOK},
		{name: "usage error in start", start: func(context.Context, *greeterConfig, Env) error { return UsageError(boom) },
			wantCode: ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ctx = context.WithValue(ctx, cancelKey{}, cancel)
			var out, errOut bytes.Buffer
			code := Execute(ctx, NewCommand(testComponent(tc.start, tc.run)), []string{"--dynamic-config-dir=" + t.TempDir(), "--port=0"}, &out, &errOut)
			stdout, stderr := out.String(), errOut.String()
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr %q", code, tc.wantCode, stderr)
			}
			if served := strings.HasPrefix(stdout, "serving on "); served != tc.wantStdout {
				t.Errorf("stdout %q; want it served: %t", stdout, tc.wantStdout)
			}
			if tc.wantCode == ExitError && stderr != "greeter: boom\n" {
				t.Errorf("stderr %q, want \"greeter: boom\\n\"", stderr)
			}
		})
	}
}

// TestParseConfigMapRef checks --configmap's NAMESPACE/NAME.
func TestParseConfigMapRef(t *testing.T) {
	for _, tc := range []struct {
		in            string
		wantNamespace string
		wantName      string
	}{
		{in: "kube-system/kube-proxy", wantNamespace: "kube-system", wantName: "kube-proxy"},
		{in: "ns/name.with.dots", wantNamespace: "ns", wantName: "name.with.dots"},
		{in: "kube-proxy"}, {in: "/kube-proxy"}, {in: "kube-system/"}, {in: "a/b/c"}, {in: ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			ref, err := parseConfigMapRef(tc.in)
			if tc.wantName == "" {
				want := fmt.Sprintf("--configmap %q: want NAMESPACE/NAME", tc.in)
				if err == nil || err.Error() != want {
					t.Fatalf("parseConfigMapRef(%q) = %v, %v; want error %q", tc.in, ref, err, want)
				}
				return
			}
			if err != nil || ref.Namespace != tc.wantNamespace || ref.Name != tc.wantName {
				t.Errorf("parseConfigMapRef(%q) = %v, %v; want %s/%s", tc.in, ref, err, tc.wantNamespace, tc.wantName)
			}
		})
	}
}

// FuzzParseConfigMapRef checks that an accepted --configmap value splits
// into two non-empty parts that join back to the input.
func FuzzParseConfigMapRef(f *testing.F) {
	for _, s := range []string{"kube-system/kube-proxy", "a/b/c", "/", "x", "", "ns//n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := parseConfigMapRef(s)
		if err != nil {
			return
		}
		if ref.Namespace == "" || ref.Name == "" || strings.Contains(ref.Name, "/") || ref.Namespace+"/"+ref.Name != s {
			t.Fatalf("parseConfigMapRef(%q) = %v", s, ref)
		}
	})
}
