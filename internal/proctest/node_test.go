package proctest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/internal/statusfile"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

func TestNodeLayout(t *testing.T) {
	n := NewNode(t)
	if fi, err := os.Stat(filepath.Join(n.Dir, "source", source.ConfigMapsDir)); err != nil || !fi.IsDir() {
		t.Fatalf("configmaps dir: %v", err)
	}
	want := []string{
		"--dynamic-config-dir=" + filepath.Join(n.Dir, "state"),
		"--source-dir=" + filepath.Join(n.Dir, "source"),
		"--source-poll-interval=50ms",
		"--status-file=" + filepath.Join(n.Dir, "configok.json"),
		"--port=0",
		"--extra",
	}
	if diff := cmp.Diff(want, n.Args("--extra")); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	if got, want := n.File("conf.d/a.conf"), filepath.Join(n.Dir, "conf.d", "a.conf"); got != want {
		t.Errorf("File = %q, want %q", got, want)
	}
}

// TestNodeSourceFiles writes a ConfigMap and an assignment and reads them
// back through the directory source the components use.
func TestNodeSourceFiles(t *testing.T) {
	n := NewNode(t)
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cfg", UID: "u1"},
		Data:       map[string]string{"kubelet": "maxPods: 3\n"},
	}
	n.WriteConfigMap(t, cm)
	n.WriteAssignment(t, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "cfg", UID: "u1", KubeletConfigKey: "kubelet",
	}})
	if _, err := os.Stat(filepath.Join(n.SourceDir(), source.ConfigMapsDir, "cfg.yaml")); err != nil {
		t.Fatalf("ConfigMap file: %v", err)
	}
	dir, err := source.NewDir(source.DirOptions{Path: n.SourceDir(), PayloadKey: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := dir.Assigned(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.Source == nil || a.Source.ConfigMap == nil || a.Source.ConfigMap.UID != "u1" || a.ConfigMap == nil {
		t.Fatalf("assignment read back: %+v", a)
	}
	if diff := cmp.Diff(cm.Data, a.ConfigMap.Data); diff != "" {
		t.Errorf("ConfigMap data read back (-want +got):\n%s", diff)
	}
}

func TestWriteFilesAndExpandDir(t *testing.T) {
	n := NewNode(t)
	files := map[string]string{"init.yaml": "a: 1\n", "conf.d/10-x.conf": "b: 2\n"}
	n.WriteFiles(t, files)
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(n.Dir, rel))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", rel, got, err, want)
		}
	}
	got := n.ExpandDir([]string{"--config=DIR/init.yaml", "no dir", "DIR:DIR"})
	want := []string{"--config=" + n.Dir + "/init.yaml", "no dir", n.Dir + ":" + n.Dir}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExpandDir (-want +got):\n%s", diff)
	}
}

func TestWriteFileLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.yaml")
	for _, data := range []string{"first\n", "second\n"} {
		WriteFile(t, path, data)
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Errorf("read back %q, %v; want %q", got, err, data)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only the file", len(entries))
	}
}

func TestReadStatus(t *testing.T) {
	n := NewNode(t)
	if c, ok, err := n.ReadStatus(); ok || err != nil || c != (statusfile.Condition{}) {
		t.Errorf("before any report: %+v, %t, %v; want not ok and no error", c, ok, err)
	}
	r := status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonLocalInit, Message: "m"}
	// The status file as the components write it (statusfile.Condition,
	// demo.StatusFile's tests cover the writer).
	WriteFile(t, n.StatusPath(), `{"status":"True","reason":"`+r.Reason+`","message":"m","pid":12}`)
	c, ok, err := n.ReadStatus()
	if err != nil || !ok {
		t.Fatalf("after a report: ok %t, err %v", ok, err)
	}
	if diff := cmp.Diff(statusfile.Condition{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: 12}, c); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	WriteFile(t, n.StatusPath(), "{half")
	if _, _, err := n.ReadStatus(); err == nil || !strings.Contains(err.Error(), "status file") {
		t.Errorf("garbage status file: error %v, want one naming the status file", err)
	}
}

func TestGetConfigz(t *testing.T) {
	type body struct {
		Config map[string]int `json:"cfg"`
	}
	for _, tc := range []struct {
		name    string
		code    int
		body    string
		want    body
		wantErr string
	}{
		{name: "ok", code: http.StatusOK, body: `{"cfg":{"maxPods":3}}`, want: body{Config: map[string]int{"maxPods": 3}}},
		{name: "no config yet", code: http.StatusServiceUnavailable, body: "no config in use yet", wantErr: "/configz: HTTP 503: no config in use yet"},
		{name: "not JSON", code: http.StatusOK, body: `{"cfg":`, wantErr: "/configz: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/configz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := GetConfigz[body](strings.TrimPrefix(srv.URL, "http://"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(body{}, got); diff != "" {
					t.Errorf("value with an error is not zero (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GetConfigz (-want +got):\n%s", diff)
			}
		})
	}
}
