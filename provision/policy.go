package provision

import (
	"fmt"
	"strings"

	"github.com/dynconfig/dynconfig/merge"
)

// Field is one KubeletConfiguration field the platform has a say in.
type Field struct {
	// Path is the field path in merge's notation: "providerID",
	// "authentication.anonymous.enabled", "featureGates[SomeGate]".
	Path string
	// Value is the platform's value in the field's JSON form (a number, a
	// bool, a string for a duration, a map[string]string for evictionHard,
	// a []string for tlsCipherSuites). Nil means the platform sets the field
	// outside this configuration, per machine for example; only a Blocked
	// field may have no value.
	Value any
	// Blocked forbids the user's document to set the field at all. The
	// platform's Value, if any, is applied on top of the user's document, as
	// a kubelet flag would be.
	Blocked bool
	// Rule decides, for a field that is not Blocked, what happens when the
	// user's document sets it too: merge.PlatformWins, merge.UserWins or
	// merge.ErrorIfBoth. It must be zero for a Blocked field.
	Rule merge.Rule
}

// Policy is a platform's say over user-supplied kubelet settings: the
// configuration fields it owns and the node labels it sets.
type Policy struct {
	// Owner names the platform in errors and warnings, e.g. "eks-a". Empty
	// means "platform".
	Owner string
	// Fields lists the configuration fields the platform owns, each at most
	// once.
	Fields []Field
	// NodeLabels are the platform's node labels. They are a kubelet flag,
	// not a configuration field, so a Validator does not look at them; call
	// NodeLabels.Merge with the user's labels.
	NodeLabels NodeLabelPolicy
}

// owner returns the Owner or its default.
func (p Policy) owner() string {
	if p.Owner == "" {
		return "platform"
	}
	return p.Owner
}

// compiled is a Policy in the terms of package merge.
type compiled struct {
	merge     merge.Policy
	overrides []merge.Override
	// fromPlatform lists the paths whose value in the final configuration
	// may be the platform's rather than the user's, with their rule (zero
	// for blocked fields).
	fromPlatform []Field
	// replaced lists the paths of the PlatformWins fields: a value the
	// user sets there does not stand in the result, so it is validated on
	// its own first (Validator.Validate).
	replaced []string
}

// userValues returns the merge policy under which the user's own values
// stand: the PlatformWins values become UserWins (they still apply where
// the user set nothing), everything else is as in c.merge.
func (c compiled) userValues() merge.Policy {
	p := c.merge
	p.Platform = make([]merge.PlatformValue, len(c.merge.Platform))
	for i, pv := range c.merge.Platform {
		if pv.Rule == merge.PlatformWins {
			pv.Rule = merge.UserWins
		}
		p.Platform[i] = pv
	}
	return p
}

// compile checks p and translates it: blocked fields become merge's locked
// fields plus, when they have a value, an override on top of the user's
// document; the others become merge's platform values with their rule.
func (p Policy) compile() (compiled, error) {
	var c compiled
	c.merge.Owner = p.owner()
	var problems []string
	seen := map[string]bool{}
	for i, f := range p.Fields {
		where := fmt.Sprintf("fields[%d] %s", i, f.Path)
		switch {
		case f.Path == "":
			problems = append(problems, fmt.Sprintf("fields[%d]: no path", i))
			continue
		case seen[f.Path]:
			problems = append(problems, where+": listed twice")
			continue
		}
		seen[f.Path] = true
		if nulls := valueNulls(f); len(nulls) > 0 {
			for _, n := range nulls {
				problems = append(problems, fmt.Sprintf("fields[%d] %s: %s", i, n.Path, n.Detail))
			}
			continue
		}
		if f.Blocked {
			if f.Rule != 0 {
				problems = append(problems, where+": a blocked field takes no rule")
				continue
			}
			c.merge.Locked = append(c.merge.Locked, f.Path)
			if f.Value != nil {
				c.overrides = append(c.overrides, merge.Override{Path: f.Path, Value: f.Value, Source: c.merge.Owner})
				c.fromPlatform = append(c.fromPlatform, f)
			}
			continue
		}
		switch f.Rule {
		case merge.PlatformWins, merge.UserWins, merge.ErrorIfBoth:
		default:
			problems = append(problems, fmt.Sprintf("%s: rule %v: want PlatformWins, UserWins or ErrorIfBoth, or Blocked", where, f.Rule))
			continue
		}
		if f.Value == nil {
			problems = append(problems, where+": no value; only a blocked field may have none")
			continue
		}
		c.merge.Platform = append(c.merge.Platform, merge.PlatformValue{Path: f.Path, Value: f.Value, Rule: f.Rule})
		c.fromPlatform = append(c.fromPlatform, f)
		if f.Rule == merge.PlatformWins {
			c.replaced = append(c.replaced, f.Path)
		}
	}
	if len(problems) > 0 {
		return compiled{}, fmt.Errorf("provision: policy: %s", strings.Join(problems, "; "))
	}
	return c, nil
}
