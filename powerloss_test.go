package dynconfig

// The power-loss oracle (issues 21 and 30). SIGKILL keeps the page cache;
// a power cut does not. A child process runs every write path of the state
// dir (powerLossSteps) under strace, which records every openat, write,
// fsync, rename, unlink and mkdir it makes. The parent replays that record
// into a model of a file system that keeps, for each file and directory,
// what it holds now and what an fsync made durable, and builds the states a
// power cut after each system call could leave: everything unsynced lost;
// directory entries kept but unsynced data lost, or torn; the entries of
// one directory kept and the others lost; and nothing lost (a SIGKILL).
// Each must keep every durable file and directory as it was or as the step
// in progress made it (a write that returned is never lost, torn or
// reverted), and Bootstrap on it must succeed and run the last-known-good
// config that was durable when the step in progress began, or the one it
// was making durable; never the local config in place of a remote
// last-known-good, never one that does not verify.
// test/hack/model-mutations.sh removes each fsync in turn and shows this
// test catch it. The idea is bbolt's dm-flakey and etcd's LazyFS tests,
// without root or device-mapper. Needs strace; skipped without it.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/internal/testenv"
)

const envPowerLossWorkload = "DYNCONFIG_POWERLOSS_WORKLOAD"

// powerLossEnv is what the steps of the workload share.
type powerLossEnv struct {
	dir      string
	s        *checkpoint.Store
	firstRun checkpoint.Pointer
}

// powerLossStep is one call of the workload: a write of the Store, or
// (external) a change made behind its back (bit rot, files of an older
// version), made durable by the workload itself. lkg is the value of the
// last-known-good config once the step returned (0: local).
type powerLossStep struct {
	name     string
	lkg      int
	external bool
	run      func(e *powerLossEnv) error
}

// powerLossEvidence names the steps that write a damaged or foreign file,
// with its content: from the next step on, every crash state must hold it
// in some file (in its place, or moved aside), since the quarantine keeps
// what it moves.
var powerLossEvidence = map[string]string{
	"a file in the quarantine directory's place": "not a directory",
	"bit rot in b's checkpoint":                  "rot",
}

func powerLossConfigMap(name string, uid types.UID, rv string, value int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: uid, ResourceVersion: rv},
		Data:       map[string]string{"config": fmt.Sprintf("{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: %d}", value)},
	}
}

func powerLossSource(cm *corev1.ConfigMap) *corev1.NodeConfigSource {
	if cm == nil {
		return nil
	}
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: "config"}}
}

var (
	plA  = powerLossConfigMap("a", "uid-a", "1", 1)
	plB  = powerLossConfigMap("b", "uid-b", "1", 2)
	plC  = powerLossConfigMap("c", "uid-c", "1", 3)
	plD1 = powerLossConfigMap("d", "uid_d", "1", 4) // "_" in the UID: the nested layout
	plD2 = powerLossConfigMap("d", "uid_d", "2", 4)
	plD3 = powerLossConfigMap("d", "uid_d", "3", 4)
	plE  = powerLossConfigMap("e", "uid-e", "1", 5)
	plG  = powerLossConfigMap("g", "uid_g", "1", 6)
)

func plSave(cm *corev1.ConfigMap) func(*powerLossEnv) error {
	return func(e *powerLossEnv) error { _, err := e.s.Save(cm); return err }
}
func plSetCurrent(cm *corev1.ConfigMap) func(*powerLossEnv) error {
	return func(e *powerLossEnv) error { return e.s.SetCurrent(powerLossSource(cm)) }
}
func plSetLastKnownGood(cm *corev1.ConfigMap) func(*powerLossEnv) error {
	return func(e *powerLossEnv) error { return e.s.SetLastKnownGood(powerLossSource(cm)) }
}
func plGC(e *powerLossEnv) error { _, err := e.s.GC(); return err }
func plRecordStartup(e *powerLossEnv) error {
	_, err := e.s.RecordStartup()
	return err
}
func plRecordFirstRun(e *powerLossEnv) error {
	p, err := e.s.RecordFirstRun()
	e.firstRun = p
	return err
}
func plOpen(version string) func(*powerLossEnv) error {
	return func(e *powerLossEnv) error {
		if e.s != nil {
			if err := e.s.Close(); err != nil {
				return err
			}
		}
		s, err := checkpoint.Open(checkpoint.Options{Dir: e.dir, ComponentVersion: version})
		e.s = s
		return err
	}
}

