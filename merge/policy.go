package merge

import (
	"fmt"
	"strings"
)

// Rule says what happens when a platform-provided value meets a value that a
// configuration document sets for the same field.
type Rule int

// The platform value rules, after EKS Anywhere's choices for fields it sets
// itself.
const (
	// PlatformWins: the platform value replaces the documents' value, and a
	// warning names the document that lost.
	PlatformWins Rule = iota + 1
	// UserWins: the platform value applies only when no document sets the
	// field (a default that outranks the built-in one).
	UserWins
	// ErrorIfBoth: a document that sets the field is an error.
	ErrorIfBoth
)

// String returns the rule's name.
func (r Rule) String() string {
	switch r {
	case PlatformWins:
		return "PlatformWins"
	case UserWins:
		return "UserWins"
	case ErrorIfBoth:
		return "ErrorIfBoth"
	}
	return fmt.Sprintf("Rule(%d)", int(r))
}

// PlatformValue is a value the platform provides for one field.
type PlatformValue struct {
	// Path is the field path, such as "providerID" or "registerWithTaints".
	Path string
	// Value is a JSON-compatible Go value of the field's JSON form: a
	// string for a duration, a map[string]string for evictionHard.
	Value any
	// Rule says who wins when a document sets the field too.
	Rule Rule
}

// Policy says which fields a platform owns. It governs the configuration
// documents (base, drop-ins, instance). Flag overrides are not checked
// against it: flags are set by whoever starts the component, which for the
// platform-owned fields is usually the platform itself, and they override
// every layer, platform values included.
type Policy struct {
	// Owner names the platform in errors and in provenance, e.g. "eks-a".
	// Empty means "platform".
	Owner string
	// Locked lists field paths that no document may set, at the path or
	// below it.
	Locked []string
	// Platform lists values the platform provides.
	Platform []PlatformValue
}

type compiledPath struct {
	path string
	segs []pathSeg
}

type compiledPlatform struct {
	compiledPath
	value any
	rule  Rule
	typ   *typeInfo
}

type compiledPolicy struct {
	owner    string
	locked   []compiledPath
	platform []compiledPlatform
}

func compilePolicy(root *typeInfo, pol Policy) (compiledPolicy, error) {
	cp := compiledPolicy{owner: pol.Owner}
	if cp.owner == "" {
		cp.owner = "platform"
	}
	var problems []string
	lockedAt := map[string]bool{}
	for _, path := range pol.Locked {
		segs, _, err := parsePath(root, path)
		if err != nil {
			problems = append(problems, "locked: "+err.Error())
			continue
		}
		canonical := renderPath(segs)
		lockedAt[canonical] = true
		cp.locked = append(cp.locked, compiledPath{path: canonical, segs: segs})
	}
	for i, pv := range pol.Platform {
		segs, typ, err := parsePath(root, pv.Path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("platform[%d]: %v", i, err))
			continue
		}
		canonical := renderPath(segs)
		switch pv.Rule {
		case PlatformWins, UserWins, ErrorIfBoth:
		default:
			problems = append(problems, fmt.Sprintf("platform[%d] %s: unknown rule %v", i, canonical, pv.Rule))
			continue
		}
		if lockedAt[canonical] {
			problems = append(problems, fmt.Sprintf("platform[%d] %s: also locked; use the ErrorIfBoth rule instead of locking a platform value", i, canonical))
			continue
		}
		if pv.Value == nil {
			problems = append(problems, fmt.Sprintf("platform[%d] %s: no value", i, canonical))
			continue
		}
		var a arena
		n, err := fromGo(&a, 0, pv.Value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("platform[%d] %s: %v", i, canonical, err))
			continue
		}
		c := checker{mode: modeMergePatch, path: segs}
		c.check(n, typ)
		for _, pr := range c.problems {
			problems = append(problems, fmt.Sprintf("platform[%d]: %s", i, pr))
		}
		cp.platform = append(cp.platform, compiledPlatform{
			compiledPath: compiledPath{path: canonical, segs: segs},
			value:        pv.Value,
			rule:         pv.Rule,
			typ:          typ,
		})
	}
	if len(problems) > 0 {
		return compiledPolicy{}, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return cp, nil
}

// applyPlatform sets the platform values on the merged documents.
func (p *Pipeline[T]) applyPlatform(r *mergeRun, root *node) {
	if len(p.policy.platform) == 0 {
		return
	}
	layer := r.layer(p.policy.owner)
	for _, pv := range p.policy.platform {
		existing := lookup(root, pv.segs)
		if !setByDocument(existing) {
			existing = nil // unset, or only the defaults of the base
		}
		if pv.rule == UserWins && existing != nil {
			continue
		}
		if pv.rule == PlatformWins && existing != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: %s: value replaced by the platform's (owner: %q)", r.names[existing.layer], pv.path, p.policy.owner))
		}
		n, err := fromGo(&r.a, layer, pv.value)
		if err != nil {
			continue // checked by New
		}
		c := checker{mode: modeMergePatch, path: pv.segs}
		c.check(n, pv.typ) // fills the decoded-value cache
		setAt(&r.a, root, pv.segs, n)
	}
}
