package kubeletdropin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/merge"
)

// DefaultName is the name of dynconfig's drop-in file in the kubelet's
// --config-dir. Drop-ins merge in lexical order, the later file winning:
// "99-" puts it after the usual numbered drop-ins of a node image.
const DefaultName = "99-dynconfig.conf"

// Config is the kubelet's config type.
type Config = kubeletv1beta1.KubeletConfiguration

// Files names the kubelet's config files on the node.
type Files struct {
	// Config is the kubelet's --config file, the base of the merge.
	// Optional (the kubelet then starts from its defaults).
	Config string
	// ConfigDir is the kubelet's --config-dir. Required.
	ConfigDir string
	// Name is dynconfig's drop-in file in ConfigDir, a *.conf name without
	// a directory. Default: DefaultName.
	Name string
}

func (f *Files) complete() error {
	if f.ConfigDir == "" {
		return errors.New("kubeletdropin: Files.ConfigDir (the kubelet's --config-dir) is required")
	}
	if f.Name == "" {
		f.Name = DefaultName
	}
	if f.Name != filepath.Base(f.Name) || filepath.Ext(f.Name) != merge.DropInSuffix || strings.HasPrefix(f.Name, ".") {
		return fmt.Errorf("kubeletdropin: Files.Name %q must be a file name ending in %s, not hidden, without a directory", f.Name, merge.DropInSuffix)
	}
	return nil
}

// Path is the path of dynconfig's drop-in.
func (f Files) Path() string {
	if f.Name == "" {
		return filepath.Join(f.ConfigDir, DefaultName)
	}
	return filepath.Join(f.ConfigDir, f.Name)
}

