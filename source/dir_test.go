package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
)

func types(s string) k8stypes.UID { return k8stypes.UID(s) }

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const cmYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  namespace: kube-system
  name: kubelet-a
  uid: uid-a
data:
  kubelet: |
    apiVersion: kubelet.config.k8s.io/v1beta1
    kind: KubeletConfiguration
`

func TestDirAssigned(t *testing.T) {
	dir := t.TempDir()
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := d.Assigned(ctx)
	if err != nil || a.Source != nil || a.ConfigMap != nil {
		t.Fatalf("empty folder = %+v, %v; want the empty assignment", a, err)
	}

	write(t, filepath.Join(dir, ConfigMapsDir, "a.yaml"), cmYAML)
	write(t, filepath.Join(dir, ConfigMapsDir, "README.md"), "not a configmap")
	write(t, filepath.Join(dir, AssignmentFile), "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n")
	a, err = d.Assigned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.Source.ConfigMap.KubeletConfigKey != "kubelet" || a.ConfigMap.Name != "kubelet-a" || a.ConfigMap.Kind != "ConfigMap" {
		t.Fatalf("resolved %+v / %+v", a.Source.ConfigMap, a.ConfigMap.ObjectMeta)
	}
	rv := a.Source.ConfigMap.ResourceVersion
	if rv == "" || rv != a.ConfigMap.ResourceVersion {
		t.Fatalf("resourceVersion %q / %q", rv, a.ConfigMap.ResourceVersion)
	}
	// An edit in place is a new resourceVersion.
	write(t, filepath.Join(dir, ConfigMapsDir, "a.yaml"), cmYAML+"    kubeAPIQPS: 7\n")
	a2, err := d.Assigned(ctx)
	if err != nil || a2.Source.ConfigMap.ResourceVersion == rv {
		t.Fatalf("edit kept resourceVersion %q (err %v)", rv, err)
	}

	for _, tc := range []struct{ name, assignment, want string }{
		{"all nil", "{}", "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{"wrong uid", "configMap: {namespace: kube-system, name: kubelet-a, uid: other}", "invalid NodeConfigSource.ConfigMap, uid other and kube-system/kubelet-a do not refer to the same object (its uid is uid-a)"},
		{"absent", "configMap: {namespace: kube-system, name: nope, uid: u}", "ConfigMap kube-system/nope does not exist"},
		{"missing key", "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, kubeletConfigKey: x}", `ConfigMap kube-system/kubelet-a (UID: uid-a) has no key "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(t, filepath.Join(dir, AssignmentFile), tc.assignment)
			_, err := d.Assigned(ctx)
			var ie *nodeapi.InvalidError
			if !errors.As(err, &ie) || err.Error() != tc.want {
				t.Fatalf("error %v, want *nodeapi.InvalidError %q", err, tc.want)
			}
		})
	}
	write(t, filepath.Join(dir, AssignmentFile), "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, typo: 1}")
	if _, err := d.Assigned(ctx); err == nil {
		t.Fatal("unknown field in the assignment: want error")
	}
	write(t, filepath.Join(dir, AssignmentFile), "")
	if a, err := d.Assigned(ctx); err != nil || a.Source != nil {
		t.Fatalf("empty assignment file = %+v, %v", a, err)
	}
}

func TestDirRunNotifiesOnChange(t *testing.T) {
	dir := t.TempDir()
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet", PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 1)
	done := make(chan error)
	go func() {
		done <- d.Run(ctx, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}()
	// The first call comes when Run has taken its first look.
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no initial notification within 10s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		write(t, filepath.Join(dir, AssignmentFile), fmt.Sprintf("configMap: {namespace: a, name: b, uid: c%d}", i))
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no change notification within 10s")
			}
			continue
		}
		break
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}
}

func TestNewDirOptions(t *testing.T) {
	for _, o := range []DirOptions{{}, {Path: "x"}, {PayloadKey: "k"}, {Path: "x", PayloadKey: "k", PollInterval: -1}} {
		if _, err := NewDir(o); err == nil {
			t.Errorf("NewDir(%+v): want error", o)
		}
	}
}

