package dynconfig

// The power-loss oracle (issue 21). SIGKILL keeps the page cache; a power
// cut does not. A child process runs the state dir's write paths (adoption,
// first run, promotion, mark-bad, forget-bad, quarantine, GC, reset) under
// strace, which records every openat, write, fsync, rename, unlink and mkdir
// it makes. The parent replays that record into a model of a file system
// that keeps, for each file and directory, what it holds now and what an
// fsync made durable, and materialises the states a power cut after each
// system call could leave: everything unsynced lost; directory entries kept
// but unsynced data lost, or torn; the entries of one directory kept and
// the others lost; and nothing lost (a SIGKILL). Bootstrap runs on each:
// it must succeed and run the last-known-good config that was durable when
// the operation in progress began, or the one it was making durable; never
// the local config in place of a remote last-known-good, never one that
// does not verify. The idea is bbolt's dm-flakey and etcd's LazyFS tests,
// without root or device-mapper. Needs strace; skipped without it.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/testenv"
)

const envPowerLossWorkload = "DYNCONFIG_POWERLOSS_WORKLOAD"

// powerLossOps are the operations of the workload, each with the value of
// the last-known-good config once it returned (0: local).
var powerLossOps = []struct {
	name string
	lkg  int
}{
	{"create the state dir", 0},
	{"adopt a", 0},
	{"first run of a", 0},
	{"promote a", 1},
	{"gc", 1},
	{"adopt b", 1},
	{"mark b bad", 1},
	{"forget b's mark", 1},
	{"quarantine a damaged checkpoint of b", 1},
	{"adopt and promote c, gc", 3},
	{"reset to local, gc", 0},
}

func powerLossConfigMap(name string, uid types.UID, value int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: uid, ResourceVersion: "1"},
		Data:       map[string]string{"config": fmt.Sprintf("{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: %d}", value)},
	}
}

func powerLossSource(cm *corev1.ConfigMap) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: "config"}}
}

// TestPowerLossWorkload is the child: it runs only under strace, started
// by TestPowerLossOracle.
func TestPowerLossWorkload(t *testing.T) {
	dir := os.Getenv(envPowerLossWorkload)
	if dir == "" {
		t.Skip("the child of TestPowerLossOracle")
	}
	done := func(i int) { fmt.Fprintf(os.Stdout, "OP-DONE %d\n", i) }
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.0.0"})
	must(err)
	defer s.Close()
	done(0)
	a, b, c := powerLossConfigMap("a", "uid-a", 1), powerLossConfigMap("b", "uid-b", 2), powerLossConfigMap("c", "uid-c", 3)
	_, err = s.Save(a)
	must(err)
	must(s.SetCurrent(powerLossSource(a)))
	done(1)
	_, err = s.RecordStartup()
	must(err)
	_, err = s.RecordFirstRun()
	must(err)
	done(2)
	must(s.SetLastKnownGood(powerLossSource(a)))
	done(3)
	_, err = s.GC()
	must(err)
	done(4)
	_, err = s.Save(b)
	must(err)
	must(s.SetCurrent(powerLossSource(b)))
	done(5)
	_, err = s.RecordStartup()
	must(err)
	must(s.MarkBad(powerLossSource(b), checkpoint.BadMark{Reason: "failed to validate current (UID: uid-b)", Problem: "ValidateFailed"}))
	done(6)
	_, err = s.ForgetBad("uid-b")
	must(err)
	done(7)
	// Bit rot (not synced, as rot is not), found by a read: moved aside.
	path := filepath.Join(dir, "checkpoints", "uid-b_1")
	must(os.WriteFile(path, []byte("rot"), 0o600))
	if _, err := s.Load(checkpoint.KeyOf(b)); err == nil {
		t.Fatal("a damaged checkpoint loaded")
	}
	done(8)
	_, err = s.Save(c)
	must(err)
	must(s.SetCurrent(powerLossSource(c)))
	must(s.SetLastKnownGood(powerLossSource(c)))
	_, err = s.GC()
	must(err)
	done(9)
	must(s.SetCurrent(nil))
	must(s.SetLastKnownGood(nil))
	_, err = s.GC()
	must(err)
	done(10)
}

// fsNode is a file or directory of the model: what it holds now, and what
// an fsync made durable.
type fsNode struct {
	dir                 bool
	data, durable       []byte
	entries, durEntries map[string]*fsNode
}