// plWriteDurably writes path behind the Store's back (O_TRUNC when it
// exists) and fsyncs it and its directory.
func plWriteDurably(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return plSyncDir(filepath.Dir(path))
}

func plSyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// powerLossSteps is the workload: every write path of the state dir (every
// file and directory checkpoint/ writes durably, and every fsync it makes),
// in order. Among them: Open creating the layout, both pointers and the
// envelopes-only marker; Save (flat, and nested for a UID holding "_",
// which creates the UID directory); SetCurrent, SetLastKnownGood;
// RecordStartup (startups.json); RecordFirstRun (the current pointer);
// ConfirmCurrent (meta/confirmed); MarkBad and ForgetBad (bad-configs.json,
// and the current pointer's first run); the quarantine of a damaged
// checkpoint, with a file in the quarantine directory's place first; GC of
// flat and nested checkpoints, a UID directory left non-empty and one
// removed; Remove of a flat and a nested checkpoint; and an Open that
// migrates an older version's plain tracking files.
var powerLossSteps = []powerLossStep{
	{"create the state dir", 0, false, plOpen("v1.0.0")},
	{"save a", 0, false, plSave(plA)},
	{"set current to a", 0, false, plSetCurrent(plA)},
	{"record a startup", 0, false, plRecordStartup},
	{"record a's first run", 0, false, plRecordFirstRun},
	{"confirm a's run", 0, false, func(e *powerLossEnv) error {
		_, err := e.s.ConfirmCurrent(e.firstRun, e.firstRun.FirstRun.Add(time.Second))
		return err
	}},
	{"promote a", 1, false, plSetLastKnownGood(plA)},
	{"gc", 1, false, plGC},
	{"save b", 1, false, plSave(plB)},
	{"set current to b", 1, false, plSetCurrent(plB)},
	{"record a startup of b", 1, false, plRecordStartup},
	{"record b's first run", 1, false, plRecordFirstRun},
	{"mark b bad", 1, false, func(e *powerLossEnv) error {
		return e.s.MarkBad(powerLossSource(plB), checkpoint.BadMark{Reason: "failed to validate current (UID: uid-b)", Problem: "ValidateFailed"})
	}},
	{"forget b's mark (and b's first run)", 1, false, func(e *powerLossEnv) error {
		forgotten, err := e.s.ForgetBad("uid-b")
		if err == nil && len(forgotten) != 1 {
			err = fmt.Errorf("forgot %q; want b's mark", forgotten)
		}
		return err
	}},
	{"a file in the quarantine directory's place", 1, true, func(e *powerLossEnv) error {
		return plWriteDurably(filepath.Join(e.dir, checkpoint.QuarantineDir), []byte("not a directory"))
	}},
	{"reopen: the file goes into a new quarantine directory", 1, false, plOpen("v1.0.0")},
	{"bit rot in b's checkpoint", 1, true, func(e *powerLossEnv) error {
		return plWriteDurably(filepath.Join(e.dir, "checkpoints", "uid-b_1"), []byte("rot"))
	}},
	{"load b: quarantined", 1, false, func(e *powerLossEnv) error {
		if _, err := e.s.Load(checkpoint.KeyOf(plB)); !errors.Is(err, checkpoint.ErrCorrupt) {
			return fmt.Errorf("loading a damaged checkpoint: %v; want it corrupt", err)
		}
		return nil
	}},
	{"save c", 1, false, plSave(plC)},
	{"set current to c", 1, false, plSetCurrent(plC)},
	{"promote c", 3, false, plSetLastKnownGood(plC)},
	{"gc: a and b go", 3, false, plGC},
	{"save d/1 (nested)", 3, false, plSave(plD1)},
	{"save d/2 (nested)", 3, false, plSave(plD2)},
	{"save d/3 (nested)", 3, false, plSave(plD3)},
	{"set current to d/2", 3, false, plSetCurrent(plD2)},
	{"remove d/3, d's directory stays", 3, false, func(e *powerLossEnv) error { return e.s.Remove(checkpoint.KeyOf(plD3)) }},
	{"gc: d/1 goes, d's directory stays", 3, false, plGC},
	{"save e", 3, false, plSave(plE)},
	{"remove e", 3, false, func(e *powerLossEnv) error { return e.s.Remove(checkpoint.KeyOf(plE)) }},
	{"save g (nested)", 3, false, plSave(plG)},
	{"remove g and its directory", 3, false, func(e *powerLossEnv) error { return e.s.Remove(checkpoint.KeyOf(plG)) }},
	{"set current to c", 3, false, plSetCurrent(plC)},
	{"gc: d/2 and d's directory go", 3, false, plGC},
	{"reset current to local", 3, false, plSetCurrent(nil)},
	{"reset last-known-good to local", 0, false, plSetLastKnownGood(nil)},
	{"gc: c goes", 0, false, plGC},
	{"an older version's plain tracking files", 0, true, func(e *powerLossEnv) error {
		tdir := filepath.Join(e.dir, "tracking", "v0.9.0")
		if err := os.Mkdir(tdir, 0o700); err != nil {
			return err
		}
		if err := plSyncDir(filepath.Dir(tdir)); err != nil {
			return err
		}
		if err := plWriteDurably(filepath.Join(tdir, checkpoint.StartupsFile), []byte(`["2026-01-01T00:00:00Z"]`)); err != nil {
			return err
		}
		return plWriteDurably(filepath.Join(tdir, checkpoint.BadConfigsFile), []byte(`{}`))
	}},
	{"open as v0.9.0: migrate its tracking files", 0, false, plOpen("v0.9.0")},
}