// newTestDir returns a Dir source on a new folder that holds
// configmaps/kubelet-a.yaml (cmYAML) and an assignment of it.
func newTestDir(t *testing.T) (*Dir, string) {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, ConfigMapsDir, "kubelet-a.yaml"), cmYAML)
	write(t, filepath.Join(dir, AssignmentFile), "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n")
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	return d, dir
}

// assignedError calls Assigned and returns its error, failing when there
// is none or when its type is not the one wanted.
func assignedError(t *testing.T, d *Dir, wantInvalid bool) error {
	t.Helper()
	a, err := d.Assigned(context.Background())
	if err == nil {
		t.Fatalf("Assigned = %+v, nil; want an error", a.Source)
	}
	var ie *nodeapi.InvalidError
	if errors.As(err, &ie) != wantInvalid {
		t.Fatalf("error %q: *nodeapi.InvalidError is %v, want %v", err, !wantInvalid, wantInvalid)
	}
	return err
}

// TestDirMissingDirectory: a missing folder is an error that names it,
// never the empty assignment.
func TestDirMissingDirectory(t *testing.T) {
	t.Run("source folder", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		d, err := NewDir(DirOptions{Path: missing, PayloadKey: "kubelet"})
		if err != nil {
			t.Fatal(err)
		}
		err = assignedError(t, d, false)
		if want := "directory source " + missing + " does not exist"; err.Error() != want {
			t.Fatalf("error %q, want %q", err, want)
		}
	})
	t.Run("configmaps folder", func(t *testing.T) {
		d, dir := newTestDir(t)
		if err := os.RemoveAll(filepath.Join(dir, ConfigMapsDir)); err != nil {
			t.Fatal(err)
		}
		err := assignedError(t, d, false)
		want := "directory " + filepath.Join(dir, ConfigMapsDir) + " does not exist (looking for ConfigMap kube-system/kubelet-a)"
		if err.Error() != want {
			t.Fatalf("error %q, want %q", err, want)
		}
		// Without an assignment there is nothing to look for.
		write(t, filepath.Join(dir, AssignmentFile), "")
		if a, err := d.Assigned(context.Background()); err != nil || a.Source != nil {
			t.Fatalf("empty assignment = %+v, %v", a.Source, err)
		}
	})
}

// TestDirStrictAssignment: the assignment file is decoded as strictly as
// the config itself: field names are case-sensitive, and unknown or
// duplicate fields and extra documents are errors naming the file and the
// field.
func TestDirStrictAssignment(t *testing.T) {
	const ok = "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}"
	for _, tc := range []struct{ name, assignment, want string }{
		{"wrong case uid", "configMap: {namespace: kube-system, name: kubelet-a, Uid: uid-a}", `unknown field "configMap.Uid"`},
		{"wrong case configMap", "configmap: {namespace: kube-system, name: kubelet-a, uid: uid-a}", `unknown field "configmap"`},
		{"wrong case key", "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, KubeletConfigKey: kubelet}", `unknown field "configMap.KubeletConfigKey"`},
		{"misspelt", "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, kubeletConfigkey: kubelet}", `unknown field "configMap.kubeletConfigkey"`},
		{"two unknown", "{Configmap: {}, extra: 1}", `unknown field "Configmap"; unknown field "extra"`},
		{"duplicate", "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, uid: uid-b}", `yaml: line 1: key "uid" already set in map`},
		{"duplicate JSON", `{"configMap": {"namespace": "kube-system", "namespace": "x", "name": "kubelet-a", "uid": "uid-a"}}`, `yaml: line 1: key "namespace" already set in map`},
		{"two documents", ok + "\n---\n" + ok, "more than one YAML document"},
		{"second document after an empty one", "---\n---\n" + ok, "more than one YAML document"},
		{"wrong type", "configMap: {namespace: kube-system, name: kubelet-a, uid: 5}", "json: cannot unmarshal number into Go struct field ConfigMapNodeConfigSource.configMap.uid of type types.UID"},
		{"list", "- " + ok, "json: cannot unmarshal array into Go value of type v1.NodeConfigSource"},
		{"syntax", "configMap: {uid: c", "yaml: line 1: did not find expected ',' or '}'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, dir := newTestDir(t)
			path := filepath.Join(dir, AssignmentFile)
			write(t, path, tc.assignment)
			err := assignedError(t, d, true)
			if want := "invalid NodeConfigSource in " + path + ": " + tc.want; err.Error() != want {
				t.Fatalf("error\n%s\nwant\n%s", err, want)
			}
		})
	}
	// What stays accepted: JSON, a leading or trailing document marker, a
	// kubeletConfigKey, comments.
	for _, accepted := range []string{
		`{"configMap": {"namespace": "kube-system", "name": "kubelet-a", "uid": "uid-a"}}`,
		"---\n" + ok + "\n", ok + "\n---\n", ok + "\n...\n",
		"# the kubelet config\nconfigMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, kubeletConfigKey: kubelet}",
	} {
		d, dir := newTestDir(t)
		write(t, filepath.Join(dir, AssignmentFile), accepted)
		if a, err := d.Assigned(context.Background()); err != nil || a.ConfigMap == nil {
			t.Errorf("assignment %q: %+v, %v; want kubelet-a", accepted, a.Source, err)
		}
	}
}

