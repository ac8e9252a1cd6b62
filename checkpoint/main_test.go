package checkpoint_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/checkpoint"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	testclock "k8s.io/utils/clock/testing"
)

// The tests run the test binary itself as a child process for what needs a
// real second process (the lock) or a real SIGKILL (crash consistency). The
// child is selected by these environment variables and never runs tests.
const (
	envChild = "DYNCONFIG_CHECKPOINT_CHILD" // "lock" or "crash"
	envDir   = "DYNCONFIG_CHECKPOINT_DIR"   // the state dir
	envRound = "DYNCONFIG_CHECKPOINT_ROUND" // crash: a number that makes this child's keys unique
)

func TestMain(m *testing.M) {
	switch mode := os.Getenv(envChild); mode {
	case "":
		os.Exit(m.Run())
	case "lock":
		os.Exit(childLock(os.Getenv(envDir)))
	case "crash":
		round, _ := strconv.Atoi(os.Getenv(envRound))
		os.Exit(childCrash(os.Getenv(envDir), round))
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", envChild, mode)
		os.Exit(2)
	}
}

// quiet is a logger that prints nothing, for child processes.
var quiet = klog.Background().V(1000)

// childLock tries to open the state dir once and prints the outcome.
func childLock(dir string) int {
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: quiet})
	if err != nil {
		fmt.Printf("ERROR: %v\n", err)
		return 0
	}
	fmt.Println("OPENED")
	if err := s.Close(); err != nil {
		fmt.Printf("CLOSE ERROR: %v\n", err)
		return 1
	}
	return 0
}

// childCrash writes checkpoints and pointers in a tight loop, in the order a
// controller does (Save, then SetCurrent; promote the previous current to
// LKG; GC), until it is killed. It prints READY once the first iteration
// (which also garbage-collects what earlier children left) has committed.
func childCrash(dir string, round int) int {
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: quiet})
	if err != nil {
		fmt.Printf("ERROR: %v\n", err)
		return 1
	}
	fail := func(err error) int {
		fmt.Printf("ERROR: %v\n", err)
		return 1
	}
	var prev *corev1.NodeConfigSource
	for j := 0; ; j++ {
		cm := crashConfigMap(types.UID(fmt.Sprintf("uid-%d", j%4)), fmt.Sprintf("%d-%d", round, j))
		if _, err := s.Save(cm); err != nil {
			return fail(err)
		}
		src := sourceFor(cm)
		if err := s.SetCurrent(src); err != nil {
			return fail(err)
		}
		if j%3 == 0 && prev != nil {
			if err := s.SetLastKnownGood(prev); err != nil {
				return fail(err)
			}
		}
		if j%5 == 0 {
			if _, err := s.GC(); err != nil {
				return fail(err)
			}
		}
		prev = src
		if j == 0 {
			fmt.Println("READY")
		}
	}
}

// crashConfigMap has a payload large enough that a write takes a while, and
// that says which key it belongs to, so the parent can check both.
func crashConfigMap(uid types.UID, rv string) *corev1.ConfigMap {
	cm := newConfigMap(uid, rv)
	cm.Data["seq"] = rv
	cm.Data["blob"] = strings.Repeat(rv+";", 64<<10/(len(rv)+1))
	return cm
}

func checkCrashConfigMap(cm *corev1.ConfigMap) error {
	rv := cm.ResourceVersion
	if cm.Data["seq"] != rv {
		return fmt.Errorf("checkpoint %s holds seq %q", checkpoint.KeyOf(cm), cm.Data["seq"])
	}
	if want := strings.Repeat(rv+";", 64<<10/(len(rv)+1)); cm.Data["blob"] != want {
		return fmt.Errorf("checkpoint %s has a blob of %d bytes, want %d", checkpoint.KeyOf(cm), len(cm.Data["blob"]), len(want))
	}
	return nil
}

func newConfigMap(uid types.UID, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "kube-system",
			Name:              "kubelet-config",
			UID:               uid,
			ResourceVersion:   rv,
			CreationTimestamp: metav1.NewTime(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)),
			Labels:            map[string]string{"app": "kubelet"},
			Annotations:       map[string]string{"dynconfig.io/trial-duration": "10m"},
		},
		Data:       map[string]string{"kubelet": `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":110}`},
		BinaryData: map[string][]byte{"bin": {0, 1, 2, 0xff}},
	}
}

// checkpointFile is where Save writes the checkpoint uid/rv (the flat
// layout).
func checkpointFile(dir string, uid types.UID, rv string) string {
	return filepath.Join(dir, "checkpoints", string(uid)+"_"+rv)
}

// toNested moves the checkpoint uid/rv to the nested layout of older
// versions, checkpoints/<uid>/<rv>, and returns its new path.
func toNested(t testing.TB, dir string, uid types.UID, rv string) string {
	t.Helper()
	nested := filepath.Join(dir, "checkpoints", string(uid), rv)
	if err := os.MkdirAll(filepath.Dir(nested), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(checkpointFile(dir, uid, rv), nested); err != nil {
		t.Fatal(err)
	}
	return nested
}

func sourceFor(cm *corev1.ConfigMap) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace:        cm.Namespace,
		Name:             cm.Name,
		UID:              cm.UID,
		ResourceVersion:  cm.ResourceVersion,
		KubeletConfigKey: "kubelet",
	}}
}

// testLogger writes the Store's log lines into the test log and, if buf is
// not nil, into buf.
func testLogger(t testing.TB, buf *bytes.Buffer) klog.Logger {
	var w io.Writer = tWriter{t}
	if buf != nil {
		w = io.MultiWriter(w, buf)
	}
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(w)))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)

// openStore opens a Store on dir with a fake clock, closed at the end of the
// test.
func openStore(t testing.TB, dir string) (*checkpoint.Store, *testclock.FakeClock) {
	t.Helper()
	clk := testclock.NewFakeClock(epoch)
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.2", Clock: clk, Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, clk
}

func mustSave(t testing.TB, s *checkpoint.Store, cm *corev1.ConfigMap) checkpoint.Key {
	t.Helper()
	k, err := s.Save(cm)
	if err != nil {
		t.Fatalf("Save(%s): %v", checkpoint.KeyOf(cm), err)
	}
	return k
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

func mkfifoReplacing(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	return mkfifo(path)
}
