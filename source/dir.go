package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// AssignmentFile is the file in a Dir source that holds the assignment: a
// NodeConfigSource in YAML or JSON. Missing, empty or "null" means the empty
// assignment.
const AssignmentFile = "assignment.yaml"

// ConfigMapsDir is the folder in a Dir source that holds the ConfigMaps, one
// YAML or JSON object per *.yaml, *.yml or *.json file.
const ConfigMapsDir = "configmaps"

// DirOptions configures a Dir source.
type DirOptions struct {
	// Path is the folder. Required.
	Path string
	// PayloadKey is the data key used when the assignment does not name one
	// (the profile's key). Required.
	PayloadKey string
	// PollInterval is how often Run looks for changes. Default 1s.
	PollInterval time.Duration
}

// Dir is a Remote backed by a folder, for nodes without an API server and
// for demos: <Path>/assignment.yaml names the ConfigMap to run, and
// <Path>/configmaps/ holds ConfigMaps. Replace files atomically (write a
// temporary file in the same folder, then rename it): a half-written
// assignment is read as whatever it says, an empty one as the empty
// assignment. A ConfigMap without a
// resourceVersion gets one derived from its content, so an edit is a new
// version, as on an API server.
type Dir struct {
	opts DirOptions
}

// NewDir validates opts and returns a Dir source. The folder need not exist
// yet: a missing folder is the empty assignment.
func NewDir(opts DirOptions) (*Dir, error) {
	if opts.Path == "" {
		return nil, errors.New("source: DirOptions.Path is required")
	}
	if opts.PayloadKey == "" {
		return nil, errors.New("source: DirOptions.PayloadKey is required")
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("source: DirOptions.PollInterval must not be negative, got %v", opts.PollInterval)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Second
	}
	return &Dir{opts: opts}, nil
}

// Assigned reads assignment.yaml and resolves it against configmaps/.
func (d *Dir) Assigned(ctx context.Context) (Assignment, error) {
	path := filepath.Join(d.opts.Path, AssignmentFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Assignment{}, nil
	}
	if err != nil {
		return Assignment{}, fmt.Errorf("read assignment: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return Assignment{}, nil
	}
	var src corev1.NodeConfigSource
	if err := yaml.UnmarshalStrict(data, &src); err != nil {
		return Assignment{}, invalid("invalid NodeConfigSource in %s: %v", path, err)
	}
	if err := Validate(&src); err != nil {
		return Assignment{}, err
	}
	cm, err := d.find(src.ConfigMap.Namespace, src.ConfigMap.Name)
	if err != nil {
		return Assignment{}, err
	}
	resolved, err := Resolve(&src, cm, d.opts.PayloadKey)
	if err != nil {
		return Assignment{}, err
	}
	return Assignment{Source: resolved, ConfigMap: cm}, nil
}

// find returns the ConfigMap namespace/name from configmaps/, or nil.
func (d *Dir) find(namespace, name string) (*corev1.ConfigMap, error) {
	files, err := d.configMapFiles()
	if err != nil {
		return nil, err
	}
	var found *corev1.ConfigMap
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(data, &cm); err != nil {
			return nil, fmt.Errorf("%s: not a ConfigMap: %w", f, err)
		}
		if cm.Kind != "" && cm.Kind != "ConfigMap" {
			return nil, fmt.Errorf("%s: kind is %q, want ConfigMap", f, cm.Kind)
		}
		if cm.Namespace != namespace || cm.Name != name {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s is defined twice in %s", namespace, name, filepath.Join(d.opts.Path, ConfigMapsDir))
		}
		if cm.ResourceVersion == "" {
			sum := sha256.Sum256(data)
			cm.ResourceVersion = hex.EncodeToString(sum[:6])
		}
		cm.Kind, cm.APIVersion = "ConfigMap", "v1"
		found = &cm
	}
	return found, nil
}

func (d *Dir) configMapFiles() ([]string, error) {
	dir := filepath.Join(d.opts.Path, ConfigMapsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		files = append(files, filepath.Join(dir, e.Name()))
	}
	sort.Strings(files)
	return files, nil
}

// Run polls the folder every PollInterval and calls changed when the
// assignment file or any ConfigMap file changed (by content). It also calls
// changed once right after it took its first look, so that a change made
// between an earlier Assigned and the start of Run is not missed.
func (d *Dir) Run(ctx context.Context, changed func()) error {
	last := d.fingerprint()
	changed()
	t := time.NewTicker(d.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if fp := d.fingerprint(); fp != last {
			last = fp
			changed()
		}
	}
}

// fingerprint hashes the content of every file the source reads. Errors
// are folded into the hash: an unreadable file is a state like any other.
func (d *Dir) fingerprint() string {
	h := sha256.New()
	files, err := d.configMapFiles()
	if err != nil {
		fmt.Fprintf(h, "list error %v\n", err)
	}
	files = append([]string{filepath.Join(d.opts.Path, AssignmentFile)}, files...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		fmt.Fprintf(h, "%s %d %v\n", f, len(data), err != nil)
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