// TestDirStrictConfigMap: a ConfigMap file is decoded strictly, and must
// name its object in full (namespace, name, uid); every error names the
// file.
func TestDirStrictConfigMap(t *testing.T) {
	const meta = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: kube-system\n  name: kubelet-a\n"
	const data = "data:\n  kubelet: x\n"
	for _, tc := range []struct{ name, file, want string }{
		{"wrong case uid", meta + "  Uid: uid-a\n" + data, `unknown field "metadata.Uid"`},
		{"upper case uid", meta + "  UID: uid-a\n" + data, `unknown field "metadata.UID"`},
		{"wrong case data", meta + "  uid: uid-a\nData:\n  kubelet: x\n", `unknown field "Data"`},
		{"wrong case kind", "apiVersion: v1\nKind: ConfigMap\nmetadata: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n" + data, `unknown field "Kind"`},
		{"misspelt metadata", "apiVersion: v1\nkind: ConfigMap\nmetdata: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n" + data, `unknown field "metdata"`},
		{"misspelt annotations", meta + "  uid: uid-a\n  anotations: {a: b}\n" + data, `unknown field "metadata.anotations"`},
		{"duplicate", meta + "  uid: uid-a\n  uid: uid-b\n" + data, `yaml: line 7: key "uid" already set in map`},
		{"two documents", meta + "  uid: uid-a\n" + data + "---\n" + meta + "  uid: uid-b\n" + data, "more than one YAML document"},
		{"no uid", meta + data, "all of metadata.namespace, metadata.name and metadata.uid must be non-empty, missing: metadata.uid"},
		{"empty uid", meta + "  uid: ''\n" + data, "all of metadata.namespace, metadata.name and metadata.uid must be non-empty, missing: metadata.uid"},
		{"no metadata", "apiVersion: v1\nkind: ConfigMap\n" + data, "all of metadata.namespace, metadata.name and metadata.uid must be non-empty, missing: metadata.namespace, metadata.name, metadata.uid"},
		{"kind", "apiVersion: v1\nkind: Secret\nmetadata: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n" + data, `kind is "Secret", want ConfigMap`},
		{"apiVersion", "apiVersion: apps/v1\nkind: ConfigMap\nmetadata: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n" + data, `apiVersion is "apps/v1", want v1`},
		{"number in data", meta + "  uid: uid-a\ndata:\n  kubelet: 5\n", "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"},
		{"empty", "", "the file is empty"},
		{"null", "null\n", "the file is empty"},
		{"list", "- a\n", "json: cannot unmarshal array into Go value of type v1.ConfigMap"},
		{"syntax", "metadata: {uid: a\n", "yaml: line 1: did not find expected ',' or '}'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, dir := newTestDir(t)
			path := filepath.Join(dir, ConfigMapsDir, "kubelet-a.yaml")
			write(t, path, tc.file)
			err := assignedError(t, d, false)
			if want := "invalid ConfigMap in " + path + ": " + tc.want; err.Error() != want {
				t.Fatalf("error\n%s\nwant\n%s", err, want)
			}
		})
	}
}