// NewLayers returns the Layers that build the kubelet's effective config
// the way the kubelet does: the base config file, then every *.conf
// drop-in of ConfigDir in lexical order, with the candidate config in the
// place of dynconfig's drop-in (the local config is the node's files
// without it). The node's files decode leniently, as the kubelet decodes
// them; the candidate strictly. The files are read on every Build.
func NewLayers(f Files, log logr.Logger) (dynconfig.Layers[Config], error) {
	if err := f.complete(); err != nil {
		return nil, err
	}
	p, err := merge.New[Config](kubelet.Profile{}, merge.Options{Lenient: true, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("kubeletdropin: %w", err)
	}
	return &layers{files: f, p: p, log: log}, nil
}

type layers struct {
	files Files
	p     *merge.Pipeline[Config]
	log   logr.Logger
	// overriddenHook, when set, is told of every Build that finds fields
	// of the candidate overridden (Run records them as a Node Event).
	overriddenHook func(config string, fields []string)
}

// HasInitConfig reports whether the kubelet has a --config file.
func (l *layers) HasInitConfig() bool { return l.files.Config != "" }

// Build merges the node's files with candidate in dynconfig's place (nil:
// without it), defaults and validates the result.
func (l *layers) Build(candidate *dynconfig.Document) (*Config, error) {
	cfg, over, err := l.build(candidate)
	if err != nil {
		return nil, err
	}
	if len(over) > 0 {
		l.log.Info("Warning: node drop-ins that sort after dynconfig's file set fields of the assigned config again; the kubelet runs their values, not the assigned ones",
			"config", candidate.Name, "file", l.files.Path(), "overridden", over)
		if l.overriddenHook != nil {
			l.overriddenHook(candidate.Name, over)
		}
	}
	return cfg, nil
}

// build is Build without its warning: the config, and the fields of
// candidate that a later drop-in overrides (overridden).
func (l *layers) build(candidate *dynconfig.Document) (*Config, []string, error) {
	var ls merge.Layers
	if l.files.Config != "" {
		data, err := merge.ReadFile(l.files.Config)
		if err != nil {
			return nil, nil, fmt.Errorf("kubelet config file: %w", err)
		}
		ls.Base = &merge.Document{Name: l.files.Config, Data: data}
	}
	docs, err := l.p.ReadDropIns(l.files.ConfigDir)
	if err != nil {
		return nil, nil, err
	}
	ls.DropIns = place(docs, l.files, candidate)
	res, err := l.p.Merge(ls)
	if err != nil {
		return nil, nil, dynconfig.MergeFailure(err)
	}
	var over []string
	if candidate != nil {
		// Lenient for the node's files, strict for what dynconfig applies.
		var ignored []string
		for _, w := range res.Warnings {
			if strings.HasPrefix(w, candidate.Name+": ") {
				ignored = append(ignored, w)
			}
		}
		if len(ignored) > 0 {
			return nil, nil, &lkg.ConfigError{Stage: lkg.StageDecode, Err: errors.New(strings.Join(ignored, "; "))}
		}
		over = l.overridden(ls, candidate, res.Provenance)
	}
	return res.Object, over, nil
}

// overridden returns, sorted, "field (by FILE)" for every field the
// candidate sets that a node drop-in sorting after dynconfig's file sets
// again: the kubelet merges that file last, so its value, not the
// assigned one, is what runs (an operator changing evictionHard on many
// nodes wants to know where the change does not take). placed is the
// provenance of the merge with the candidate in its place; the fields the
// candidate sets are those it wins when merged last.
func (l *layers) overridden(ls merge.Layers, candidate *dynconfig.Document, placed map[string]string) []string {
	n := len(ls.DropIns)
	if n == 0 || ls.DropIns[n-1].Name == candidate.Name {
		return nil // nothing sorts after it
	}
	last := ls
	last.DropIns = make([]merge.Document, 0, n)
	for _, d := range ls.DropIns {
		if d.Name != candidate.Name {
			last.DropIns = append(last.DropIns, d)
		}
	}
	last.DropIns = append(last.DropIns, *candidate)
	// Merged last, the candidate may not validate (it may set a locked
	// gate the later file sets back): validation errors carry the
	// provenance too.
	prov, ok := merge.ProvenanceOf(l.p.Merge(last))
	if !ok {
		return nil
	}
	var out []string
	for path, layer := range prov {
		if path == "apiVersion" || path == "kind" {
			continue // every document says them
		}
		if layer == candidate.Name && placed[path] != candidate.Name {
			out = append(out, fmt.Sprintf("%s (by %s)", path, placed[path]))
		}
	}
	slices.Sort(out)
	return out
}

// place returns docs (the config dir's drop-ins, in the kubelet's order)
// without dynconfig's file, and with candidate where that file sorts.
func place(docs []merge.Document, f Files, candidate *dynconfig.Document) []merge.Document {
	ours := f.Path()
	out := make([]merge.Document, 0, len(docs)+1)
	placed := candidate == nil
	for _, d := range docs {
		if filepath.Clean(d.Name) == filepath.Clean(ours) {
			continue
		}
		if !placed {
			// A drop-in in a subdirectory sorts by that directory's name.
			rel, err := filepath.Rel(f.ConfigDir, d.Name)
			if err == nil && strings.SplitN(filepath.ToSlash(rel), "/", 2)[0] > f.Name {
				out = append(out, *candidate)
				placed = true
			}
		}
		out = append(out, d)
	}
	if !placed {
		out = append(out, *candidate)
	}
	return out
}

// header starts dynconfig's drop-in: a YAML comment, which the kubelet's
// decoder and ours skip.
func header(ch dynconfig.Chosen) string {
	cm := ch.Source.ConfigMap
	role := "assigned"
	if ch.UsingLastKnownGood {
		role = "last-known-good"
	}
	return fmt.Sprintf("# Written by dynconfig before this kubelet start; do not edit: it is rewritten or removed\n"+
		"# before every start. Config (%s): ConfigMap %s/%s uid %s resourceVersion %s key %s.\n",
		role, cm.Namespace, cm.Name, cm.UID, cm.ResourceVersion, cm.KubeletConfigKey)
}

// Apply writes the chosen config as dynconfig's drop-in, or removes the
// drop-in for the local config; both atomically and durably (the config dir
// is fsynced). It is the External.Apply of the pre-start role.
func (f Files) Apply(_ context.Context, ch dynconfig.Chosen) error {
	if err := f.complete(); err != nil {
		return err
	}
	if ch.Source == nil || ch.Document == nil {
		return f.Remove()
	}
	data := append([]byte(header(ch)), ch.Document.Data...)
	if err := atomicfile.WriteFile(f.Path(), data, 0o644); err != nil {
		return fmt.Errorf("kubeletdropin: writing %s: %w", f.Path(), err)
	}
	return nil
}

// Remove removes dynconfig's drop-in, durably; a missing one is fine.
func (f Files) Remove() error {
	if err := f.complete(); err != nil {
		return err
	}
	err := os.Remove(f.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubeletdropin: removing %s: %w", f.Path(), err)
	}
	return atomicfile.SyncDir(f.ConfigDir)
}
