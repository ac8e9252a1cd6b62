package kubeletdropin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet/changeclass"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/internal/strictjson"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// The kubelet's state files and a drain-class change
//
// Some fields of the kubelet's config are checked at its start against a
// checkpoint it keeps in its root dir (package changeclass says which, and
// why): a change of one makes the kubelet refuse to start until the
// checkpoint is removed, and upstream removes it only on a drained node.
// The pre-start role, which runs with the kubelet stopped, is where
// dynconfig removes them; the rule and the two records it reads, both in
// the kubelet's root dir beside the files they describe (so that a node
// whose root dir is wiped loses its state files and the records together):
//
//   - StateConfigFile records the effective config the kubelet's state
//     files were last made for. Before every start the pre-start role
//     compares it with the effective config the kubelet is about to start
//     with (changeclass.Compare). On a Drain change it removes the state
//     files the change names, fsyncs the root dir, writes dynconfig's
//     drop-in, and only then records the new config: a crash anywhere
//     before the record leaves the old record, so the next start compares
//     again and removes again (harmless: the node is still drained; for a
//     policy change, only when a checkpoint still names the old policy).
//     When it may not remove
//     (below), it leaves the record: the kubelet then refuses to start, the
//     crash-loop rule rolls back to the config the files were made for, and
//     that start compares equal and removes nothing. When none of the named
//     files exists, nothing needs removing and the new config is recorded.
//     The CPU and memory managers' checkpoints name their policy
//     themselves, and what they say wins over the record: a record that
//     is missing, unreadable or stale never hides a policy change (without
//     a record, only the policies are compared).
//   - DrainedFile (MarkDrained, Drained, ClearDrained) says that the run
//     role cordoned the node and evicted its pods, and that the node stays
//     cordoned while the mark exists: the run role writes it once the drain
//     has finished and before it restarts the kubelet, and removes it
//     before it uncordons. It names the config it drained for (a message,
//     not a key: any mark allows the removal). A mark serves one change:
//     once the pre-start role removed files on it and recorded the new
//     config, it removes the mark, so that a mark the run role failed to
//     remove never lets a later change through undrained (a rollback
//     during the trial is a fallback and needs none; a run role that
//     drains for a rollback marks again). The run role learns whether
//     a config needs the drain from StateChange, the comparison the
//     pre-start role will make.
//
// The rule: the pre-start role removes the state files of a Drain change
// when the node is marked drained, or when the config to start is a
// fallback the node chose itself (its last-known-good, or its own local
// config), which cannot wait for a drain. Upstream warns against removing
// the CPU manager's state under running pods that hold exclusive CPUs (they
// keep their CPUs while others may be given them); not removing makes the
// rollback target crash-loop as well, and a kubelet that cannot start takes
// every pod of the node out of its Services. A forward change that was not
// drained is never applied by removal: the kubelet refuses it, as it does
// without dynconfig, and the node rolls back.

// DefaultKubeletRootDir is the kubelet's default --root-dir.
const DefaultKubeletRootDir = "/var/lib/kubelet"

// The files dynconfig keeps in the kubelet's root dir.
const (
	// StateConfigFile records the effective config the kubelet's state
	// files were made for.
	StateConfigFile = "dynconfig-state-config.json"
	// DrainedFile is the run role's mark that the node is drained.
	DrainedFile = "dynconfig-drained.json"
)

// recordVersion is the format version of both records; a reader refuses
// another.
const recordVersion = 1

// maxRecord bounds a record read from disk.
const maxRecord = 1 << 20

func rootOrDefault(rootDir string) string {
	if rootDir == "" {
		return DefaultKubeletRootDir
	}
	return rootDir
}

// DrainedMark is what MarkDrained records.
type DrainedMark struct {
	// Config names the config the node was drained for (for messages).
	Config string `json:"config"`
	// Time is when the drain finished.
	Time time.Time `json:"time"`
}

type drainedRecord struct {
	Version int `json:"version"`
	DrainedMark
}