// TestDirReadsOnlyTheAssignedFile: a file named after the assigned
// ConfigMap is the only ConfigMap file read; other files, even broken
// ones, do not matter. Files named otherwise (the older layout) are still
// found.
func TestDirReadsOnlyTheAssignedFile(t *testing.T) {
	ctx := context.Background()
	t.Run("named file", func(t *testing.T) {
		d, dir := newTestDir(t)
		write(t, filepath.Join(dir, ConfigMapsDir, "broken.yaml"), "{{{ not yaml")
		write(t, filepath.Join(dir, ConfigMapsDir, "no-uid.yaml"), "metadata: {namespace: kube-system, name: no-uid}\n")
		a, err := d.Assigned(ctx)
		if err != nil || a.ConfigMap == nil || a.ConfigMap.Name != "kubelet-a" {
			t.Fatalf("Assigned = %+v, %v; want kubelet-a", a.Source, err)
		}
	})
	t.Run("named .yml and .json", func(t *testing.T) {
		for _, ext := range []string{".yml", ".json"} {
			d, dir := newTestDir(t)
			if err := os.Rename(filepath.Join(dir, ConfigMapsDir, "kubelet-a.yaml"), filepath.Join(dir, ConfigMapsDir, "kubelet-a"+ext)); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, ConfigMapsDir, "broken.yaml"), "{{{ not yaml")
			if a, err := d.Assigned(ctx); err != nil || a.ConfigMap == nil {
				t.Fatalf("%s: Assigned = %+v, %v; want kubelet-a", ext, a.Source, err)
			}
		}
	})
	t.Run("named twice", func(t *testing.T) {
		d, dir := newTestDir(t)
		write(t, filepath.Join(dir, ConfigMapsDir, "kubelet-a.json"), `{"metadata": {"namespace": "kube-system", "name": "kubelet-a", "uid": "uid-a"}, "data": {"kubelet": "x"}}`)
		err := assignedError(t, d, false)
		cms := filepath.Join(dir, ConfigMapsDir)
		want := "ConfigMap kube-system/kubelet-a is defined twice: " + filepath.Join(cms, "kubelet-a.json") + " and " + filepath.Join(cms, "kubelet-a.yaml")
		if err.Error() != want {
			t.Fatalf("error\n%s\nwant\n%s", err, want)
		}
	})
	t.Run("older layout", func(t *testing.T) {
		d, dir := newTestDir(t)
		cms := filepath.Join(dir, ConfigMapsDir)
		// kubelet-a.yaml holds the namesake in another namespace; the
		// assigned one is in a file named otherwise.
		write(t, filepath.Join(cms, "kubelet-a.yaml"), strings.Replace(cmYAML, "kube-system", "default", 1))
		write(t, filepath.Join(cms, "x.yaml"), cmYAML)
		a, err := d.Assigned(ctx)
		if err != nil || a.ConfigMap == nil || a.ConfigMap.Namespace != "kube-system" {
			t.Fatalf("Assigned = %+v, %v; want kube-system/kubelet-a", a.Source, err)
		}
		// Then every file is read, strictly, and duplicates are found.
		write(t, filepath.Join(cms, "y.yaml"), cmYAML)
		err = assignedError(t, d, false)
		if want := "ConfigMap kube-system/kubelet-a is defined twice: " + filepath.Join(cms, "x.yaml") + " and " + filepath.Join(cms, "y.yaml"); err.Error() != want {
			t.Fatalf("error\n%s\nwant\n%s", err, want)
		}
		write(t, filepath.Join(cms, "y.yaml"), "metadata: {namespace: kube-system, name: other}\n")
		err = assignedError(t, d, false)
		if want := "invalid ConfigMap in " + filepath.Join(cms, "y.yaml") + ": all of metadata.namespace, metadata.name and metadata.uid must be non-empty, missing: metadata.uid"; err.Error() != want {
			t.Fatalf("error\n%s\nwant\n%s", err, want)
		}
	})
	t.Run("name is not a path", func(t *testing.T) {
		// A name with a slash never selects a file outside configmaps/:
		// it is no ConfigMap name (nodeapi.Validate).
		d, dir := newTestDir(t)
		write(t, filepath.Join(dir, "evil.yaml"), strings.Replace(cmYAML, "name: kubelet-a", "name: ../evil", 1))
		write(t, filepath.Join(dir, AssignmentFile), "configMap: {namespace: kube-system, name: ../evil, uid: uid-a}")
		err := assignedError(t, d, true)
		if want := `invalid NodeConfigSource.ConfigMap, name "../evil": a lowercase RFC 1123 subdomain`; !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("error %q, want it to start with %q", err, want)
		}
	})
}

