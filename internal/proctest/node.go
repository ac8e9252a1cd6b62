package proctest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/internal/statusfile"
	"github.com/dynconfig/dynconfig/source"
)

// Node is the files of one simulated node under a directory: a state dir,
// a directory source, a status file and room for the local config layers.
type Node struct {
	// Dir holds everything; NewNode makes it a t.TempDir().
	Dir string
}

// NewNode returns a Node in a new temporary directory of the test, with
// the directory source's configmaps/ directory made.
func NewNode(t testing.TB) Node {
	t.Helper()
	n := Node{Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(n.SourceDir(), source.ConfigMapsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

// StateDir is the component's --dynamic-config-dir.
func (n Node) StateDir() string { return filepath.Join(n.Dir, "state") }

// SourceDir is the directory source, --source-dir.
func (n Node) SourceDir() string { return filepath.Join(n.Dir, "source") }

// StatusPath is the --status-file.
func (n Node) StatusPath() string { return filepath.Join(n.Dir, "configok.json") }

// File is the path of name (which may have directories) under Dir.
func (n Node) File(name string) string { return filepath.Join(n.Dir, name) }

// Args are the flags every test passes, then extra: state dir, directory
// source polled often, status file, a free port.
func (n Node) Args(extra ...string) []string {
	return append([]string{
		"--dynamic-config-dir=" + n.StateDir(),
		"--source-dir=" + n.SourceDir(),
		"--source-poll-interval=50ms",
		"--status-file=" + n.StatusPath(),
		"--port=0",
	}, extra...)
}

// WriteFiles writes each file of files (a path relative to Dir, which may
// have directories, to its content) with WriteFile, making the directories.
func (n Node) WriteFiles(t testing.TB, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		path := n.File(rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		WriteFile(t, path, content)
	}
}

// ExpandDir returns ss with every "DIR" replaced by Dir, for test tables
// written before the node's directory exists.
func (n Node) ExpandDir(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, strings.ReplaceAll(s, "DIR", n.Dir))
	}
	return out
}

// WriteConfigMap writes cm into the directory source, as NAME.yaml.
func (n Node) WriteConfigMap(t testing.TB, cm *corev1.ConfigMap) {
	t.Helper()
	data, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(n.SourceDir(), source.ConfigMapsDir, cm.Name+".yaml"), string(data))
}

// WriteAssignment points the directory source's assignment at src.
func (n Node) WriteAssignment(t testing.TB, src *corev1.NodeConfigSource) {
	t.Helper()
	data, err := yaml.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(n.SourceDir(), source.AssignmentFile), string(data))
}

// ReadStatus reads the status file; ok is false while there is none.
func (n Node) ReadStatus() (statusfile.Condition, bool, error) {
	return statusfile.Read(n.StatusPath())
}

// WriteFile writes data to path through a dot-file and a rename, so the
// directory source (which skips dot-files) never reads half a file.
func WriteFile(t testing.TB, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Get GETs path from the server at addr (HOST:PORT) and returns the body
// and status code.
func Get(addr, path string) (string, int, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode, err
}

// GetConfigz fetches /configz from addr and decodes it into an R, the
// component's body type.
func GetConfigz[R any](addr string) (R, error) {
	var z, zero R
	body, code, err := Get(addr, "/configz")
	if err != nil {
		return zero, err
	}
	if code != http.StatusOK {
		return zero, fmt.Errorf("/configz: HTTP %d: %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &z); err != nil {
		return zero, fmt.Errorf("/configz: %w", err)
	}
	return z, nil
}
