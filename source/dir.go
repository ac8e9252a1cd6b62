package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// AssignmentFile is the file in a Dir source that holds the assignment: a
// NodeConfigSource in YAML or JSON, decoded strictly. A missing file (in an
// existing folder), an empty one or "null" is the empty assignment.
const AssignmentFile = "assignment.yaml"

// ConfigMapsDir is the folder in a Dir source that holds the ConfigMaps, one
// ConfigMap in YAML or JSON per *.yaml, *.yml or *.json file, each named
// after the ConfigMap it holds: <name>.yaml.
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
// for demos:
//
//	<Path>/assignment.yaml              the assignment (AssignmentFile)
//	<Path>/configmaps/<name>.yaml       ConfigMap <namespace>/<name> (or .yml, .json)
//
// Name each ConfigMap file after the ConfigMap it holds: Assigned then reads
// the assignment and the files named after the assigned ConfigMap, and no
// other file, however many there are. Files named otherwise (allowed before
// this convention, and still read) are read only when no file named after
// the assigned ConfigMap holds it, for example when it shares its name with
// a ConfigMap of another namespace; then every ConfigMap file is read, which
// takes time in proportion to their number. A file named after the
// ConfigMap wins over one named otherwise that defines it too (that one is
// not read); two files that are both read and both define it are an error.
// Dot-files, other extensions and anything but regular files (or links to
// one) are ignored.
//
// Every file is read with merge.ReadFile, the one reader of local config
// paths: a link is followed to a regular file (a ConfigMap volume's files
// are links); a FIFO, a device or a file larger than
// merge.MaxDocumentSize (4 MiB, four times what the API server stores in a
// ConfigMap) is an error naming the file, never a wait or a whole read. An
// assignment.yaml that is a link to nothing is an error too, not the empty
// assignment.
//
// Every file read is decoded strictly, as the config itself is: field
// names are case-sensitive, and unknown fields, duplicate fields and a
// second YAML document are errors naming the file and the field. A
// ConfigMap file must give metadata.namespace, metadata.name and
// metadata.uid; its kind and apiVersion, when given, must be ConfigMap and
// v1. A ConfigMap without a resourceVersion gets one derived from its
// content, so an edit is a new version, as on an API server.
//
// It fails loudly, never with a silent "no assignment": a missing folder
// (Path, or configmaps/ while the assignment names a ConfigMap) or a Path
// that is not a folder is an error naming it; so is a folder without
// assignment.yaml that holds a misspelt one (assignment.yml,
// Assignment.yaml, assignments.json...), and a configmaps/ folder under
// another name (configmap/, ConfigMaps/). An assigned ConfigMap that no file
// holds is an error that names the files that look meant to hold it: one
// named after it that holds another ConfigMap, one with another extension
// (kubelet-a.yaml.bak, kubelet-a.txt) or one that is not a regular file.
//
// Replace files atomically (write a temporary dot-file in the same folder,
// then rename it): a half-written assignment is read as whatever it says,
// an empty one as the empty assignment.
type Dir struct {
	opts DirOptions
}

// NewDir validates opts and returns a Dir source. The folder need not exist
// yet, but Assigned reports an error until it does.
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