// TestPowerLossWorkload is the child: it runs only under strace, started
// by TestPowerLossOracle, and writes "STEP-DONE i" once step i returned.
func TestPowerLossWorkload(t *testing.T) {
	dir := os.Getenv(envPowerLossWorkload)
	if dir == "" {
		t.Skip("the child of TestPowerLossOracle")
	}
	e := &powerLossEnv{dir: dir}
	defer func() {
		if e.s != nil {
			e.s.Close()
		}
	}()
	for i, step := range powerLossSteps {
		if err := step.run(e); err != nil {
			t.Fatalf("step %d (%s): %v", i, step.name, err)
		}
		fmt.Fprintf(os.Stdout, "STEP-DONE %d\n", i)
	}
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
	// straceLinePID is the PID prefix of a line of strace -f: "1234 " as
	// -o writes it, "[pid 1234] " as stderr does.
	straceLinePID = regexp.MustCompile(`^(?:\[pid\s+(\d+)\]|(\d+))\s+(.*)$`)
	// straceCallLine is one whole call: its name, its arguments, and its
	// result after padding (strace aligns results at column 40, and a
	// resumed call keeps the padding: "<... fsync resumed>)   = 0").
	straceCallLine = regexp.MustCompile(`^(\w+)\((.*)\)\s*=\s*(-?\d+|\?)`)
	straceResumed  = regexp.MustCompile(`^<\.\.\. (\w+) resumed>(.*)$`)
	straceArg      = regexp.MustCompile(`(AT_FDCWD|\d+)<([^>]*)>|"((?:\\x[0-9a-f]{2})*)"|([A-Z_|0-9]+)`)
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

// parseStrace returns the successful calls of a strace -f -y -xx record,
// in the order they returned. A call the scheduler split is two lines of
// one PID, "fsync(3</p> <unfinished ...>" and, later, perhaps after other
// PIDs' lines, "<... fsync resumed>) = 0": they are joined, so no call is
// lost. Signals and exits are skipped; a line of any other form, a resumed
// call that was never begun, or a call begun and never resumed is an
// error, so that the record replayed is exact or the test fails.
func parseStrace(log []byte) ([]straceCall, error) {
	var calls []straceCall
	pending := map[string]string{} // PID: the start of its unfinished call
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		m := straceLinePID.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("strace line %d has no PID: %.200q", n, sc.Text())
		}
		pid, body := m[1]+m[2], m[3]
		if strings.HasPrefix(body, "--- ") || strings.HasPrefix(body, "+++ ") {
			continue // a signal, an exit
		}
		if start, ok := strings.CutSuffix(body, " <unfinished ...>"); ok {
			if prev, ok := pending[pid]; ok {
				return nil, fmt.Errorf("strace line %d: PID %s begins a call while %.80q is unfinished", n, pid, prev)
			}
			pending[pid] = start
			continue
		}
		if r := straceResumed.FindStringSubmatch(body); r != nil {
			start, ok := pending[pid]
			if !ok || !strings.HasPrefix(start, r[1]+"(") {
				return nil, fmt.Errorf("strace line %d: PID %s resumes %s, which it did not begin (pending: %.80q)", n, pid, r[1], start)
			}
			delete(pending, pid)
			body = start + r[2]
		}
		c := straceCallLine.FindStringSubmatch(body)
		if c == nil {
			return nil, fmt.Errorf("strace line %d is no call: %.200q", n, body)
		}
		if c[3] == "?" || strings.HasPrefix(c[3], "-") {
			continue // failed or interrupted (and restarted): changed nothing
		}
		ret, _ := strconv.Atoi(c[3])
		call := straceCall{name: c[1], ret: ret}
		for _, a := range straceArg.FindAllStringSubmatch(c[2], -1) {
			switch {
			case a[1] != "":
				fd := -1
				if a[1] != "AT_FDCWD" {
					fd, _ = strconv.Atoi(a[1])
				}
				call.args = append(call.args, straceArgv{kind: 'f', fd: fd, path: string(unhex(a[2]))})
			case a[0] != "" && a[0][0] == '"':
				call.args = append(call.args, straceArgv{kind: 's', str: unhex(a[3])})
			default:
				call.args = append(call.args, straceArgv{kind: 'w', word: a[4]})
			}
		}
		calls = append(calls, call)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for pid, start := range pending {
		return nil, fmt.Errorf("strace: PID %s began %.80q and never returned", pid, start)
	}
	return calls, nil
}