// MarkDrained records, durably, in the kubelet's root dir (rootDir; ""
// means DefaultKubeletRootDir), that the node is cordoned and its pods were
// evicted to apply config (a description, e.g. nodeapi.DescribeSource).
// The run role calls it after the drain finished and before it restarts the
// kubelet, and calls ClearDrained before it uncordons: while the mark
// exists, the pre-start role may remove the state files a drain-class
// change names. The root dir must exist.
func MarkDrained(rootDir, config string) error {
	rootDir = rootOrDefault(rootDir)
	data, err := json.Marshal(drainedRecord{Version: recordVersion, DrainedMark: DrainedMark{Config: config, Time: time.Now().UTC()}})
	if err != nil {
		return fmt.Errorf("kubeletdropin: encoding the drained mark: %w", err)
	}
	path := filepath.Join(rootDir, DrainedFile)
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("kubeletdropin: writing the drained mark %s: %w", path, err)
	}
	return nil
}

// Drained returns the drained mark of the kubelet's root dir (rootDir; ""
// means DefaultKubeletRootDir); nil without one. A mark that does not
// decode is an error naming the file.
func Drained(rootDir string) (*DrainedMark, error) {
	path := filepath.Join(rootOrDefault(rootDir), DrainedFile)
	data, err := atomicfile.ReadRegular(path, maxRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubeletdropin: reading the drained mark: %w", err)
	}
	m, err := decodeDrained(data)
	if err != nil {
		return nil, fmt.Errorf("kubeletdropin: drained mark %s: %w", path, err)
	}
	return m, nil
}

func decodeDrained(data []byte) (*DrainedMark, error) {
	var r drainedRecord
	if err := strictjson.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Version != recordVersion {
		return nil, fmt.Errorf("version: %d is not %d", r.Version, recordVersion)
	}
	return &r.DrainedMark, nil
}

// ClearDrained removes the drained mark durably; a missing one is fine.
func ClearDrained(rootDir string) error {
	return removeDurably(rootOrDefault(rootDir), DrainedFile)
}

func removeDurably(dir, name string) error {
	path := filepath.Join(dir, name)
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubeletdropin: removing %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("kubeletdropin: syncing %s after removing %s: %w", dir, name, err)
	}
	return nil
}

// stateRecord is StateConfigFile's content.
type stateRecord struct {
	Version int `json:"version"`
	// Source names the config (a message).
	Source string `json:"source"`
	// Config is the effective config the state files were made for.
	Config *Config `json:"config"`
}

func decodeStateRecord(data []byte) (*stateRecord, error) {
	var r stateRecord
	if err := strictjson.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Version != recordVersion {
		return nil, fmt.Errorf("version: %d is not %d", r.Version, recordVersion)
	}
	if r.Config == nil {
		return nil, errors.New("config: missing")
	}
	return &r, nil
}

// readStateRecord returns the record and its bytes; nil when there is none.
func readStateRecord(rootDir string) (*stateRecord, []byte, error) {
	path := filepath.Join(rootDir, StateConfigFile)
	data, err := atomicfile.ReadRegular(path, maxRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kubeletdropin: reading %s: %w", path, err)
	}
	r, err := decodeStateRecord(data)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeletdropin: %s: %w", path, err)
	}
	return r, data, nil
}

// decodeCheckpointPolicy returns the policy name a checkpoint of the
// kubelet's CPU or memory manager records: its top-level "policyName",
// which every format version of both has. Other fields are ignored.
func decodeCheckpointPolicy(data []byte) (string, error) {
	var cp struct {
		PolicyName string `json:"policyName"`
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		return "", err
	}
	if cp.PolicyName == "" {
		return "", errors.New("policyName: missing")
	}
	return cp.PolicyName, nil
}

