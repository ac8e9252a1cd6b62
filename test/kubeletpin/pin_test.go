package kubeletpin

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"

	"github.com/dynconfig/dynconfig/components/kubelet/changeclass"
)

// moduleDir is the source dir of module (the version the test module
// builds with).
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatalf("go list -m %s: no source dir", module)
	}
	return dir
}

// jsonFields are the JSON names of KubeletConfiguration's fields.
func jsonFields() map[string]bool {
	out := map[string]bool{}
	typ := reflect.TypeFor[config]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// source is one upstream source of a Field.Upstream.
type source struct {
	module, file, symbol, quote string
}

var sourceRE = regexp.MustCompile(`^(?:(k8s\.io/\S+) )?(\S+\.go):(\S+)(?: \("(.+)"\))?$`)

func parseUpstream(s string) ([]source, error) {
	var out []source
	for part := range strings.SplitSeq(s, "; ") {
		m := sourceRE.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("%q is not [module ]file.go:symbol[ (\"quote\")]", part)
		}
		src := source{module: m[1], file: m[2], symbol: m[3], quote: m[4]}
		if src.module == "" {
			src.module, src.file = "k8s.io/kubernetes", filepath.Join("pkg/kubelet", src.file)
		}
		out = append(out, src)
	}
	return out, nil
}

// declares reports whether f declares symbol: "F" a function,
// "(*T).M" or "(T).M" a method, "T.F" a field of struct T.
func declares(f *ast.File, symbol string) bool {
	recv, name := "", symbol
	if strings.HasPrefix(symbol, "(") {
		r, n, ok := strings.Cut(symbol[1:], ").")
		if !ok {
			return false
		}
		recv, name = r, n
	} else if typ, field, ok := strings.Cut(symbol, "."); ok {
		return hasField(f, typ, field)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != name {
			continue
		}
		if recv == "" && fd.Recv == nil {
			return true
		}
		if recv != "" && fd.Recv != nil && len(fd.Recv.List) == 1 && exprString(fd.Recv.List[0].Type) == recv {
			return true
		}
	}
	return false
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.Ident:
		return e.Name
	}
	return fmt.Sprintf("%T", e)
}

func hasField(f *ast.File, typ, field string) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typ {
			return true
		}
		if st, ok := ts.Type.(*ast.StructType); ok {
			for _, fl := range st.Fields.List {
				for _, n := range fl.Names {
					found = found || n.Name == field
				}
			}
		}
		return false
	})
	return found
}

// stateFileConsts maps the value of each string constant of the kubelet's
// cm tree that names the checkpoint of a manager's NewCheckpointState (the
// checkpoints checked against the config at start) to its file:name.
func stateFileConsts(t *testing.T, kubernetes string) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Join(kubernetes, "pkg/kubelet/cm")
	constRE := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(\w+)\s*=\s*"([^"]+)"\s*$`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range constRE.FindAllStringSubmatch(string(data), -1) {
			if regexp.MustCompile(`NewCheckpointState\([^)]*\b` + m[1] + `\b`).Match(data) {
				out[m[2]] = filepath.ToSlash(strings.TrimPrefix(path, kubernetes+"/")) + ":" + m[1]
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every Path of the table is a field of the kubelet's config, every state
// file is the name a kubelet manager gives its checkpoint, and every
// upstream source named is in the module, quotation included.
func TestTablePinned(t *testing.T) {
	fields := jsonFields()
	dirs := map[string]string{}
	dir := func(module string) string {
		if dirs[module] == "" {
			dirs[module] = moduleDir(t, module)
		}
		return dirs[module]
	}
	consts := stateFileConsts(t, dir("k8s.io/kubernetes"))
	if len(consts) < 2 {
		t.Fatalf("found only %v as checkpoint names in the kubelet's cm tree: the scan is broken", consts)
	}
	t.Logf("checkpoint names in the kubelet's cm tree: %v", consts)
	for _, f := range changeclass.Table() {
		if !fields[f.Path] {
			t.Errorf("%s: not a JSON field of KubeletConfiguration", f.Path)
		}
		for _, name := range f.StateFiles {
			if _, ok := consts[name]; !ok {
				t.Errorf("%s: state file %q is no checkpoint name of the kubelet (it has %v)", f.Path, name, consts)
			}
		}
		srcs, err := parseUpstream(f.Upstream)
		if err != nil || len(srcs) == 0 {
			t.Errorf("%s: Upstream: %v", f.Path, err)
			continue
		}
		for _, s := range srcs {
			path := filepath.Join(dir(s.module), s.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: Upstream %s %s: %v", f.Path, s.module, s.file, err)
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, data, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if !declares(file, s.symbol) {
				t.Errorf("%s: Upstream %s %s declares no %s", f.Path, s.module, s.file, s.symbol)
			}
			if s.quote != "" && !strings.Contains(string(data), s.quote) {
				t.Errorf("%s: Upstream %s %s does not say %q", f.Path, s.module, s.file, s.quote)
			}
		}
	}
	for _, name := range []string{changeclass.CPUManagerStateFile, changeclass.MemoryManagerStateFile} {
		if _, ok := consts[name]; !ok {
			t.Errorf("changeclass names %q, no checkpoint of the kubelet", name)
		}
	}
	// A new manager checkpoint checked at start is a new source of Drain
	// fields: read its checks and extend the table (changeclass's doc).
	named := map[string]bool{}
	for _, f := range changeclass.Table() {
		for _, name := range f.StateFiles {
			named[name] = true
		}
	}
	for name, where := range consts {
		if !named[name] {
			t.Errorf("the kubelet has a new manager checkpoint %q (%s) that no field of the table names: derive its fields", name, where)
		}
	}
}

// The managers' checkpoints refuse a policy other than theirs with the
// message the package doc quotes, and their remedy is the drain and the
// removal of the file changeclass names.
func TestPolicyMismatchRefused(t *testing.T) {
	log := logger(t)
	root := t.TempDir()
	if _, err := cpustate.NewCheckpointState(log, root, changeclass.CPUManagerStateFile, "none", containermap.NewContainerMap()); err != nil {
		t.Fatal(err)
	}
	_, err := cpustate.NewCheckpointState(log, root, changeclass.CPUManagerStateFile, "static", containermap.NewContainerMap())
	for _, want := range []string{
		`configured policy "static" differs from state checkpoint policy "none"`,
		"please drain this node and delete the CPU manager checkpoint file",
		filepath.Join(root, changeclass.CPUManagerStateFile),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the CPU manager's checkpoint on another policy: %v; want it to say %q", err, want)
		}
	}
	if _, err := memorystate.NewCheckpointState(log, root, changeclass.MemoryManagerStateFile, "None"); err != nil {
		t.Fatal(err)
	}
	_, err = memorystate.NewCheckpointState(log, root, changeclass.MemoryManagerStateFile, "Static")
	for _, want := range []string{
		`[memorymanager] configured policy "Static" differs from state checkpoint policy "None"`,
		"please drain this node and delete the memory manager checkpoint file",
		filepath.Join(root, changeclass.MemoryManagerStateFile),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the memory manager's checkpoint on another policy: %v; want it to say %q", err, want)
		}
	}
}
