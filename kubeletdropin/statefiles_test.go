package kubeletdropin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components/kubelet/changeclass"
	"github.com/dynconfig/dynconfig/nodeapi"
)

func TestPlanStateFiles(t *testing.T) {
	drain := changeclass.Change{Class: changeclass.Drain, Fields: []string{"cpuManagerPolicy"}, StateFiles: []string{"cpu_manager_state"}}
	refuse := changeclass.Change{Class: changeclass.Refuse, Fields: []string{"systemCgroups"}}
	cpu := []string{"cpu_manager_state"}
	for _, tc := range []struct {
		name              string
		change            changeclass.Change
		existing          []string
		drained, fallback bool
		want              statePlan
	}{
		{"restart", changeclass.Change{}, nil, false, false, statePlan{Record: true}},
		{"refuse records, removes nothing", refuse, nil, true, true, statePlan{Change: refuse, Record: true}},
		{"drain, drained", drain, cpu, true, false, statePlan{Change: drain, Remove: cpu, Record: true, ConsumeMark: true}},
		{"drain, drained and a fallback", drain, cpu, true, true, statePlan{Change: drain, Remove: cpu, Record: true, ConsumeMark: true}},
		{"drain, drained, no file to remove", drain, nil, true, false, statePlan{Change: drain, Record: true}},
		{"drain, a fallback of the node's own", drain, cpu, false, true, statePlan{Change: drain, Remove: cpu, Record: true}},
		{"drain, neither: the files and the record stay", drain, cpu, false, false, statePlan{Change: drain, Refused: "x"}},
		{"drain, no file to remove", drain, nil, false, false, statePlan{Change: drain, Record: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planStateFiles(tc.change, tc.existing, tc.drained, tc.fallback)
			if (got.Refused != "") != (tc.want.Refused != "") {
				t.Errorf("Refused = %q, want it set: %v", got.Refused, tc.want.Refused != "")
			}
			got.Refused, tc.want.Refused = "", ""
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestDrainedMark(t *testing.T) {
	root := t.TempDir()
	if m, err := Drained(root); m != nil || err != nil {
		t.Fatalf("no mark: Drained = %+v, %v; want nil, nil", m, err)
	}
	if err := MarkDrained(root, "ConfigMap kube-system/static"); err != nil {
		t.Fatal(err)
	}
	m, err := Drained(root)
	if err != nil || m == nil || m.Config != "ConfigMap kube-system/static" || m.Time.IsZero() {
		t.Fatalf("Drained = %+v, %v; want the mark", m, err)
	}
	if err := ClearDrained(root); err != nil {
		t.Fatal(err)
	}
	if err := ClearDrained(root); err != nil {
		t.Fatalf("clearing twice: %v", err)
	}
	if m, err := Drained(root); m != nil || err != nil {
		t.Fatalf("cleared: Drained = %+v, %v; want nil, nil", m, err)
	}
	write(t, filepath.Join(root, DrainedFile), `{"version":2,"config":"x"}`)
	if _, err := Drained(root); err == nil || !strings.Contains(err.Error(), DrainedFile) || !strings.Contains(err.Error(), "version") {
		t.Errorf("a mark of another version: %v; want an error naming the file and the field", err)
	}
	if err := MarkDrained(filepath.Join(root, "missing"), "x"); err == nil {
		t.Error("MarkDrained into a missing root dir succeeded")
	}
}

// stateNode is a node whose base config runs the none CPU policy, with a
// state dir and a kubelet root dir.
type stateNode struct {
	*node
	c     Common
	root  string
	store func(func(*checkpoint.Store))
}

func newStateNode(t *testing.T) *stateNode {
	n := newNode(t, "maxPods: 10\n", nil)
	s := &stateNode{node: n, root: t.TempDir()}
	s.c = Common{Files: n.files, StateDir: filepath.Join(t.TempDir(), "state"), KubeletVersion: "v1.37.0", KubeletRootDir: s.root}
	s.store = func(f func(*checkpoint.Store)) {
		t.Helper()
		st, err := checkpoint.Open(checkpoint.Options{Dir: s.c.StateDir, ComponentVersion: "v1.37.0"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		f(st)
	}
	return s
}

// assign makes a ConfigMap with payload the node's current config.
func (s *stateNode) assign(name, payload string) *corev1.NodeConfigSource {
	t := s.t
	t.Helper()
	key, _ := nodeapi.DefaultPayloadKey(nodeapi.DefaultComponent)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Data: map[string]string{key: head + payload}}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: cm.Namespace, Name: cm.Name,
		UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: key}}
	s.store(func(st *checkpoint.Store) {
		if _, err := st.Save(cm); err != nil {
			t.Fatal(err)
		}
		if err := st.SetCurrent(src); err != nil {
			t.Fatal(err)
		}
	})
	return src
}

// kubeletRan writes the CPU manager's state file as a kubelet on policy
// would.
func (s *stateNode) kubeletRan(policy string) {
	write(s.t, filepath.Join(s.root, changeclass.CPUManagerStateFile), `{"policyName":"`+policy+`","defaultCpuSet":"0-1","checksum":1}`)
}

func (s *stateNode) prestart(ctx context.Context) PreStartResult {
	s.t.Helper()
	res, err := PreStart(ctx, s.c, 0)
	if err != nil || res.Chosen == nil {
		s.t.Fatalf("PreStart: %+v, %v", res, err)
	}
	return res
}

func (s *stateNode) recorded() string {
	s.t.Helper()
	r, _, err := readStateRecord(s.root)
	if err != nil || r == nil {
		s.t.Fatalf("the record: %+v, %v", r, err)
	}
	return r.Config.CPUManagerPolicy
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

const staticPayload = "cpuManagerPolicy: static\nkubeReserved: {cpu: \"1\"}\n"

// The pre-start role on a none -> static change and back: it removes the
// CPU manager's state file only on a node marked drained (forward) or when
// it falls back to the node's own config (the rollback), only that file,
// and records what the files are made for only once they are; the mark
// serves one change.
func TestPreStartResetsStateFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := newStateNode(t)
	cpuState := filepath.Join(s.root, changeclass.CPUManagerStateFile)
	memState := filepath.Join(s.root, changeclass.MemoryManagerStateFile)

	res := s.prestart(ctx)
	if len(res.RemovedStateFiles) != 0 || s.recorded() != "none" {
		t.Fatalf("first start: removed %v, recorded %q; want nothing removed, none recorded", res.RemovedStateFiles, s.recorded())
	}
	s.kubeletRan("none")
	write(t, memState, `{"policyName":"None"}`)

	s.assign("static", staticPayload)
	res = s.prestart(ctx)
	if len(res.RemovedStateFiles) != 0 || !exists(cpuState) || s.recorded() != "none" {
		t.Fatalf("not drained: removed %v, recorded %q; want the file and the record kept", res.RemovedStateFiles, s.recorded())
	}

	if err := MarkDrained(s.root, "ConfigMap kube-system/static"); err != nil {
		t.Fatal(err)
	}
	res = s.prestart(ctx)
	if diff := cmp.Diff([]string{cpuState}, res.RemovedStateFiles); diff != "" || exists(cpuState) {
		t.Fatalf("drained: removed -want +got:\n%s", diff)
	}
	if !exists(memState) || s.recorded() != "static" {
		t.Fatalf("drained: memory manager state kept %v, recorded %q; want kept, static", exists(memState), s.recorded())
	}
	if got, _ := os.ReadFile(s.files.Path()); !strings.Contains(string(got), "cpuManagerPolicy: static") {
		t.Fatalf("drop-in %q, want the static config", got)
	}

	if m, err := Drained(s.root); m != nil || err != nil {
		t.Fatalf("the drained mark after the change it served: %+v, %v; want it removed", m, err)
	}

	s.kubeletRan("static")
	if res := s.prestart(ctx); len(res.RemovedStateFiles) != 0 || !exists(cpuState) {
		t.Fatalf("the same config again: removed %v", res.RemovedStateFiles)
	}

	// Another drain-class change (more reserved CPUs), not drained: the
	// used mark lets nothing through.
	s.assign("static2", "cpuManagerPolicy: static\nkubeReserved: {cpu: \"2\"}\n")
	if res := s.prestart(ctx); len(res.RemovedStateFiles) != 0 || !exists(cpuState) {
		t.Fatalf("a second change, not drained: removed %v", res.RemovedStateFiles)
	}

	// Back to the node's own config, not drained: a fallback.
	s.store(func(st *checkpoint.Store) {
		if err := st.SetCurrent(nil); err != nil {
			t.Fatal(err)
		}
	})
	res = s.prestart(ctx)
	if res.Chosen.Source != nil || len(res.RemovedStateFiles) != 1 || exists(cpuState) || s.recorded() != "none" {
		t.Fatalf("rollback to local: chose %v, removed %v, recorded %q; want local, the CPU state removed, none recorded",
			res.Chosen.Source, res.RemovedStateFiles, s.recorded())
	}
}

// A crash after the removal and before the record. If the kubelet then
// started on the old drop-in (the crash came before the new one was
// written), it made a checkpoint for the old config, and the next start
// removes again; if it started on the new one, its checkpoint is the new
// config's and nothing is removed; if it never started, there is nothing
// to remove. Each time the new config is recorded.
func TestStateFilesCrashBeforeRecord(t *testing.T) {
	log := ktesting.NewLogger(t, ktesting.NewConfig())
	none, static := &Config{}, &Config{CPUManagerPolicy: "static"}
	cpuState := changeclass.CPUManagerStateFile
	for _, tc := range []struct {
		name        string
		kubeletRan  string // the policy of the checkpoint the kubelet wrote after the crash; "": none
		wantRemoved []string
	}{
		{"the kubelet ran the old config", "none", []string{cpuState}},
		{"the kubelet ran the new config", "static", nil},
		{"the kubelet never ran", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			prepareStateFiles(root, none, "local", false, log).record()
			write(t, filepath.Join(root, cpuState), `{"policyName":"none"}`)
			if err := MarkDrained(root, "static"); err != nil {
				t.Fatal(err)
			}
			s := prepareStateFiles(root, static, "static", false, log)
			if err := s.remove(); err != nil {
				t.Fatal(err)
			}
			// The crash: no record.
			if tc.kubeletRan != "" {
				write(t, filepath.Join(root, cpuState), `{"policyName":"`+tc.kubeletRan+`"}`)
			}
			again := prepareStateFiles(root, static, "static", false, log)
			if diff := cmp.Diff(tc.wantRemoved, again.plan.Remove, cmpopts.EquateEmpty()); diff != "" || !again.plan.Record {
				t.Fatalf("after the crash: remove -want +got:\n%s record %v", diff, again.plan.Record)
			}
			if err := again.remove(); err != nil {
				t.Fatal(err)
			}
			again.record()
			if r, _, err := readStateRecord(root); err != nil || r.Config.CPUManagerPolicy != "static" || r.Source != "static" {
				t.Fatalf("record %+v, %v", r, err)
			}
		})
	}
}

// The managers' checkpoints name their policies, and win over the record:
// an unreadable, missing or stale record hides no policy change. With no
// record and no checkpoint, nothing is known: a Restart.
func TestStateRecordAndCheckpoints(t *testing.T) {
	log := ktesting.NewLogger(t, ktesting.NewConfig())
	static := &Config{CPUManagerPolicy: "static", ReservedSystemCPUs: "0"}
	drain := changeclass.Change{Class: changeclass.Drain, Fields: []string{"cpuManagerPolicy"}, StateFiles: []string{changeclass.CPUManagerStateFile}}
	for _, tc := range []struct {
		name             string
		record, cpuState string // file contents; "": no file
		want             changeclass.Change
	}{
		{"nothing known", "", "", changeclass.Change{}},
		{"no record, the checkpoint says none", "", `{"policyName":"none","defaultCpuSet":"","checksum":1}`, drain},
		{"no record, the checkpoint says static", "", `{"policyName":"static","defaultCpuSet":"0-3"}`, changeclass.Change{}},
		{"unreadable record", `{"version":1,"config":{"cpuManagerPolicy":"static"},"extra":1}`, `{"policyName":"none"}`, drain},
		{"stale record", `{"version":1,"config":{"cpuManagerPolicy":"static","reservedSystemCPUs":"0"}}`, `{"policyName":"none"}`, drain},
		{"the record alone", `{"version":1,"config":{}}`, "", drain},
		{"a checkpoint that says nothing", `{"version":1,"config":{"cpuManagerPolicy":"static","reservedSystemCPUs":"0"}}`, `{"entries":{}}`, changeclass.Change{}},
		{"record and checkpoint agree", `{"version":1,"config":{"cpuManagerPolicy":"static","reservedSystemCPUs":"0"}}`, `{"policyName":"static"}`, changeclass.Change{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.record != "" {
				write(t, filepath.Join(root, StateConfigFile), tc.record)
			}
			if tc.cpuState != "" {
				write(t, filepath.Join(root, changeclass.CPUManagerStateFile), tc.cpuState)
			}
			s := prepareStateFiles(root, static, "static", true, log)
			if diff := cmp.Diff(tc.want, s.plan.Change, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("change -want +got:\n%s", diff)
			}
			if !s.plan.Record {
				t.Fatal("the next config is not recorded")
			}
			s.record()
			if r, _, err := readStateRecord(root); err != nil || r.Config.CPUManagerPolicy != "static" {
				t.Fatalf("rewritten record %+v, %v", r, err)
			}
		})
	}
	missing := t.TempDir()
	s := prepareStateFiles(filepath.Join(missing, "root"), &Config{}, "local", false, log)
	s.record()
	if exists(filepath.Join(missing, "root")) {
		t.Error("the record created the kubelet's root dir")
	}
}

// FuzzStateRecords: the two records and the managers' checkpoints never
// panic their decoders, and what the records accept encodes back to an
// equal record.
func FuzzStateRecords(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"source":"local","config":{"cpuManagerPolicy":"static","reservedSystemCPUs":"0"}}`,
		`{"version":1,"config":"x"}`,
		`{"version":1,"config":"ConfigMap a/b","time":"2026-01-01T00:00:00Z"}`,
		`{"version":1}{}`, `null`, ``, `{"version":1,"config":null}`,
		`{"policyName":"static","defaultCpuSet":"0-3","entries":{},"data":"{}","dataChecksum":1,"checksum":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := decodeStateRecord(data); err == nil {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeStateRecord(b)
			if err != nil || !cmp.Equal(r, back, cmpopts.EquateEmpty()) {
				t.Fatalf("state record %q: re-encoded %q: %+v, %v", data, b, back, err)
			}
		}
		if p, err := decodeCheckpointPolicy(data); err == nil && p == "" {
			t.Fatalf("checkpoint %q: an empty policy accepted", data)
		}
		if m, err := decodeDrained(data); err == nil {
			b, err := json.Marshal(drainedRecord{Version: recordVersion, DrainedMark: *m})
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeDrained(b)
			if err != nil || !back.Time.Equal(m.Time) || back.Config != m.Config {
				t.Fatalf("drained mark %q: re-encoded %q: %+v, %v", data, b, back, err)
			}
		}
	})
}