// checkpointPolicy returns the policy name of the checkpoint name in
// rootDir; "" when there is none or it cannot be read (logged).
func checkpointPolicy(rootDir, name string, log logr.Logger) string {
	path := filepath.Join(rootDir, name)
	data, err := atomicfile.ReadRegular(path, maxRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err == nil {
		var p string
		if p, err = decodeCheckpointPolicy(data); err == nil {
			return p
		}
	}
	log.Info("Warning: the kubelet's checkpoint does not say its policy; the record alone decides", "file", path, "err", err)
	return ""
}

// lastConfig returns the config the kubelet's state files in rootDir were
// made for, as far as it is known, and the record's bytes: the record,
// with the policy names the CPU and memory managers' checkpoints hold
// themselves, which win over it (a record lost, stale after a failed
// write, or older than the files never hides a policy change). Without a
// record, the fields other than the policies are taken as next's: only
// the policies are known. nil when nothing is known.
func lastConfig(rootDir string, next *Config, log logr.Logger) (*Config, []byte) {
	rec, data, err := readStateRecord(rootDir)
	if err != nil {
		log.Error(err, "The record of the config the kubelet's state files were made for is unreadable; taken as none, it will be rewritten")
	}
	cpu := checkpointPolicy(rootDir, changeclass.CPUManagerStateFile, log)
	memory := checkpointPolicy(rootDir, changeclass.MemoryManagerStateFile, log)
	var last *Config
	switch {
	case rec != nil:
		last = rec.Config.DeepCopy()
	case cpu != "" || memory != "":
		last = next.DeepCopy()
	default:
		return nil, data
	}
	if cpu != "" && cpu != last.CPUManagerPolicy && (cpu != "none" || last.CPUManagerPolicy != "") {
		log.V(1).Info("The CPU manager's checkpoint names its policy", "checkpoint", cpu, "record", last.CPUManagerPolicy)
		last.CPUManagerPolicy = cpu
	}
	if memory != "" && memory != last.MemoryManagerPolicy && (memory != kubeletv1beta1.NoneMemoryManagerPolicy || last.MemoryManagerPolicy != "") {
		log.V(1).Info("The memory manager's checkpoint names its policy", "checkpoint", memory, "record", last.MemoryManagerPolicy)
		last.MemoryManagerPolicy = memory
	}
	return last, data
}

// statePlan is what the pre-start role does with the kubelet's state files
// before a start.
type statePlan struct {
	// Change is the change from the recorded config to the next one.
	Change changeclass.Change
	// Remove are the state files to remove (names in the root dir).
	Remove []string
	// Record is true when the next config is to be recorded once the
	// files are removed and the drop-in written.
	Record bool
	// ConsumeMark is true when the removal is the drained mark's: the
	// mark is removed once the new config is recorded.
	ConsumeMark bool
	// Refused says why a Drain change's files stay; the kubelet will
	// refuse to start.
	Refused string
}

// planStateFiles is the rule of the package doc: change is the change from
// the recorded config to the next, existing the state files it names that
// exist, drained whether the node is marked drained, fallback whether the
// next config is one the node falls back to by itself.
func planStateFiles(change changeclass.Change, existing []string, drained, fallback bool) statePlan {
	p := statePlan{Change: change}
	switch {
	case change.Class != changeclass.Drain || len(existing) == 0:
		p.Record = true
	case drained || fallback:
		p.Remove = existing
		p.Record = true
		p.ConsumeMark = drained
	default:
		p.Refused = "the node is not marked drained and the config is not a fallback; the kubelet will refuse to start on its state files and the node will roll back"
	}
	return p
}

// stateFiles is the pre-start role's handling of the kubelet's state files
// around one Apply.
type stateFiles struct {
	rootDir string
	log     logr.Logger
	plan    statePlan
	next    stateRecord
	// last is the record's bytes (nil: none); the record is not rewritten
	// when unchanged.
	last []byte
}

// prepareStateFiles reads the record and the drained mark and plans for a
// start on next (the effective config; source names it), fallback telling
// whether it is a fallback of the node's own. Problems reading the records
// are logged, never fatal: an unreadable record is no change, an
// unreadable mark is no mark.
func prepareStateFiles(rootDir string, next *Config, source string, fallback bool, log logr.Logger) *stateFiles {
	s := &stateFiles{rootDir: rootDir, log: log, next: stateRecord{Version: recordVersion, Source: source, Config: next}}
	last, data := lastConfig(rootDir, next, log)
	s.last = data
	change := changeclass.Compare(last, next)
	var existing []string
	for _, name := range change.StateFiles {
		if _, err := os.Lstat(filepath.Join(rootDir, name)); err == nil {
			existing = append(existing, name)
		}
	}
	drained := false
	if change.Class == changeclass.Drain && len(existing) > 0 {
		m, err := Drained(rootDir)
		if err != nil {
			log.Error(err, "The drained mark is unreadable; taken as none")
		}
		drained = m != nil
		if m != nil {
			log.Info("The node is marked drained", "drainedFor", m.Config, "at", m.Time)
		}
	}
	s.plan = planStateFiles(change, existing, drained, fallback)
	switch {
	case change.Class == changeclass.Refuse:
		log.Info("Warning: the kubelet starts on a change that dynconfig does not apply in place", "change", change.String(), "config", source)
	case s.plan.Refused != "":
		log.Info("Warning: a drain-class change, and the kubelet's state files stay: "+s.plan.Refused,
			"change", change.String(), "config", source, "rootDir", rootDir)
	case change.Class == changeclass.Drain && len(existing) == 0:
		log.Info("A drain-class change finds none of the state files it names; nothing to remove", "change", change.String(), "config", source)
	}
	return s
}

// remove removes the planned state files and fsyncs the root dir.
func (s *stateFiles) remove() error {
	if len(s.plan.Remove) == 0 {
		return nil
	}
	for _, name := range s.plan.Remove {
		path := filepath.Join(s.rootDir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kubeletdropin: removing the kubelet's state file %s for %s: %w", path, s.plan.Change, err)
		}
		s.log.Info("Removed the kubelet's state file for a drain-class change", "file", path, "fields", s.plan.Change.Fields, "config", s.next.Source)
	}
	if err := atomicfile.SyncDir(s.rootDir); err != nil {
		return fmt.Errorf("kubeletdropin: syncing %s after removing the kubelet's state files: %w", s.rootDir, err)
	}
	return nil
}

// record writes the next config as the one the state files are made for,
// unless the plan keeps the old record or it is unchanged, and then
// removes the drained mark when the removal was its (a mark serves one
// change). A failure is logged only: the old record makes the next start
// compare again, and a mark left is removed when the node is uncordoned.
func (s *stateFiles) record() {
	if !s.plan.Record || !s.writeRecord() || !s.plan.ConsumeMark {
		return
	}
	if err := ClearDrained(s.rootDir); err != nil {
		s.log.Error(err, "Removing the drained mark the removal used; it stays until the run role uncordons the node")
		return
	}
	s.log.Info("The drained mark served this change and is removed", "config", s.next.Source)
}

// writeRecord writes the next config as the record, unless unchanged; it
// reports whether the record now says it.
func (s *stateFiles) writeRecord() bool {
	data, err := json.Marshal(s.next)
	if err != nil {
		s.log.Error(err, "Encoding the record of the kubelet's state files")
		return false
	}
	data = append(data, '\n')
	if bytes.Equal(data, s.last) {
		return true
	}
	path := filepath.Join(s.rootDir, StateConfigFile)
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		if _, serr := os.Stat(s.rootDir); errors.Is(serr, fs.ErrNotExist) {
			// A kubelet that never ran has no root dir, and no state.
			s.log.V(1).Info("The kubelet's root dir does not exist yet; nothing recorded", "rootDir", s.rootDir)
			return false
		}
		s.log.Error(err, "Writing the record of the config the kubelet's state files are made for; the next start compares with the old one", "file", path)
		return false
	}
	return true
}

