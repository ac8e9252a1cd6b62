package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// dirFuzzSeeds are assignment and ConfigMap file contents, good and bad.
var dirFuzzSeeds = []string{
	"", "null", "~", "{}", "[]", "- a", `"x"`, "\xff", "\t", "---", "...", "---\n---\n", "# comment",
	"configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}",
	"configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, kubeletConfigKey: kubelet, resourceVersion: '5'}",
	`{"configMap":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a"}}`,
	"configMap: {namespace: kube-system, name: kubelet-a, Uid: uid-a}",
	"configmap: {namespace: kube-system, name: kubelet-a, uid: uid-a}",
	"configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, uid: b}",
	"configMap: {namespace: kube-system, name: kubelet-a, uid: 5}",
	"configMap: {namespace: kube-system, name: ../x, uid: uid-a}",
	"configMap: {<<: {uid: c}, uid: d}",
	"a: &x [*x]",
	"configMap: {uid: c}\n---\nconfigMap: {uid: d}\n",
	cmYAML,
	cmYAML + "---\n" + cmYAML,
	strings.Replace(cmYAML, "uid: uid-a", "Uid: uid-a", 1),
	strings.Replace(cmYAML, "uid: uid-a\n", "", 1),
	strings.Replace(cmYAML, "kind: ConfigMap", "kind: Secret", 1),
	strings.Replace(cmYAML, "apiVersion: v1", "apiVersion: apps/v1", 1),
	strings.Replace(cmYAML, "data:", "Data:", 1),
	strings.Replace(cmYAML, "name: kubelet-a", "name: kubelet-b", 1),
	strings.Replace(cmYAML, "name: kubelet-a", `name: "kubelet-a\nx"`, 1),
	strings.Replace(cmYAML, "namespace: kube-system", "namespace: default", 1),
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a","creationTimestamp":"2026-01-02T03:04:05Z"},"data":{"kubelet":"x"},"binaryData":{"b":"AAE="}}`,
	`{"metadata":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a","managedFields":[{"fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},"data":{"kubelet":"x"}}`,
}

// The shapes FuzzDirFiles lays its files out in: what a folder given to
// --source-dir may hold besides plain files.
const (
	shapePlain      = iota // two regular files
	shapeLinked            // both files links through ..data, a ConfigMap volume's layout
	shapeOversize          // the ConfigMap file grown (sparse) past merge.MaxDocumentSize
	shapeFIFO              // assignment.yaml a FIFO nobody writes
	shapeLinkToFIFO        // assignment.yaml a link to a FIFO
	numShapes
)