// TestDirFailsLoudly is the table of misnamed and misplaced files: each is
// an error naming the file and what is wrong, never the empty assignment
// or a bare "does not exist".
func TestDirFailsLoudly(t *testing.T) {
	const assign = "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n"
	tests := []struct {
		name  string
		files map[string]string // path -> content; "DIR" makes a directory
		// wantErr is the exact error, $D the source folder; "" is the
		// empty assignment.
		wantErr     string
		wantInvalid bool
	}{
		{name: "assignment.yml", files: map[string]string{"assignment.yml": assign},
			wantErr: "directory source $D has no assignment.yaml but has assignment.yml: the assignment file must be named assignment.yaml (no assignment.yaml is the empty assignment)"},
		{name: "Assignment.yaml and assignments.json", files: map[string]string{"Assignment.yaml": assign, "assignments.json": "{}"},
			wantErr: "directory source $D has no assignment.yaml but has Assignment.yaml, assignments.json: the assignment file must be named assignment.yaml (no assignment.yaml is the empty assignment)"},
		{name: "misspelt", files: map[string]string{"assigment.yaml": assign},
			wantErr: "directory source $D has no assignment.yaml but has assigment.yaml: the assignment file must be named assignment.yaml (no assignment.yaml is the empty assignment)"},
		{name: "backup only", files: map[string]string{"assignment.yaml.bak": assign},
			wantErr: "directory source $D has no assignment.yaml but has assignment.yaml.bak: the assignment file must be named assignment.yaml (no assignment.yaml is the empty assignment)"},
		{name: "a temporary dot-file is no assignment", files: map[string]string{".assignment.yaml.tmp": assign, "README.md": "x"}},
		{name: "a backup next to the assignment is fine", files: map[string]string{"assignment.yaml": "", "assignment.yaml.bak": assign}},
		{name: "configmap/", files: map[string]string{"assignment.yaml": assign, "configmap/kubelet-a.yaml": cmYAML},
			wantErr: "directory $D/configmaps does not exist (looking for ConfigMap kube-system/kubelet-a); found configmap: the folder must be named configmaps"},
		{name: "ConfigMaps/", files: map[string]string{"assignment.yaml": assign, "ConfigMaps/kubelet-a.yaml": cmYAML},
			wantErr: "directory $D/configmaps does not exist (looking for ConfigMap kube-system/kubelet-a); found ConfigMaps: the folder must be named configmaps"},
		{name: "another extension", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.yaml.bak": cmYAML, "configmaps/kubelet-a.txt": cmYAML, "configmaps/other.txt": "x"},
			wantErr: `ConfigMap kube-system/kubelet-a does not exist: $D/configmaps/kubelet-a.txt is not read (a ConfigMap file is a regular file named <name>.yaml, .yml or .json); ` +
				`$D/configmaps/kubelet-a.yaml.bak is not read (a ConfigMap file is a regular file named <name>.yaml, .yml or .json)`, wantInvalid: true},
		{name: "a directory named after it", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.yaml": "DIR"},
			wantErr: `ConfigMap kube-system/kubelet-a does not exist: $D/configmaps/kubelet-a.yaml is not read (a ConfigMap file is a regular file named <name>.yaml, .yml or .json)`, wantInvalid: true},
		{name: "named after it, holds another", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.yaml": strings.Replace(cmYAML, "name: kubelet-a", "name: kubelet-b", 1)},
			wantErr: `ConfigMap kube-system/kubelet-a does not exist: $D/configmaps/kubelet-a.yaml holds ConfigMap "kube-system/kubelet-b" instead`, wantInvalid: true},
		{name: "named after it, in another namespace", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.json": strings.Replace(cmYAML, "namespace: kube-system", "namespace: default", 1)},
			wantErr: `ConfigMap kube-system/kubelet-a does not exist: $D/configmaps/kubelet-a.json holds ConfigMap "default/kubelet-a" instead`, wantInvalid: true},
		{name: "absent, nothing near", files: map[string]string{"assignment.yaml": assign, "configmaps/other.yaml": strings.Replace(cmYAML, "name: kubelet-a", "name: other", 1)},
			wantErr: `ConfigMap kube-system/kubelet-a does not exist`, wantInvalid: true},
		{name: "misspelt data key", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.yaml": strings.Replace(cmYAML, "  kubelet: |", "  kubelte: |", 1)},
			wantErr: `ConfigMap kube-system/kubelet-a (UID: uid-a) has no key "kubelet"`, wantInvalid: true},
		{name: "misspelt field of the ConfigMap", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.yaml": strings.Replace(cmYAML, "  uid: uid-a", "  UID: uid-a", 1)},
			wantErr: `invalid ConfigMap in $D/configmaps/kubelet-a.yaml: unknown field "metadata.UID"`},
		{name: "ConfigMap without uid", files: map[string]string{"assignment.yaml": assign, "configmaps/kubelet-a.yaml": strings.Replace(cmYAML, "  uid: uid-a\n", "", 1)},
			wantErr: `invalid ConfigMap in $D/configmaps/kubelet-a.yaml: all of metadata.namespace, metadata.name and metadata.uid must be non-empty, missing: metadata.uid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for path, content := range tt.files {
				if content == "DIR" {
					if err := os.MkdirAll(filepath.Join(dir, path), 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				write(t, filepath.Join(dir, path), content)
			}
			d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
			if err != nil {
				t.Fatal(err)
			}
			a, err := d.Assigned(context.Background())
			if tt.wantErr == "" {
				if err != nil || a.Source != nil {
					t.Fatalf("Assigned = %+v, %v; want the empty assignment", a.Source, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Assigned = %+v, nil; want error %q", a.Source, tt.wantErr)
			}
			if want := strings.ReplaceAll(tt.wantErr, "$D", dir); err.Error() != want {
				t.Fatalf("error\n%s\nwant\n%s", err, want)
			}
			var ie *nodeapi.InvalidError
			if errors.As(err, &ie) != tt.wantInvalid {
				t.Errorf("*nodeapi.InvalidError: %v, want %v", !tt.wantInvalid, tt.wantInvalid)
			}
		})
	}
	t.Run("source path is a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		write(t, path, assign)
		d, err := NewDir(DirOptions{Path: path, PayloadKey: "kubelet"})
		if err != nil {
			t.Fatal(err)
		}
		if err := assignedError(t, d, false); err.Error() != "directory source "+path+" is not a directory" {
			t.Fatalf("error %q", err)
		}
	})
}

// TestDirRunNoticesMisnamedFiles: a misspelt assignment file that appears
// while Run polls changes the fingerprint, so that the next Assigned
// reports it.
func TestDirRunNoticesMisnamedFiles(t *testing.T) {
	dir := t.TempDir()
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	before := d.fingerprint()
	write(t, filepath.Join(dir, "assignment.yml"), "configMap: {namespace: a, name: b, uid: c}\n")
	if d.fingerprint() == before {
		t.Fatal("a new assignment.yml does not change the fingerprint: Run would not call changed")
	}
}
