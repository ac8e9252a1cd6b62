package demo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
)

func TestFeatureGatesFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sets    []string
		want    FeatureGates
		wantStr string
		wantErr string
	}{
		{name: "one", sets: []string{"A=true"}, want: FeatureGates{"A": true}, wantStr: "A=true"},
		{name: "several, sorted when rendered", sets: []string{"B=false, A=true"},
			want: FeatureGates{"A": true, "B": false}, wantStr: "A=true,B=false"},
		{name: "repeated flag adds and overrides", sets: []string{"A=true", "A=false,C=1"},
			want: FeatureGates{"A": false, "C": true}, wantStr: "A=false,C=true"},
		{name: "empty items skipped", sets: []string{",A=true,,"}, want: FeatureGates{"A": true}, wantStr: "A=true"},
		{name: "no value", sets: []string{"A"}, wantErr: `"A" is not NAME=true or NAME=false`},
		{name: "no name", sets: []string{"=true"}, wantErr: `"=true" is not NAME=true or NAME=false`},
		{name: "not a boolean", sets: []string{"A=yes"}, wantErr: `gate A: "yes" is not a boolean`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := FeatureGates{}
			var err error
			for _, s := range tc.sets {
				if err = g.Set(s); err != nil {
					break
				}
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Set error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("gates (-want +got):\n%s", diff)
			}
			if got := g.String(); got != tc.wantStr {
				t.Errorf("String() = %q, want %q", got, tc.wantStr)
			}
		})
	}
}

// FuzzFeatureGatesSet checks that whatever --feature-gates accepts renders
// to a String that parses back to the same gates: the form that
// merge.Pipeline.FlagOverrides reads.
func FuzzFeatureGatesSet(f *testing.F) {
	for _, s := range []string{"A=true", "A=true,B=false", " A = 1 ", "", ",", "A", "=x", "A=b=c", "A=true,A=false"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := FeatureGates{}
		if err := g.Set(s); err != nil {
			return
		}
		again := FeatureGates{}
		if err := again.Set(g.String()); err != nil {
			t.Fatalf("Set(%q) accepted, but its String %q does not parse: %v", s, g.String(), err)
		}
		if diff := cmp.Diff(g, again); diff != "" {
			t.Fatalf("round trip of %q changed the gates (-first +second):\n%s", s, diff)
		}
	})
}

// TestExecute checks the exit code and the last stderr line of a command
// that succeeds, fails, or is called wrongly.
func TestExecute(t *testing.T) {
	for _, tc := range []struct {
		name       string
		runErr     error
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "success", args: []string{}, wantCode: 0, wantStdout: "ran"},
		{name: "error", args: []string{}, runErr: errors.New("boom"), wantCode: 1, wantStdout: "ran", wantStderr: "thing: boom\n"},
		{name: "unknown flag", args: []string{"--nope"}, wantCode: 1, wantStderr: "thing: unknown flag: --nope\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &cobra.Command{
				Use:           "thing",
				SilenceUsage:  true,
				SilenceErrors: true,
				RunE: func(cmd *cobra.Command, _ []string) error {
					cmd.Print("ran")
					return tc.runErr
				},
			}
			var stdout, stderr bytes.Buffer
			if code := Execute(context.Background(), cmd, tc.args, &stdout, &stderr); code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// ctxKey keys a test value in a context.
type ctxKey struct{}

// TestNewCommand runs a command built by NewCommand: run sees the context,
// the parsed flags and stdout; an argument is refused; help lists the
// flags in the order they were added.
func TestNewCommand(t *testing.T) {
	var gotCtx, gotFlag string
	cmd := NewCommand("thing", "short", "long", func(ctx context.Context, fs *pflag.FlagSet, stdout io.Writer) error {
		gotCtx, _ = ctx.Value(ctxKey{}).(string)
		gotFlag, _ = fs.GetString("zeta")
		_, err := io.WriteString(stdout, "ran")
		return err
	})
	cmd.Flags().String("zeta", "", "added first")
	cmd.Flags().String("alpha", "", "added second")
	ctx := context.WithValue(context.Background(), ctxKey{}, "value")

	var stdout, stderr bytes.Buffer
	if code := Execute(ctx, cmd, []string{"--zeta=z"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr.String())
	}
	if gotCtx != "value" || gotFlag != "z" || stdout.String() != "ran" {
		t.Errorf("run saw context value %q, --zeta %q, wrote %q; want value, z, ran", gotCtx, gotFlag, stdout.String())
	}
	if cmd.Use != "thing" || cmd.Short != "short" || cmd.Long != "long" {
		t.Errorf("Use, Short, Long = %q, %q, %q", cmd.Use, cmd.Short, cmd.Long)
	}
	usage := cmd.Flags().FlagUsages()
	if z, a := strings.Index(usage, "--zeta"), strings.Index(usage, "--alpha"); z < 0 || a < 0 || z > a {
		t.Errorf("help lists --zeta at %d, --alpha at %d; want the order they were added:\n%s", z, a, usage)
	}

	stdout.Reset()
	stderr.Reset()
	if code := Execute(ctx, cmd, []string{"extra"}, &stdout, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), `thing: unknown command "extra"`) {
		t.Errorf("with an argument: exit code %d, stderr %q; want 1 and an unknown command error", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("with an argument: stdout %q, want nothing (no usage either)", stdout.String())
	}
}

// TestFlags checks the order, defaults and targets of the shared flags:
// the components' help lists them in registration order.
func TestFlags(t *testing.T) {
	var f Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SortFlags = false
	f.AddLocalFlags(fs, "KindConfiguration", "instance help")
	f.AddServingFlags(fs, 1234)
	var names, defaults []string
	fs.VisitAll(func(fl *pflag.Flag) {
		names = append(names, fl.Name)
		defaults = append(defaults, fl.DefValue)
	})
	wantNames := []string{"config", "config-dir", "instance-config", "dynamic-config-dir",
		"source-dir", "source-poll-interval", "address", "port", "status-file"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "", "", "", "", "1s", "127.0.0.1", "1234", ""}, defaults); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := fs.Lookup("config").Usage; !strings.Contains(got, "(a KindConfiguration)") {
		t.Errorf("--config help %q does not name the kind", got)
	}
	if got := fs.Lookup("instance-config").Usage; got != "instance help" {
		t.Errorf("--instance-config help = %q", got)
	}
	err := fs.Parse([]string{"--config=c", "--config-dir=d", "--instance-config=i", "--dynamic-config-dir=s",
		"--source-dir=src", "--source-poll-interval=50ms", "--address=0.0.0.0", "--port=0", "--status-file=st"})
	if err != nil {
		t.Fatal(err)
	}
	want := Flags{ConfigFile: "c", ConfigDir: "d", InstanceConfig: "i", StateDir: "s", SourceDir: "src",
		SourcePoll: 50_000_000, Address: "0.0.0.0", Port: 0, StatusFile: "st"}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("parsed flags (-want +got):\n%s", diff)
	}
}

