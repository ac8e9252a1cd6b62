package dynconfig

import (
	"errors"
	"fmt"

	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/merge"
)

// LocalConfig names a component's local config layers. Every field is
// optional; with none set the local config is the profile's defaults.
type LocalConfig struct {
	// InitFile is the shared (init) config file (the kubelet's --config). A
	// remote config replaces it.
	InitFile string
	// DropInDir holds *.conf drop-ins applied over the base in lexical order
	// (the kubelet's --config-dir).
	DropInDir string
	// InstanceFile is the instance-specific config of the KEP, applied over
	// the base and drop-ins as a strategic merge patch; it must have the
	// same apiVersion and kind.
	InstanceFile string
	// Flags are the explicitly set command-line flags, on top of everything
	// (merge.Pipeline.FlagOverrides builds them from a pflag.FlagSet).
	Flags []merge.Override
}

// NewLayers returns the Layers of a component over package merge: the files
// of local are read on every Build, so a restart sees their current content.
func NewLayers[T any](p *merge.Pipeline[T], local LocalConfig) (Layers[T], error) {
	if p == nil {
		return nil, errors.New("dynconfig: NewLayers: pipeline is nil")
	}
	return &mergeLayers[T]{p: p, local: local}, nil
}

type mergeLayers[T any] struct {
	p     *merge.Pipeline[T]
	local LocalConfig
}

// HasInitConfig reports whether LocalConfig.InitFile is set.
func (l *mergeLayers[T]) HasInitConfig() bool { return l.local.InitFile != "" }

// Build merges base (or the init file) with the drop-ins, the instance file
// and the flags. Decode problems in any document are StageDecode errors;
// policy and validation problems are StageValidate errors.
func (l *mergeLayers[T]) Build(base *Document) (*T, error) {
	res, err := l.merge(base)
	if err != nil {
		return nil, err
	}
	return res.Object, nil
}

// merge is Build, with the merge's provenance.
func (l *mergeLayers[T]) merge(base *Document) (*merge.Result[T], error) {
	layers := merge.Layers{Base: base, Flags: l.local.Flags}
	if base == nil && l.local.InitFile != "" {
		doc, err := readDocument(l.local.InitFile)
		if err != nil {
			return nil, err
		}
		layers.Base = doc
	}
	if l.local.DropInDir != "" {
		docs, err := l.p.ReadDropIns(l.local.DropInDir)
		if err != nil {
			return nil, err
		}
		layers.DropIns = docs
	}
	if l.local.InstanceFile != "" {
		doc, err := readDocument(l.local.InstanceFile)
		if err != nil {
			return nil, err
		}
		layers.Instance = doc
	}
	res, err := l.p.Merge(layers)
	if err != nil {
		return nil, MergeFailure(err)
	}
	return res, nil
}

// MergeFailure classifies an error of merge.Pipeline.Merge for lkg.Decide:
// a merge.Error with decode problems is a StageDecode failure, anything
// else (policy, validation) a StageValidate failure. Layers built on a
// merge pipeline return it from Build.
func MergeFailure(err error) error {
	var me *merge.Error
	if errors.As(err, &me) && len(me.Decode) > 0 {
		return &lkg.ConfigError{Stage: lkg.StageDecode, Err: err}
	}
	return &lkg.ConfigError{Stage: lkg.StageValidate, Err: err}
}

// readDocument reads a local config file with merge.ReadFile, the one
// reader of config paths: a FIFO, a device or a huge file is refused.
func readDocument(path string) (*Document, error) {
	data, err := merge.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	return &Document{Name: path, Data: data}, nil
}