// Assigned reads assignment.yaml and resolves it against configmaps/,
// reading the ConfigMap files as the Dir documentation says: the one named
// after the assigned ConfigMap, or, when none is, all of them. A missing
// folder, an unreadable file and a ConfigMap file that does not decode are
// plain errors naming the folder or the file; an assignment file that does
// not decode is an *InvalidError naming the file.
func (d *Dir) Assigned(ctx context.Context) (Assignment, error) {
	path := filepath.Join(d.opts.Path, AssignmentFile)
	data, err := merge.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A link to nothing is a broken assignment, not a missing one.
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			return Assignment{}, fmt.Errorf("read assignment: %s is a link to %s, which does not exist", path, target)
		}
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		fi, serr := os.Stat(d.opts.Path)
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			return Assignment{}, fmt.Errorf("directory source %s does not exist", d.opts.Path)
		case serr == nil && !fi.IsDir():
			return Assignment{}, fmt.Errorf("directory source %s is not a directory", d.opts.Path)
		}
		// No assignment file is the empty assignment, unless one is
		// there under another name: a misspelt assignment must not
		// silently mean "run the local config".
		if near := nearNames(d.opts.Path, isAssignmentLike); len(near) > 0 {
			return Assignment{}, fmt.Errorf("directory source %s has no %s but has %s: the assignment file must be named %s (no %s is the empty assignment)",
				d.opts.Path, AssignmentFile, strings.Join(near, ", "), AssignmentFile, AssignmentFile)
		}
		return Assignment{}, nil
	}
	if err != nil {
		return Assignment{}, fmt.Errorf("read assignment: %w", err)
	}
	src, err := decodeDirAssignment(data)
	if err != nil {
		return Assignment{}, invalid("invalid NodeConfigSource in %s: %v", path, err)
	}
	if src == nil {
		return Assignment{}, nil
	}
	if err := nodeapi.Validate(src); err != nil {
		return Assignment{}, err
	}
	cm, err := d.find(src.ConfigMap.Namespace, src.ConfigMap.Name)
	if err != nil {
		return Assignment{}, err
	}
	resolved, err := Resolve(src, cm, d.opts.PayloadKey)
	if err != nil {
		return Assignment{}, err
	}
	return Assignment{Source: resolved, ConfigMap: cm}, nil
}

// configMapExts are the file name extensions of ConfigMap files.
var configMapExts = []string{".yaml", ".yml", ".json"}

// find returns the ConfigMap namespace/name from configmaps/, or nil. It
// reads the files named after it (<name>.yaml, .yml, .json); only when none
// of them holds it does it read every other file (the layout from before
// files were named after their ConfigMap).
func (d *Dir) find(namespace, name string) (*corev1.ConfigMap, error) {
	dir := filepath.Join(d.opts.Path, ConfigMapsDir)
	var named []string
	if safeFileName(name) {
		for _, ext := range configMapExts {
			f := filepath.Join(dir, name+ext)
			fi, err := os.Stat(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read ConfigMap file: %w", err)
			}
			if fi.Mode().IsRegular() {
				named = append(named, f)
			}
		}
	}
	found, held, err := findIn(named, namespace, name)
	if err != nil || found != nil {
		return found, err
	}
	files, err := d.configMapFiles()
	if errors.Is(err, fs.ErrNotExist) {
		msg := fmt.Sprintf("directory %s does not exist (looking for ConfigMap %s/%s)", dir, namespace, name)
		if near := nearNames(d.opts.Path, isConfigMapsDirLike); len(near) > 0 {
			msg += fmt.Sprintf("; found %s: the folder must be named %s", strings.Join(near, ", "), ConfigMapsDir)
		}
		return nil, errors.New(msg)
	}
	if err != nil {
		return nil, err
	}
	var others []string
	for _, f := range files {
		if !slices.Contains(named, f) {
			others = append(others, f)
		}
	}
	found, _, err = findIn(others, namespace, name)
	if err != nil || found != nil {
		return found, err
	}
	// Not found: say why when a file looks meant to hold it.
	var why []string
	for i, f := range named {
		why = append(why, fmt.Sprintf("%s holds ConfigMap %q instead", f, held[i]))
	}
	if safeFileName(name) {
		for _, f := range nearNames(dir, func(n string) bool { return unreadConfigMapFileOf(dir, n, name) }) {
			why = append(why, fmt.Sprintf("%s is not read (a ConfigMap file is a regular file named <name>.yaml, .yml or .json)", filepath.Join(dir, f)))
		}
	}
	if len(why) > 0 {
		return nil, invalid("ConfigMap %s/%s does not exist: %s", namespace, name, strings.Join(why, "; "))
	}
	return nil, nil
}