// FuzzDirFiles writes an assignment file and a ConfigMap file named after
// the ConfigMap the seeds assign, in one of the shapes above, and reads
// them through a Dir source. It must not panic or hang; an error is one
// line that names the file it is about (or is one of the assignment rules'
// own messages); a result is consistent with the rules, and comes only
// from regular files within the size limit.
func FuzzDirFiles(f *testing.F) {
	for _, a := range dirFuzzSeeds {
		f.Add([]byte(a), []byte(cmYAML), uint8(shapePlain))
	}
	for _, c := range dirFuzzSeeds {
		f.Add([]byte("configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}"), []byte(c), uint8(shapePlain))
	}
	for shape := range uint8(numShapes) {
		f.Add([]byte("configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}"), []byte(cmYAML), shape)
	}
	f.Fuzz(func(t *testing.T, assignment, configMap []byte, shape uint8) {
		shape %= numShapes
		dir := t.TempDir()
		assignmentPath := filepath.Join(dir, AssignmentFile)
		cmPath := filepath.Join(dir, ConfigMapsDir, "kubelet-a.yaml")
		if err := os.MkdirAll(filepath.Dir(cmPath), 0o755); err != nil {
			t.Fatal(err)
		}
		// Where the files' content goes: beside the links in
		// shapeLinked, else at their paths.
		at := func(p string) string { return p }
		if shape == shapeLinked {
			data := filepath.Join(dir, "..data")
			at = func(p string) string { return filepath.Join(data, strings.TrimPrefix(p, dir)) }
			if err := os.MkdirAll(filepath.Join(data, ConfigMapsDir), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{assignmentPath, cmPath} {
				if err := os.Symlink(at(p), p); err != nil {
					t.Fatal(err)
				}
			}
		}
		switch shape {
		case shapeFIFO, shapeLinkToFIFO:
			fifo := assignmentPath
			if shape == shapeLinkToFIFO {
				fifo = filepath.Join(dir, "fifo")
				if err := os.Symlink(fifo, assignmentPath); err != nil {
					t.Fatal(err)
				}
			}
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(at(assignmentPath), assignment, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(at(cmPath), configMap, 0o644); err != nil {
			t.Fatal(err)
		}
		if shape == shapeOversize {
			if err := os.Truncate(cmPath, merge.MaxDocumentSize+1+int64(len(configMap))); err != nil {
				t.Fatal(err)
			}
		}
		d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := d.Assigned(context.Background())
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error spans lines: %q", msg)
			}
			var ie *nodeapi.InvalidError
			named := strings.Contains(msg, assignmentPath) || strings.Contains(msg, cmPath)
			if !named && !(errors.As(err, &ie) && (strings.HasPrefix(msg, "invalid NodeConfigSource") || strings.HasPrefix(msg, "ConfigMap "))) {
				t.Fatalf("error names neither file nor is an assignment rule: %q", msg)
			}
			return
		}
		switch shape {
		case shapeFIFO, shapeLinkToFIFO:
			t.Fatalf("a FIFO as %s was read: %+v", AssignmentFile, a.Source)
		case shapeOversize:
			if a.ConfigMap != nil {
				t.Fatalf("a ConfigMap file over %d bytes was read: %+v", merge.MaxDocumentSize, a.ConfigMap.ObjectMeta)
			}
		}
		if a.Source == nil {
			if a.ConfigMap != nil {
				t.Fatalf("empty assignment with a ConfigMap: %+v", a.ConfigMap)
			}
			return
		}
		ref, cm := a.Source.ConfigMap, a.ConfigMap
		if ref == nil || cm == nil {
			t.Fatalf("assignment %+v with ConfigMap %v", a.Source, cm)
		}
		if cm.Namespace != ref.Namespace || cm.Name != ref.Name || cm.UID != ref.UID || cm.UID == "" ||
			cm.ResourceVersion != ref.ResourceVersion || cm.ResourceVersion == "" ||
			cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
			t.Fatalf("assignment %+v resolved to %+v %+v", ref, cm.TypeMeta, cm.ObjectMeta)
		}
		if _, ok := cm.Data[ref.KubeletConfigKey]; !ok {
			t.Fatalf("key %q not in %v", ref.KubeletConfigKey, cm.Data)
		}
	})
}

// FuzzDecodeDirFile feeds the same bytes to both strict file decoders: no
// panic, one-line errors, and what either accepts survives a round trip
// through JSON unchanged.
func FuzzDecodeDirFile(f *testing.F) {
	for _, s := range dirFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := decodeDirAssignment(data)
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("assignment error spans lines: %q", err)
		}
		if err == nil && src != nil {
			roundTrip(t, data, src, func(b []byte) (any, error) { return decodeDirAssignment(b) })
		}
		cm, err := decodeDirConfigMap(data)
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("ConfigMap error spans lines: %q", err)
		}
		if err == nil {
			if cm.Namespace == "" || cm.Name == "" || cm.UID == "" || cm.ResourceVersion == "" {
				t.Fatalf("accepted a ConfigMap without namespace, name, uid or resourceVersion: %+v", cm.ObjectMeta)
			}
			roundTrip(t, data, cm, func(b []byte) (any, error) { return decodeDirConfigMap(b) })
		}
	})
}

// roundTrip checks that v, decoded from data, encodes to JSON that decode
// turns into a value with the same JSON.
func roundTrip(t *testing.T, data []byte, v any, decode func([]byte) (any, error)) {
	t.Helper()
	first, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %+v: %v", v, err)
	}
	back, err := decode(first)
	if err != nil {
		t.Fatalf("decoding %s (re-encoded from %q): %v", first, data, err)
	}
	second, err := json.Marshal(back)
	if err != nil {
		t.Fatalf("marshal %+v: %v", back, err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip of %q:\n%s\n%s", data, first, second)
	}
}
