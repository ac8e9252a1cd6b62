package dynconfig

// Version skew of the state dir (issue 21; the policy is in package
// checkpoint's documentation): the previous version of the component,
// built from git history, and this one run over the same state dir in
// turn, with a config on trial, in both directions.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/testenv"
)

// previousVersion is the commit whose component is "the previous version"
// for TestVersionSkew: the last commit before the state dir's behaviour
// changed (crash-loop counting pinned to the adopting start, issue 21).
// Move it forward when the state format or its meaning changes again.
const previousVersion = "20fb1ee6bd5013b1c48e544a1c011e24afae5e03"

// buildKubeletLike builds examples/kubelet-like from the source tree at
// root into dir and returns the binary.
func buildKubeletLike(t *testing.T, root, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./examples/kubelet-like")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build kubelet-like (%s): %v\n%s", name, err, out)
	}
	return bin
}

// haveCommit fetches commit from origin when the clone at repo lacks it (a
// shallow clone, as CI systems make), and stops the test with
// testenv.Missing (a failure in CI) when it still lacks it.
func haveCommit(t *testing.T, repo, commit string) {
	t.Helper()
	has := func() bool {
		return exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run() == nil
	}
	if has() {
		return
	}
	fetch := exec.Command("git", "-C", repo, "fetch", "--quiet", "--no-tags", "--depth=1", "origin", commit)
	out, err := fetch.CombinedOutput()
	if err == nil && has() {
		t.Logf("fetched commit %s from origin (the clone lacked it)", commit)
		return
	}
	t.Logf("the clone lacks commit %s; git fetch origin: %v\n%s", commit, err, out)
	testenv.Missing(t, "commit "+commit+" of the git history (the previous version; git fetch origin failed)",
		"git fetch --depth=1 origin "+commit+", or a clone with the history")
}

// checkout extracts commit of the repository at repo into a new directory,
// without touching the repository (git archive, no worktree).
func checkout(t *testing.T, repo, commit string) string {
	t.Helper()
	haveCommit(t, repo, commit)
	dir := t.TempDir()
	archive := exec.Command("git", "-C", repo, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v: %s", commit, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startOnce starts bin on node n, waits for its ConfigOK report to have
// message want, and stops it with SIGTERM.
func startOnce(t *testing.T, bin string, n proctest.Node, wantStatus corev1.ConditionStatus, want string, extra ...string) {
	t.Helper()
	p := proctest.Start(t, bin, n.Args(extra...), nil)
	proctest.WaitFor(t, fmt.Sprintf("%s to report %s %q", filepath.Base(bin), wantStatus, want), func() (bool, string) {
		if p.Exited() {
			t.Fatalf("%s exited with %d\n%s", bin, p.Code(), p.Stderr())
		}
		c, ok, err := n.ReadStatus()
		if err != nil || !ok || c.PID != p.PID() {
			return false, fmt.Sprintf("status %+v, %v, %v", c, ok, err)
		}
		if c.Status != wantStatus || c.Message != want {
			return false, fmt.Sprintf("status %+v", c)
		}
		return true, ""
	}, p.Stderr)
	if len(extra) > 0 { // --confirm-within: the health gate confirms b before it stops
		proctest.WaitFor(t, "b confirmed", func() (bool, string) {
			rec, err := checkpoint.InspectConfirmation(n.StateDir())
			return err == nil && !rec.Confirmed.IsZero(), fmt.Sprintf("record %+v, %v", rec, err)
		}, p.Stderr)
	}
	p.Terminate(t)
}

func TestVersionSkew(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries, one from git history")
	}
	testenv.LookPath(t, "git", "apt-get install git")
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	previous := buildKubeletLike(t, checkout(t, repo, previousVersion), bins, "kubelet-like-previous")
	current := buildKubeletLike(t, repo, bins, "kubelet-like-current")

	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubelet-b", UID: "uid-b",
			Annotations: map[string]string{"dynconfig.io/trial-duration": "1h"}},
		Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 77\n"},
	}
	onB := "using current (UID: uid-b)"
	for _, tc := range []struct {
		name          string
		first, second string
	}{
		{"upgrade: the previous version adopts b, this one continues its trial", previous, current},
		{"downgrade: this version adopts b, the previous one continues its trial", current, previous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := proctest.NewNode(t)
			n.WriteConfigMap(t, cm)
			n.WriteAssignment(t, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: "kubelet"}})
			// This version runs with a confirmation deadline (issue 20):
			// it writes meta/confirmed, which the previous one has never
			// heard of (and must not quarantine), and counts its deadline
			// from the first run the previous one recorded.
			args := func(bin string) []string {
				if bin == current {
					return []string{"--confirm-within=1h"}
				}
				return nil
			}
			startOnce(t, tc.first, n, corev1.ConditionTrue, onB, args(tc.first)...)
			// The other version, on the state the first one left, with b
			// on trial: it runs b (one crash restart is within b's
			// threshold), and then so does the first one again.
			startOnce(t, tc.second, n, corev1.ConditionTrue, onB, args(tc.second)...)
			startOnce(t, tc.first, n, corev1.ConditionTrue, onB, args(tc.first)...)

			if q, err := os.ReadDir(filepath.Join(n.StateDir(), "quarantine")); err == nil && len(q) > 0 {
				t.Errorf("the versions quarantined each other's files: %d entries", len(q))
			}
		})
	}
}