// nearNames lists the names in dir that match, sorted, skipping dot-files
// (temporary files of atomic writes). An unreadable dir has none.
func nearNames(dir string, match func(name string) bool) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && match(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// isAssignmentLike reports whether a file name looks meant to be the
// assignment file: another case, extension or spelling of it
// ("assignment.yml", "Assignment.yaml", "assignments.json").
func isAssignmentLike(name string) bool {
	base, _, _ := strings.Cut(strings.ToLower(name), ".")
	switch base {
	case "assignment", "assignments", "assigment", "asignment", "assignement":
		return name != AssignmentFile
	}
	return false
}

// isConfigMapsDirLike reports whether a name looks meant to be the
// ConfigMaps folder ("configmap", "ConfigMaps", "config-maps").
func isConfigMapsDirLike(name string) bool {
	n := strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(name), "-", ""), "_", "")
	return name != ConfigMapsDir && strings.HasPrefix(n, "configmap")
}

// unreadConfigMapFileOf reports whether the entry name of dir looks meant to
// hold the ConfigMap called cmName but is not read: named after it with
// another extension ("kubelet-a.yaml.bak", "kubelet-a.txt", "kubelet-a"),
// or with a ConfigMap extension but not a regular file.
func unreadConfigMapFileOf(dir, name, cmName string) bool {
	if name != cmName && !strings.HasPrefix(name, cmName+".") {
		return false
	}
	ext := strings.ToLower(filepath.Ext(name))
	if name == cmName+ext && slices.Contains(configMapExts, ext) {
		// Read when it is a regular file (or a link to one).
		fi, err := os.Stat(filepath.Join(dir, name))
		return err == nil && !fi.Mode().IsRegular()
	}
	return true
}

// findIn reads files and returns the one ConfigMap among them that is
// namespace/name, or nil, and the namespace/name each file holds. Every
// file must hold a valid ConfigMap, and namespace/name may be defined once
// only.
func findIn(files []string, namespace, name string) (*corev1.ConfigMap, []string, error) {
	var found *corev1.ConfigMap
	var at string
	held := make([]string, 0, len(files))
	for _, f := range files {
		data, err := merge.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("read ConfigMap file: %w", err)
		}
		cm, err := decodeDirConfigMap(data)
		if err != nil {
			return nil, nil, fmt.Errorf("invalid ConfigMap in %s: %w", f, err)
		}
		held = append(held, cm.Namespace+"/"+cm.Name)
		if cm.Namespace != namespace || cm.Name != name {
			continue
		}
		if found != nil {
			first, second := min(at, f), max(at, f)
			return nil, nil, fmt.Errorf("ConfigMap %s/%s is defined twice: %s and %s", namespace, name, first, second)
		}
		found, at = cm, f
	}
	return found, held, nil
}

// safeFileName reports whether name can be used as a file name in
// configmaps/ as it is: one path element that is not a dot-file (those are
// never read).
func safeFileName(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\\\x00")
}

// configMapFiles lists the ConfigMap files of configmaps/, sorted: regular
// files (or links to one) named *.yaml, *.yml or *.json, not dot-files. A
// missing folder is an error that wraps fs.ErrNotExist.
func (d *Dir) configMapFiles() ([]string, error) {
	dir := filepath.Join(d.opts.Path, ConfigMapsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if strings.HasPrefix(e.Name(), ".") || !slices.Contains(configMapExts, ext) {
			continue
		}
		f := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			// A dangling link stays in the list: reading it says what
			// is wrong.
			if fi, err := os.Stat(f); err == nil && !fi.Mode().IsRegular() {
				continue
			}
		} else if !e.Type().IsRegular() {
			continue
		}
		files = append(files, f)
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
	// The names in the folder too: a misspelt assignment file that
	// appears is reported by the next Assigned.
	fmt.Fprintf(h, "entries %q\n", nearNames(d.opts.Path, func(string) bool { return true }))
	files = append([]string{filepath.Join(d.opts.Path, AssignmentFile)}, files...)
	for _, f := range files {
		// merge.ReadFile: a FIFO cannot stop the polling, nor a huge
		// file be read whole every PollInterval.
		data, err := merge.ReadFile(f)
		fmt.Fprintf(h, "%s %d %v\n", f, len(data), err)
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