// StateChange tells the run role ahead what the pre-start role will find.
func TestStateChange(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := newStateNode(t)
	log := ktesting.NewLogger(t, ktesting.NewConfig())
	static := chosen(head + staticPayload).Document
	if ch, err := StateChange(s.c, static, log); err != nil || ch.Class != changeclass.Restart {
		t.Fatalf("no record: %v, %v; want Restart", ch, err)
	}
	s.prestart(ctx)
	ch, err := StateChange(s.c, static, log)
	want := changeclass.Change{Class: changeclass.Drain, Fields: []string{"cpuManagerPolicy"}, StateFiles: []string{changeclass.CPUManagerStateFile}}
	if err != nil || !cmp.Equal(ch, want) {
		t.Fatalf("none -> static: %v, %v; want %v", ch, err, want)
	}
	if ch, err := StateChange(s.c, chosen(head+"maxPods: 20\n").Document, log); err != nil || ch.Class != changeclass.Restart {
		t.Fatalf("maxPods: %v, %v; want Restart", ch, err)
	}
	if _, err := StateChange(s.c, chosen(head+"maxPods: -3\n").Document, log); err == nil {
		t.Fatal("an invalid candidate: no error")
	}
}

// BenchmarkStateFilesUnchanged is what every kubelet start adds to the
// pre-start role when the config's class is Restart (the common case):
// reading the record and both managers' checkpoints, Compare, and no write
// (the record is unchanged). The effective config's Build is not counted.
func BenchmarkStateFilesUnchanged(b *testing.B) {
	root := b.TempDir()
	next := &Config{CPUManagerPolicy: "static", ReservedSystemCPUs: "0-1", MaxPods: 110}
	log := logr.Discard()
	prepareStateFiles(root, next, "local", false, log).record()
	for name, data := range map[string]string{
		changeclass.CPUManagerStateFile:    `{"policyName":"static","defaultCpuSet":"0-3","checksum":1}`,
		changeclass.MemoryManagerStateFile: `{"policyName":"None","machineState":{},"checksum":1}`,
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s := prepareStateFiles(root, next, "local", false, log)
		if s.plan.Change.Class != changeclass.Restart {
			b.Fatal(s.plan.Change)
		}
		s.record()
	}
}
