package merge

// mergePatch applies patch to target with JSON merge patch semantics (RFC 7386),
// the kubelet's --config-dir semantics: objects merge by key, null deletes a
// key, anything else (lists included) replaces. target may be nil (absent);
// its object nodes are updated in place and patch's nodes are moved into it.
//
// As the RFC says, a patch object applied where there is no object starts
// from an empty one, so nulls inside it vanish; lists are taken verbatim.
func mergePatch(a *arena, target, patch *node) *node {
	if patch.kind != nObject {
		return patch
	}
	if target == nil || target.kind != nObject {
		target = a.new(nObject, patch.layer)
	}
	for _, m := range patch.obj {
		i := indexOf(target, m.key)
		if m.val.kind == nNull {
			if i >= 0 {
				target.obj = append(target.obj[:i], target.obj[i+1:]...)
			}
			continue
		}
		if i >= 0 {
			target.obj[i].val = mergePatch(a, target.obj[i].val, m.val)
		} else {
			target.obj = append(target.obj, member{key: m.key, val: mergePatch(a, nil, m.val)})
		}
	}
	return target
}

func indexOf(n *node, key string) int {
	for i := range n.obj {
		if n.obj[i].key == key {
			return i
		}
	}
	return -1
}