func resolve(base straceArgv, name []byte) string {
	if filepath.IsAbs(string(name)) {
		return string(name)
	}
	return filepath.Join(base.path, string(name))
}

// apply replays one call; it returns whether it changed the model, and
// the step number when it is a workload's STEP-DONE marker.
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
		if c.args[0].fd == 1 && bytes.HasPrefix(c.args[1].str, []byte("STEP-DONE ")) {
			marker, _ = strconv.Atoi(strings.TrimSpace(string(c.args[1].str[len("STEP-DONE "):])))
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

// files returns what the view v of the state dir (name under root) holds:
// for each path below it, "dir" or "file " and the data. The lock file and
// temporary files are left out: no write promises anything of them.
func files(root *fsNode, name string, v crashView) map[string]string {
	out := map[string]string{}
	var walk func(n *fsNode, rel string)
	walk = func(n *fsNode, rel string) {
		if !n.dir {
			out[rel] = "file " + string(v.data(n))
			return
		}
		out[rel] = "dir"
		for k, e := range v.entries(n) {
			if strings.HasPrefix(k, atomicfile.TempPrefix) || (rel == "." && k == "lock") {
				continue
			}
			walk(e, filepath.Join(rel, k))
		}
	}
	if state := v.entries(root)[name]; state != nil {
		walk(state, ".")
	}
	return out
}

// digest names the content of a files map.
func digest(fs map[string]string) string {
	names := make([]string, 0, len(fs))
	for k := range fs {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, k := range names {
		fmt.Fprintf(h, "%q %q\n", k, fs[k])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// materialise writes the files of a view to dir.
func materialise(t *testing.T, fs map[string]string, dir string) {
	names := make([]string, 0, len(fs))
	for k := range fs {
		names = append(names, k)
	}
	sort.Strings(names) // parents first
	for _, k := range names {
		path := filepath.Join(dir, k)
		var err error
		if fs[k] == "dir" {
			err = os.Mkdir(path, 0o700)
		} else {
			err = os.WriteFile(path, []byte(strings.TrimPrefix(fs[k], "file ")), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// describeContent says briefly what a path holds.
func describeContent(content string, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case content == "dir":
		return "a directory"
	}
	data := strings.TrimPrefix(content, "file ")
	return fmt.Sprintf("%d bytes %.60q", len(data), data)
}

// notAllowed returns the paths of got whose content is none of what they
// held in allowed (the SIGKILL states since the last step returned), each
// with what it held and what was allowed.
func notAllowed(got map[string]string, allowed []map[string]string) []string {
	paths := map[string]bool{}
	for p := range got {
		paths[p] = true
	}
	for _, a := range allowed {
		for p := range a {
			paths[p] = true
		}
	}
	var bad []string
	for p := range paths {
		g, gok := got[p]
		var want []string
		seen := map[string]bool{}
		match := false
		for _, a := range allowed {
			c, ok := a[p]
			if c == g && ok == gok {
				match = true
				break
			}
			if d := describeContent(c, ok); !seen[d] {
				seen[d] = true
				want = append(want, d)
			}
		}
		if !match {
			bad = append(bad, fmt.Sprintf("%s is %s; allowed: %s", p, describeContent(g, gok), strings.Join(want, " or ")))
		}
	}
	sort.Strings(bad)
	return bad
}

// missingEvidence returns what of evidence no file of fs holds.
func missingEvidence(fs map[string]string, evidence []string) string {
	var miss []string
	for _, e := range evidence {
		found := false
		for _, c := range fs {
			if c == "file "+e {
				found = true
				break
			}
		}
		if !found {
			miss = append(miss, fmt.Sprintf("no file holds %q", e))
		}
	}
	return strings.Join(miss, "; ")
}

// TestPowerLossOracle replays the workload's record and, after each
// state-changing system call, checks every crash state of the model:
//
//   - every durable file and directory of the state dir (the pointers, the
//     confirmation record, the bad marks, the startups, the envelopes-only
//     marker, the checkpoints, the quarantine and what was moved there, the
//     layout's directories) holds what a SIGKILL would have left at some
//     instant since the last step returned: its old content or a new one
//     the step in progress wrote, never a lost, torn or reverted write of a
//     step that returned (steps that change the dir behind the Store's
//     back are not held to this);
//   - Bootstrap, with the remote unreachable, succeeds and runs the
//     last-known-good that was durable before the step in progress or the
//     one it made durable.
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
	if err != nil || !bytes.Contains(out, []byte(fmt.Sprintf("STEP-DONE %d", len(powerLossSteps)-1))) {
		t.Fatalf("the workload under strace: %v\n%s", err, out)
	}
	record, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := parseStrace(record)
	if err != nil {
		t.Fatal(err)
	}

	m := &fsModel{root: newDir(), base: parent, fds: map[int]*openFile{}}
	step := 0 // the step in progress
	sigkill := crashView{"nothing lost (SIGKILL)", currentEntries, currentData}
	// allowed holds what a SIGKILL would have left since the last step
	// returned: the durable state after a power cut must be one of them,
	// file by file.
	allowed := []map[string]string{files(m.root, "state", sigkill)}
	seen := map[string]bool{}
	states, distinct, syscalls, lost := 0, 0, 0, 0
	firstLost := ""
	var evidence []string // contents of damaged files that must not vanish
	n := newNode(t, "")
	check := func(when string) {
		name := powerLossSteps[min(step, len(powerLossSteps)-1)].name
		for _, v := range m.views() {
			states++
			fs := files(m.root, "state", v)
			// A rename between two directories is one change to the
			// journal of the file systems the store supports; the views
			// that keep one directory's entries and not the other's split
			// it, and would lose any file moved whatever was fsynced. The
			// evidence is checked where the directories are as the code
			// synced them.
			if miss := missingEvidence(fs, evidence); len(miss) > 0 && !strings.HasPrefix(v.name, "only pending directory") {
				lost++
				if lost == 1 {
					firstLost = fmt.Sprintf("%s (power cut %s during %q, %s)", miss, when, name, v.name)
				}
				if lost <= 20 {
					t.Errorf("power cut %s during %q (%s): a file moved aside is nowhere: %s", when, name, v.name, miss)
				}
			}
			if step < len(powerLossSteps) && !powerLossSteps[step].external {
				if bad := notAllowed(fs, allowed); len(bad) > 0 {
					lost++
					if lost == 1 {
						firstLost = fmt.Sprintf("%s (power cut %s during %q, %s)", bad[0], when, name, v.name)
					}
					if lost <= 20 {
						t.Errorf("power cut %s during %q (%s): a write lost or torn:\n\t%s", when, name, v.name, strings.Join(bad, "\n\t"))
					}
				}
			}
			// The same state after the same step needs no second
			// Bootstrap.
			key := fmt.Sprintf("%d/%s", step, digest(fs))
			if seen[key] || len(fs) == 0 {
				continue
			}
			seen[key] = true
			distinct++
			dir := filepath.Join(t.TempDir(), "state")
			materialise(t, fs, dir)
			n.stateDir = dir
			c := n.controller(func(o *Options[testConfig]) { o.Remote = unreachable() })
			cfg, err := c.Bootstrap(n.ctx())
			c.Close()
			before := 0
			if step > 0 {
				before = powerLossSteps[step-1].lkg
			}
			after := powerLossSteps[min(step, len(powerLossSteps)-1)].lkg
			switch {
			case err != nil:
				t.Errorf("power cut %s during %q (%s): Bootstrap: %v", when, name, v.name, err)
			case cfg.Value != before && cfg.Value != after:
				t.Errorf("power cut %s during %q (%s): ran value %d; want the last-known-good that was durable, %d or %d",
					when, name, v.name, cfg.Value, before, after)
			}
		}
	}
	for _, c := range calls {
		changed, marker := m.apply(c)
		if marker >= 0 {
			if marker != step {
				t.Fatalf("step %d returned during step %d", marker, step)
			}
			if e := powerLossEvidence[powerLossSteps[marker].name]; e != "" {
				evidence = append(evidence, e)
			}
			step = marker + 1
			allowed = allowed[:0]
			allowed = append(allowed, files(m.root, "state", sigkill))
			continue
		}
		if changed {
			syscalls++
			allowed = append(allowed, files(m.root, "state", sigkill))
			check(fmt.Sprintf("after system call %d (%s)", syscalls, c.name))
		}
	}
	if lost > 0 {
		// One line for test/hack/model-mutations.sh.
		t.Errorf("LOST: %d crash states lost or tore a write; first: %s", lost, firstLost)
	}
	if step != len(powerLossSteps) {
		t.Fatalf("replayed %d steps of %d", step, len(powerLossSteps))
	}
	t.Logf("power-loss oracle: %d state-changing system calls, %d crash states (%d distinct Bootstraps) over %d steps",
		syscalls, states, distinct, len(powerLossSteps))
	if syscalls < 50 {
		t.Errorf("only %d state-changing system calls recorded: the trace is not what it should be", syscalls)
	}
}

// hexPath is a path as strace -xx prints it.
func hexPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		fmt.Fprintf(&b, `\x%02x`, p[i])
	}
	return b.String()
}

// TestParseStrace replays lines of the form strace -f -y -xx -o wrote in
// runs of TestPowerLossWorkload (paths shortened), among them calls that Go's
// preemption split in two, which the first parser dropped: 3 of 19 oracle
// runs then failed.
func TestParseStrace(t *testing.T) {
	dir, tmp, cur := hexPath("/s/meta"), hexPath("/s/meta/.tmp-current-1"), hexPath("/s/meta/current")
	log := strings.Join([]string{
		`27148 openat(AT_FDCWD<` + hexPath("/w") + `>, "` + tmp + `", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 9<` + tmp + `>`,
		`27148 write(9<` + tmp + `>, "\x61\x62", 2) = 2`,
		// Split calls of two PIDs, interleaved with each other, a signal
		// and a whole call.
		`27148 fsync(9<` + tmp + `> <unfinished ...>`,
		`27151 renameat(AT_FDCWD<` + hexPath("/w") + `>, "` + tmp + `", AT_FDCWD<` + hexPath("/w") + `>, "` + cur + `" <unfinished ...>`,
		`27148 --- SIGURG {si_signo=SIGURG, si_code=SI_TKILL, si_pid=27148, si_uid=0} ---`,
		`27160 close(3<` + hexPath("/x") + `>)             = 0`,
		`27148 <... fsync resumed>)              = 0`,
		`27151 <... renameat resumed>)           = 0`,
		// A failed call changed nothing; stderr's PID form is read too.
		`[pid 27148] unlinkat(AT_FDCWD<` + hexPath("/w") + `>, "` + cur + `", 0) = -1 ENOENT (No such file or directory)`,
		`[pid 27148] fsync(10<` + dir + `>) = 0`,
		`27148 +++ exited with 0 +++`,
	}, "\n")
	calls, err := parseStrace([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		var args []string
		for _, a := range c.args {
			switch a.kind {
			case 'f':
				args = append(args, fmt.Sprintf("%d<%s>", a.fd, a.path))
			case 's':
				args = append(args, fmt.Sprintf("%q", a.str))
			default:
				args = append(args, a.word)
			}
		}
		got = append(got, fmt.Sprintf("%s(%s) = %d", c.name, strings.Join(args, ", "), c.ret))
	}
	want := []string{
		`openat(-1</w>, "/s/meta/.tmp-current-1", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 9`,
		`write(9</s/meta/.tmp-current-1>, "ab", 2) = 2`,
		`close(3</x>) = 0`,
		`fsync(9</s/meta/.tmp-current-1>) = 0`,
		`renameat(-1</w>, "/s/meta/.tmp-current-1", -1</w>, "/s/meta/current") = 0`,
		`fsync(10</s/meta>) = 0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parsed calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for name, bad := range map[string]string{
		"a resumed call never begun": `1 <... fsync resumed>) = 0`,
		"a call never resumed":       `1 fsync(3</x> <unfinished ...>`,
		"a line that is no call":     `1 fsync(3</x>`,
		"a line without a PID":       `fsync(3</x>) = 0`,
		"a resumed call of another":  "1 fsync(3</x> <unfinished ...>\n1 <... close resumed>) = 0",
	} {
		if _, err := parseStrace([]byte(bad)); err == nil {
			t.Errorf("%s: parsed without an error: %q", name, bad)
		}
	}
}