// TestLocalLayers builds a config from an init file, a drop-in, an
// instance file and a config flag: the flag wins, and only set flags apply.
func TestLocalLayers(t *testing.T) {
	dir := t.TempDir()
	doc := func(body string) []byte {
		return []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + body + "\n")
	}
	files := map[string][]byte{
		"init.yaml":          doc("maxPods: 10\nkubeAPIQPS: 1"),
		"conf.d/10-qps.conf": doc("kubeAPIQPS: 2"),
		"instance.yaml":      doc("maxPods: 20"),
	}
	for rel, data := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := kubelet.NewPipeline(merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bindings := map[string]merge.FlagBinding{"max-pods": {Path: "maxPods"}, "kube-api-qps": {Path: "kubeAPIQPS"}}
	for _, tc := range []struct {
		name        string
		args        []string
		wantMaxPods int32
		wantQPS     int32
	}{
		{name: "files only", wantMaxPods: 20, wantQPS: 2},
		{name: "a set flag wins", args: []string{"--max-pods=30"}, wantMaxPods: 30, wantQPS: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.Int32("max-pods", 0, "")
			fs.Int32("kube-api-qps", 0, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			f := &Flags{ConfigFile: filepath.Join(dir, "init.yaml"), ConfigDir: filepath.Join(dir, "conf.d"),
				InstanceConfig: filepath.Join(dir, "instance.yaml")}
			layers, err := LocalLayers(p, f, fs, bindings)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := layers.Build(nil)
			if err != nil {
				t.Fatal(err)
			}
			var qps int32
			if cfg.KubeAPIQPS != nil {
				qps = *cfg.KubeAPIQPS
			}
			if cfg.MaxPods != tc.wantMaxPods || qps != tc.wantQPS {
				t.Errorf("maxPods %d, kubeAPIQPS %d; want %d, %d", cfg.MaxPods, qps, tc.wantMaxPods, tc.wantQPS)
			}
		})
	}

	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("max-pods", "", "")
	if err := fs.Parse([]string{"--max-pods=many"}); err != nil {
		t.Fatal(err)
	}
	if _, err := LocalLayers(p, &Flags{}, fs, bindings); err == nil || !strings.Contains(err.Error(), "max-pods") {
		t.Errorf("LocalLayers with a flag that is not a number: error %v, want one naming --max-pods", err)
	}
}
