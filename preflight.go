package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
)

// PreflightLayers is implemented by Layers that can say which fields of a
// candidate config another of the node's layers sets again, for the
// pre-flight check (nodeapi.PreflightRequest). NewLayers' Layers and
// package kubeletdropin's implement it; Layers that do not are checked
// with Build alone, and never answer Overridden.
type PreflightLayers interface {
	// Preflight builds the config over candidate as Build does (the same
	// strict decode, policy and validation, the same error), without any
	// side effect of Build (no warning logged, no Event), and returns the
	// fields candidate sets that another layer sets again, each
	// "path (by LAYER)", sorted.
	Preflight(candidate *Document) (overridden []string, err error)
}

// checkPreflight answers the pre-flight request on the Node, when the
// Remote carries them (source.Preflighter): it reads the candidate as an
// assignment is read, and checks it as a decision would (preflightVerdict).
// Nothing is checkpointed, made current or restarted. The answer is kept
// in the state and published with the next report (configStatus). A
// request that cannot be read now (the API server does not answer) keeps
// the last answer; no request clears it.
func (c *Controller[T]) checkPreflight(ctx context.Context) {
	pf, ok := c.opts.Remote.(source.Preflighter)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	req, a, err := pf.Preflight(ctx)
	var invalid *nodeapi.InvalidError
	var res *nodeapi.PreflightResult
	switch {
	case err != nil && (req == nil || !errors.As(err, &invalid)):
		logger.Error(err, "Reading the pre-flight request; the last answer stands")
		return
	case req == nil:
	case err != nil:
		res = &nodeapi.PreflightResult{Candidate: req.Candidate, Verdict: nodeapi.PreflightFail, Message: err.Error()}
	default:
		res = c.preflightVerdict(req, a)
	}
	c.mu.Lock()
	same := preflightEqual(c.st.preflight, res)
	c.st.preflight = res
	c.mu.Unlock()
	if !same && res != nil {
		logger.Info("Answered the pre-flight request", "rollout", req.Holder(), "candidate", describe(req.Candidate),
			"verdict", res.Verdict, "fields", res.Fields, "message", res.Message)
	}
}

// preflightVerdict checks a resolved candidate against this node: its
// trial annotations, a bad mark this node holds for it, the build with
// the node's layers (PreflightLayers when they implement it, else Build),
// and a writable state dir, which a new config is checkpointed in.
func (c *Controller[T]) preflightVerdict(req *nodeapi.PreflightRequest, a source.Assignment) *nodeapi.PreflightResult {
	res := &nodeapi.PreflightResult{Candidate: req.Candidate, Verdict: nodeapi.PreflightPass}
	fail := func(format string, args ...any) *nodeapi.PreflightResult {
		res.Verdict, res.Message = nodeapi.PreflightFail, fmt.Sprintf(format, args...)
		return res
	}
	cm := a.ConfigMap
	if _, err := components.TrialFromAnnotations(cm.Annotations, c.opts.DefaultTrial); err != nil {
		return fail("ConfigMap %s/%s: %v", cm.Namespace, cm.Name, err)
	}
	if c.store != nil {
		// The store is open: Run's steps hold the state dir (external
		// roles take it for the step). A mark that cannot be read is
		// not evidence either way.
		if marks, err := c.store.BadMarks(); err == nil {
			if _, mark, ok := marks.Lookup(a.Source); ok {
				return fail("marked bad on this node since %s: %s", mark.Time.UTC().Format("2006-01-02T15:04:05Z"), mark.Reason)
			}
		}
	}
	key := nodeapi.PayloadKeyOf(a.Source, c.opts.Profile.PayloadKey())
	doc := &Document{Name: fmt.Sprintf("configmap %s/%s key %s", cm.Namespace, cm.Name, key), Data: []byte(cm.Data[key])}
	var err error
	if pl, ok := c.opts.Layers.(PreflightLayers); ok {
		res.Fields, err = pl.Preflight(doc)
	} else {
		_, err = c.opts.Layers.Build(doc)
	}
	if err != nil {
		return fail("%v", err)
	}
	if err := stateDirWritable(c.opts.StateDir); err != nil {
		res.Fields = nil
		return fail("%v", err)
	}
	if len(res.Fields) > 0 {
		res.Verdict = nodeapi.PreflightOverridden
	}
	return res
}

// stateDirWritable reports whether this process may write in the state
// dir (access(2) with W_OK: a read-only mount answers EROFS). A new
// config is checkpointed there before it runs.
func stateDirWritable(dir string) error {
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("the state dir %s is not writable: %w", dir, err)
	}
	return nil
}

func preflightEqual(a, b *nodeapi.PreflightResult) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Verdict == b.Verdict && a.Message == b.Message && slices.Equal(a.Fields, b.Fields) && a.Answers(b.Candidate)
}

// Preflight implements PreflightLayers for the layers of NewLayers: the
// candidate is the base (in the init file's place), and a field it sets
// is overridden when a drop-in, the instance file or a flag sets it
// again.
func (l *mergeLayers[T]) Preflight(candidate *Document) ([]string, error) {
	res, err := l.merge(candidate)
	if err != nil {
		return nil, err
	}
	// What candidate sets: its fields merged alone. Alone it may not
	// validate (a drop-in may supply what it lacks): validation errors
	// carry the provenance too.
	mine, ok := merge.ProvenanceOf(l.p.Merge(merge.Layers{Base: candidate}))
	if !ok {
		return nil, nil
	}
	var out []string
	for path, layer := range mine {
		if path == "apiVersion" || path == "kind" || layer != candidate.Name {
			continue // every document says them; defaults are no one's
		}
		if by := res.Provenance[path]; by != candidate.Name {
			out = append(out, fmt.Sprintf("%s (by %s)", path, by))
		}
	}
	slices.Sort(out)
	return out, nil
}