func newDir() *fsNode {
	return &fsNode{dir: true, entries: map[string]*fsNode{}, durEntries: map[string]*fsNode{}}
}

// fsModel replays a strace record below root.
type fsModel struct {
	root *fsNode
	base string // the path of root
	fds  map[int]*openFile
}

type openFile struct {
	node *fsNode
	off  int
}

// walk returns the node at path through the current entries, or nil.
func (m *fsModel) walk(path string) *fsNode {
	rel, ok := m.rel(path)
	if !ok {
		return nil
	}
	n := m.root
	for _, part := range rel {
		if n == nil || !n.dir {
			return nil
		}
		n = n.entries[part]
	}
	return n
}

func (m *fsModel) rel(path string) ([]string, bool) {
	r, err := filepath.Rel(m.base, filepath.Clean(path))
	if err != nil || strings.HasPrefix(r, "..") {
		return nil, false
	}
	if r == "." {
		return nil, true
	}
	return strings.Split(r, string(filepath.Separator)), true
}

// parent returns the directory node of path's parent and path's name.
func (m *fsModel) parent(path string) (*fsNode, string) {
	p := m.walk(filepath.Dir(path))
	if p == nil || !p.dir {
		return nil, ""
	}
	return p, filepath.Base(path)
}

var (
	straceLine = regexp.MustCompile(`^\d+\s+(\w+)\((.*)\) = (-?\d+)`)
	straceArg  = regexp.MustCompile(`(AT_FDCWD|\d+)<([^>]*)>|"((?:\\x[0-9a-f]{2})*)"|([A-Z_|0-9]+)`)
)

func unhex(s string) []byte {
	out := make([]byte, 0, len(s)/4)
	for i := 0; i+3 < len(s); i += 4 {
		b, _ := strconv.ParseUint(s[i+2:i+4], 16, 8)
		out = append(out, byte(b))
	}
	return out
}

// straceCall is one successful call: its arguments as base paths (of a
// dirfd or fd), strings, and flags.
type straceCall struct {
	name string
	ret  int
	args []straceArgv
}

type straceArgv struct {
	fd   int    // -1 for AT_FDCWD
	path string // of the fd
	str  []byte // a string argument
	word string // flags, numbers
	kind byte   // 'f' fd, 's' string, 'w' word
}