// prepareStateFiles plans the state files' handling for a start on ch; nil
// (logged) when the effective config of ch cannot be built, when the
// kubelet is bound to fail on the config anyway.
func (c Common) prepareStateFiles(l dynconfigLayers, ch dynconfig.Chosen, log logr.Logger) *stateFiles {
	next, err := l.Build(ch.Document)
	if err != nil {
		log.Error(err, "Building the effective config to compare the kubelet's state files with; they are left as they are")
		return nil
	}
	return prepareStateFiles(rootOrDefault(c.KubeletRootDir), next, nodeapi.DescribeSource(ch.Source), ch.UsingLastKnownGood || ch.Source == nil, log)
}

type dynconfigLayers = dynconfig.Layers[Config]

// StateChange returns the change the kubelet's state files see when the
// kubelet next starts on candidate (nil: the node's own config): the
// change from the config they were made for, as recorded in
// c.KubeletRootDir, to candidate's effective config (the node's files with
// candidate in dynconfig's place). It is the pre-start role's comparison,
// made ahead: a run role that drains for a Drain change before the restart
// decides as the pre-start role will. Without a record (a kubelet that
// never started under this version of dynconfig) only the policies the
// kubelet's checkpoints record are compared, as by the pre-start role. An
// error means candidate's effective config cannot be built.
func StateChange(c Common, candidate *dynconfig.Document, log logr.Logger) (changeclass.Change, error) {
	l, err := NewLayers(c.Files, log)
	if err != nil {
		return changeclass.Change{}, err
	}
	next, err := l.Build(candidate)
	if err != nil {
		return changeclass.Change{}, err
	}
	last, _ := lastConfig(rootOrDefault(c.KubeletRootDir), next, log)
	return changeclass.Compare(last, next), nil
}