func parseStrace(t *testing.T, log []byte) []straceCall {
	var calls []straceCall
	pending := map[string]string{} // pid: the start of an unfinished call
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		pid, _, _ := strings.Cut(line, " ")
		if i := strings.Index(line, " <unfinished ...>"); i >= 0 {
			pending[pid] = line[:i]
			continue
		}
		if i := strings.Index(line, "<... "); i >= 0 {
			j := strings.Index(line[i:], " resumed>")
			if j < 0 {
				continue
			}
			line = pending[pid] + line[i+j+len(" resumed>"):]
			delete(pending, pid)
		}
		m := straceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ret, _ := strconv.Atoi(m[3])
		if ret < 0 {
			continue // failed: changed nothing
		}
		c := straceCall{name: m[1], ret: ret}
		for _, a := range straceArg.FindAllStringSubmatch(m[2], -1) {
			switch {
			case a[1] != "":
				fd := -1
				if a[1] != "AT_FDCWD" {
					fd, _ = strconv.Atoi(a[1])
				}
				c.args = append(c.args, straceArgv{kind: 'f', fd: fd, path: string(unhex(a[2]))})
			case a[0] != "" && a[0][0] == '"':
				c.args = append(c.args, straceArgv{kind: 's', str: unhex(a[3])})
			default:
				c.args = append(c.args, straceArgv{kind: 'w', word: a[4]})
			}
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

func resolve(base straceArgv, name []byte) string {
	if filepath.IsAbs(string(name)) {
		return string(name)
	}
	return filepath.Join(base.path, string(name))
}

// apply replays one call; it returns whether it changed the model, and
// the op number when it is a workload's OP-DONE marker.
func (m *fsModel) apply(c straceCall) (changed bool, marker int) {
	marker = -1
	switch c.name {
	case "openat":
		path := resolve(c.args[0], c.args[1].str)
		flags := c.args[2].word
		n := m.walk(path)
		if n == nil && strings.Contains(flags, "O_CREAT") {
			if p, name := m.parent(path); p != nil {
				n = &fsNode{}
				p.entries[name] = n
				changed = true
			}
		}
		if n != nil && strings.Contains(flags, "O_TRUNC") && len(n.data) > 0 {
			n.data, changed = nil, true
		}
		if n != nil {
			m.fds[c.ret] = &openFile{node: n}
		} else {
			delete(m.fds, c.ret)
		}
	case "close":
		delete(m.fds, c.args[0].fd)
	case "write":
		if c.args[0].fd == 1 && bytes.HasPrefix(c.args[1].str, []byte("OP-DONE ")) {
			marker, _ = strconv.Atoi(strings.TrimSpace(string(c.args[1].str[len("OP-DONE "):])))
			return false, marker
		}
		if f := m.fds[c.args[0].fd]; f != nil && !f.node.dir {
			data := c.args[1].str[:c.ret]
			if need := f.off + len(data); need > len(f.node.data) {
				f.node.data = append(f.node.data, make([]byte, need-len(f.node.data))...)
			}
			copy(f.node.data[f.off:], data)
			f.off += len(data)
			changed = true
		}
	case "fsync", "fdatasync":
		if f := m.fds[c.args[0].fd]; f != nil {
			if f.node.dir {
				f.node.durEntries = copyEntries(f.node.entries)
			} else {
				f.node.durable = append([]byte(nil), f.node.data...)
			}
			changed = true
		}
	case "renameat", "renameat2":
		from, to := resolve(c.args[0], c.args[1].str), resolve(c.args[2], c.args[3].str)
		fp, fname := m.parent(from)
		tp, tname := m.parent(to)
		if fp != nil && tp != nil && fp.entries[fname] != nil {
			n := fp.entries[fname]
			delete(fp.entries, fname)
			tp.entries[tname] = n
			changed = true
		}
	case "unlinkat":
		if p, name := m.parent(resolve(c.args[0], c.args[1].str)); p != nil && p.entries[name] != nil {
			delete(p.entries, name)
			changed = true
		}
	case "mkdirat":
		if p, name := m.parent(resolve(c.args[0], c.args[1].str)); p != nil && p.entries[name] == nil {
			p.entries[name] = newDir()
			changed = true
		}
	case "ftruncate":
		if f := m.fds[c.args[0].fd]; f != nil {
			size, _ := strconv.Atoi(c.args[1].word)
			if size < len(f.node.data) {
				f.node.data = f.node.data[:size]
			}
			changed = true
		}
	}
	return changed, marker
}

func copyEntries(e map[string]*fsNode) map[string]*fsNode {
	out := make(map[string]*fsNode, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

// crashView says what a power cut keeps: for a directory, its current
// entries or its durable ones; for a file, its data.
type crashView struct {
	name    string
	entries func(d *fsNode) map[string]*fsNode
	data    func(f *fsNode) []byte
}

func durableEntries(d *fsNode) map[string]*fsNode { return d.durEntries }
func currentEntries(d *fsNode) map[string]*fsNode { return d.entries }
func durableData(f *fsNode) []byte                { return f.durable }
func currentData(f *fsNode) []byte                { return f.data }
func tornData(f *fsNode) []byte {
	if bytes.Equal(f.data, f.durable) {
		return f.durable
	}
	return f.data[:len(f.data)/2]
}

// views lists the crash states of the model as it is now.
func (m *fsModel) views() []crashView {
	vs := []crashView{
		{"all unsynced lost", durableEntries, durableData},
		{"entries kept, unsynced data lost", currentEntries, durableData},
		{"entries kept, unsynced data torn", currentEntries, tornData},
		{"nothing lost (SIGKILL)", currentEntries, currentData},
	}
	// The entries of one directory kept, of every other lost.
	var pending []*fsNode
	var find func(d *fsNode, seen map[*fsNode]bool)
	find = func(d *fsNode, seen map[*fsNode]bool) {
		if seen[d] {
			return
		}
		seen[d] = true
		if len(d.entries) != len(d.durEntries) || !sameEntries(d.entries, d.durEntries) {
			pending = append(pending, d)
		}
		for _, e := range d.entries {
			if e.dir {
				find(e, seen)
			}
		}
		for _, e := range d.durEntries {
			if e.dir {
				find(e, seen)
			}
		}
	}
	find(m.root, map[*fsNode]bool{})
	for i, p := range pending {
		p := p
		vs = append(vs, crashView{fmt.Sprintf("only pending directory %d kept", i),
			func(d *fsNode) map[string]*fsNode {
				if d == p {
					return d.entries
				}
				return d.durEntries
			}, durableData})
	}
	return vs
}

func sameEntries(a, b map[string]*fsNode) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// materialise writes the view of the state dir (name under root) to dir
// and returns a digest of what it wrote.
func materialise(t *testing.T, root *fsNode, name string, v crashView, dir string) string {
	h := sha256.New()
	var write func(n *fsNode, path, rel string)
	write = func(n *fsNode, path, rel string) {
		if n.dir {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			entries := v.entries(n)
			names := make([]string, 0, len(entries))
			for k := range entries {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				fmt.Fprintf(h, "%s/%s\n", rel, k)
				write(entries[k], filepath.Join(path, k), rel+"/"+k)
			}
			return
		}
		data := v.data(n)
		fmt.Fprintf(h, "%q\n", data)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	state := v.entries(root)[name]
	if state == nil {
		return "no state dir"
	}
	write(state, dir, "")
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestPowerLossOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hundreds of Bootstraps")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		testenv.Missing(t, "strace", "apt-get install strace")
	}
	parent := t.TempDir()
	stateDir := filepath.Join(parent, "state")
	log := filepath.Join(t.TempDir(), "strace.log")
	cmd := exec.Command(strace, "-f", "-y", "-qq", "-xx", "-s", "4194304", "-o", log,
		"-e", "trace=openat,write,pwrite64,fsync,fdatasync,renameat,renameat2,unlinkat,mkdirat,close,ftruncate",
		os.Args[0], "-test.run=^TestPowerLossWorkload$", "-test.count=1")
	cmd.Env = append(os.Environ(), envPowerLossWorkload+"="+stateDir)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(fmt.Sprintf("OP-DONE %d", len(powerLossOps)-1))) {
		t.Fatalf("the workload under strace: %v\n%s", err, out)
	}
	record, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := parseStrace(t, record)

	m := &fsModel{root: newDir(), base: parent, fds: map[int]*openFile{}}
	op := 0 // the operation in progress
	seen := map[string]bool{}
	states, distinct, syscalls := 0, 0, 0
	n := newNode(t, "")
	check := func(when string) {
		for _, v := range m.views() {
			states++
			dir := filepath.Join(t.TempDir(), "state")
			digest := materialise(t, m.root, "state", v, dir)
			// The same state after the same operation needs no second
			// Bootstrap.
			key := fmt.Sprintf("%d/%s", op, digest)
			if seen[key] {
				continue
			}
			seen[key] = true
			distinct++
			n.stateDir = dir
			c := n.controller(func(o *Options[testConfig]) { o.Remote = unreachable() })
			cfg, err := c.Bootstrap(n.ctx())
			c.Close()
			before := 0
			if op > 0 {
				before = powerLossOps[op-1].lkg
			}
			after := powerLossOps[min(op, len(powerLossOps)-1)].lkg
			switch {
			case err != nil:
				t.Errorf("power cut %s during %q (%s): Bootstrap: %v", when, powerLossOps[min(op, len(powerLossOps)-1)].name, v.name, err)
			case cfg.Value != before && cfg.Value != after:
				t.Errorf("power cut %s during %q (%s): ran value %d; want the last-known-good that was durable, %d or %d",
					when, powerLossOps[min(op, len(powerLossOps)-1)].name, v.name, cfg.Value, before, after)
			}
		}
	}
	for _, c := range calls {
		changed, marker := m.apply(c)
		if marker >= 0 {
			op = marker + 1
			continue
		}
		if changed {
			syscalls++
			check(fmt.Sprintf("after system call %d (%s)", syscalls, c.name))
		}
	}
	if op != len(powerLossOps) {
		t.Fatalf("replayed %d operations of %d", op, len(powerLossOps))
	}
	t.Logf("power-loss oracle: %d state-changing system calls, %d crash states (%d distinct Bootstraps) over %d operations",
		syscalls, states, distinct, len(powerLossOps))
	if syscalls < 50 {
		t.Errorf("only %d state-changing system calls recorded: the trace is not what it should be", syscalls)
	}
}
