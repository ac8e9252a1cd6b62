package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// parser turns the bytes of one document into a node tree. It accepts JSON
// and YAML with the semantics the Kubernetes components use (sigs.k8s.io/yaml:
// YAML 1.1 via go.yaml.in/yaml/v2, non-string keys converted to strings), and
// records duplicate keys with their path instead of silently keeping one.
type parser struct {
	arena    *arena
	layer    int32
	problems []Problem
	path     []pathSeg
	// lenient turns duplicate keys into warnings (the later value wins).
	lenient  bool
	warnings []Problem
	// noFastPaths turns parseJSONFast and parseYAMLFast off (tests compare
	// both ways).
	noFastPaths bool
}

// parse returns the root object of data, or nil with problems.
func (p *parser) parse(data []byte) *node {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if !p.noFastPaths {
			if root, ok := p.parseJSONFast(trimmed); ok {
				return root
			}
		}
		if root, ok := p.parseJSON(trimmed); ok {
			return root
		}
		// Not JSON after all: a YAML flow mapping such as {port: 10250}
		// is fine too. YAML errors win from here on.
		p.problems = p.problems[:0]
		p.warnings = p.warnings[:0]
	}
	return p.parseYAML(data)
}

func (p *parser) addProblem(t ProblemType, field, detail string) {
	pr := Problem{Type: t, Path: renderPath(p.path), Field: field, Detail: detail}
	if p.lenient && t == ProblemDuplicateField {
		p.warnings = append(p.warnings, pr)
		return
	}
	p.problems = append(p.problems, pr)
}

// --- YAML ---

func (p *parser) parseYAML(data []byte) *node {
	if yamlIsSequence(data) {
		// Decoding a sequence into yaml.MapSlice "succeeds" with garbage.
		p.addProblem(ProblemSyntax, "", "document must be a mapping (a YAML or JSON object), not a list")
		return nil
	}
	if !p.noFastPaths && !bytes.Contains(data, []byte("<<")) {
		if root, ok := p.parseYAMLFast(data); ok {
			return root
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root *node
	// A YAML merge key (<<) is lost when decoding into yaml.MapSlice, which is
	// what keeps duplicate keys visible; documents that use merge keys decode
	// into plain maps instead, as sigs.k8s.io/yaml does, and duplicate keys
	// are then found by the strict YAML decoder (with a line, not a path).
	if bytes.Contains(data, []byte("<<")) {
		var doc any
		if err := dec.Decode(&doc); err != nil {
			p.yamlError(err)
			return nil
		}
		if doc == nil {
			p.addProblem(ProblemEmpty, "", "document is empty")
			return nil
		}
		m, ok := doc.(map[any]any)
		if !ok {
			p.addProblem(ProblemSyntax, "", fmt.Sprintf("document must be a mapping (a YAML or JSON object), not %s", yamlKindOf(doc)))
			return nil
		}
		var strict any
		if err := yaml.UnmarshalStrict(data, &strict); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				for _, msg := range te.Errors {
					p.addProblem(ProblemDuplicateField, "", msg)
				}
			}
		}
		root = p.fromYAMLMap(m)
	} else {
		var doc yaml.MapSlice
		if err := dec.Decode(&doc); err != nil {
			p.yamlError(err)
			return nil
		}
		if doc == nil {
			if !yamlHasContent(data) {
				p.addProblem(ProblemEmpty, "", "document is empty")
			} else {
				// "{}" or "null": an object without fields, or nothing.
				var v any
				if err := yaml.Unmarshal(data, &v); err == nil && v == nil {
					p.addProblem(ProblemEmpty, "", "document is empty")
					return nil
				}
				root = p.arena.new(nObject, p.layer)
				return p.checkSecondDocument(dec, root)
			}
			return nil
		}
		root = p.fromMapSlice(doc)
	}
	return p.checkSecondDocument(dec, root)
}

func (p *parser) checkSecondDocument(dec *yaml.Decoder, root *node) *node {
	var extra any
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
	case err != nil:
		p.yamlError(err)
		return nil
	case extra != nil:
		p.addProblem(ProblemSyntax, "", "more than one YAML document: a configuration file holds exactly one")
		return nil
	}
	return root
}

func (p *parser) yamlError(err error) {
	msg := err.Error()
	if strings.Contains(msg, "into yaml.MapSlice") || strings.Contains(msg, "into map[interface {}]interface {}") {
		p.addProblem(ProblemSyntax, "", "document must be a mapping (a YAML or JSON object)")
		return
	}
	if err == io.EOF {
		p.addProblem(ProblemEmpty, "", "document is empty")
		return
	}
	p.addProblem(ProblemSyntax, "", strings.TrimPrefix(msg, "yaml: "))
}

// yamlHasContent reports whether data has anything besides blank lines,
// comments and document markers.
func yamlHasContent(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) == 0 || l[0] == '#' || bytes.Equal(l, []byte("---")) || bytes.Equal(l, []byte("...")) {
			continue
		}
		return true
	}
	return false
}

// yamlIsSequence reports whether the first content line starts a sequence.
func yamlIsSequence(data []byte) bool {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		l := bytes.TrimSpace(line)
		if len(l) == 0 || l[0] == '#' || l[0] == '%' || bytes.Equal(l, []byte("---")) {
			continue
		}
		return l[0] == '[' || bytes.Equal(l, []byte("-")) || bytes.HasPrefix(l, []byte("- ")) || bytes.HasPrefix(l, []byte("-\t"))
	}
	return false
}

func yamlKindOf(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	default:
		return "a scalar"
	}
}

// yamlKey converts a YAML map key to a JSON key as sigs.k8s.io/yaml does.
func yamlKey(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case int:
		return strconv.Itoa(k), true
	case int64:
		return strconv.FormatInt(k, 10), true
	case uint64:
		return strconv.FormatUint(k, 10), true
	case float64:
		s := strconv.FormatFloat(k, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, true
	case bool:
		return strconv.FormatBool(k), true
	default:
		return "", false
	}
}

func (p *parser) fromMapSlice(ms yaml.MapSlice) *node {
	n := p.arena.new(nObject, p.layer)
	n.obj = make([]member, 0, len(ms))
	var seen map[string]int
	for _, item := range ms {
		key, ok := yamlKey(item.Key)
		if !ok {
			p.addProblem(ProblemSyntax, "", fmt.Sprintf("unsupported map key %v: keys must be strings", item.Key))
			continue
		}
		p.path = append(p.path, pathSeg{name: key, kind: segField})
		v := p.fromYAML(item.Value)
		p.path = p.path[:len(p.path)-1]
		if v == nil {
			continue
		}
		p.addMember(n, &seen, key, v)
	}
	return n
}

// addMember appends key to an object being parsed; a duplicate key is a
// problem, and the later value wins in the first one's place, as in a
// non-strict decode. seen indexes the keys once the object is big.
func (p *parser) addMember(n *node, seen *map[string]int, key string, v *node) {
	dup := -1
	if *seen == nil && len(n.obj) >= 16 {
		*seen = make(map[string]int, 2*len(n.obj))
		for i, m := range n.obj {
			(*seen)[m.key] = i
		}
	}
	if *seen != nil {
		if i, ok := (*seen)[key]; ok {
			dup = i
		} else {
			(*seen)[key] = len(n.obj)
		}
	} else {
		for i := range n.obj {
			if n.obj[i].key == key {
				dup = i
				break
			}
		}
	}
	if dup >= 0 {
		p.addProblem(ProblemDuplicateField, key, "")
		n.obj[dup].val = v
		return
	}
	n.obj = append(n.obj, member{key: key, val: v})
}

func (p *parser) fromYAMLMap(m map[any]any) *node {
	n := p.arena.new(nObject, p.layer)
	n.obj = make([]member, 0, len(m))
	for k, val := range m {
		key, ok := yamlKey(k)
		if !ok {
			p.addProblem(ProblemSyntax, "", fmt.Sprintf("unsupported map key %v: keys must be strings", k))
			continue
		}
		p.path = append(p.path, pathSeg{name: key, kind: segField})
		v := p.fromYAML(val)
		p.path = p.path[:len(p.path)-1]
		if v == nil {
			continue
		}
		if n.get(key) != nil {
			// Two YAML keys that become the same JSON key (1 and "1").
			p.addProblem(ProblemDuplicateField, key, "")
		}
		n.set(key, v)
	}
	sortMembers(n.obj)
	return n
}

// fromYAML converts one decoded YAML value; nil means a problem was recorded.
func (p *parser) fromYAML(v any) *node {
	switch v := v.(type) {
	case nil:
		return p.arena.new(nNull, p.layer)
	case bool:
		n := p.arena.new(nBool, p.layer)
		n.b = v
		return n
	case string:
		n := p.arena.new(nString, p.layer)
		n.str = v
		return n
	case int:
		n := p.arena.new(nNumber, p.layer)
		n.str = strconv.Itoa(v)
		return n
	case int64:
		n := p.arena.new(nNumber, p.layer)
		n.str = strconv.FormatInt(v, 10)
		return n
	case uint64:
		n := p.arena.new(nNumber, p.layer)
		n.str = strconv.FormatUint(v, 10)
		return n
	case float64:
		s, ok := formatFloat(v)
		if !ok {
			p.addProblem(ProblemWrongType, "", fmt.Sprintf("unsupported value %v: JSON has no NaN or infinity", v))
			return nil
		}
		n := p.arena.new(nNumber, p.layer)
		n.str = s
		return n
	case time.Time:
		n := p.arena.new(nString, p.layer)
		n.str = v.Format(time.RFC3339Nano)
		return n
	case yaml.MapSlice:
		return p.fromMapSlice(v)
	case map[any]any:
		return p.fromYAMLMap(v)
	case []any:
		n := p.arena.new(nArray, p.layer)
		n.arr = make([]*node, 0, len(v))
		for i, e := range v {
			p.path = append(p.path, pathSeg{index: i, kind: segIndex})
			en := p.fromYAML(e)
			p.path = p.path[:len(p.path)-1]
			if en == nil {
				en = p.arena.new(nNull, p.layer)
			}
			n.arr = append(n.arr, en)
		}
		return n
	default:
		p.addProblem(ProblemWrongType, "", fmt.Sprintf("unsupported YAML value of type %T", v))
		return nil
	}
}

// --- JSON ---

// parseJSON parses a JSON document token by token, so that duplicate keys are
// seen and numbers keep their literal form. ok is false when data is not JSON.
func (p *parser) parseJSON(data []byte) (root *node, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	root, err = p.jsonObject(dec)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, false
		}
		p.addProblem(ProblemSyntax, "", err.Error())
		return nil, true
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return root, true
}

// maxDepth bounds nesting, so that a hostile document cannot exhaust the stack.
const maxDepth = 1000

func (p *parser) jsonObject(dec *json.Decoder) (*node, error) {
	if len(p.path) > maxDepth {
		return nil, fmt.Errorf("document nests deeper than %d levels", maxDepth)
	}
	n := p.arena.new(nObject, p.layer)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected %v", tok)
		}
		p.path = append(p.path, pathSeg{name: key, kind: segField})
		v, err := p.jsonValue(dec)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return nil, err
		}
		if n.get(key) != nil {
			p.addProblem(ProblemDuplicateField, key, "")
		}
		n.set(key, v)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	return n, nil
}

func (p *parser) jsonValue(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return p.jsonObject(dec)
		case '[':
			if len(p.path) > maxDepth {
				return nil, fmt.Errorf("document nests deeper than %d levels", maxDepth)
			}
			n := p.arena.new(nArray, p.layer)
			for i := 0; dec.More(); i++ {
				p.path = append(p.path, pathSeg{index: i, kind: segIndex})
				e, err := p.jsonValue(dec)
				p.path = p.path[:len(p.path)-1]
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		n := p.arena.new(nString, p.layer)
		n.str = t
		return n, nil
	case json.Number:
		n := p.arena.new(nNumber, p.layer)
		n.str = string(t)
		return n, nil
	case bool:
		n := p.arena.new(nBool, p.layer)
		n.b = t
		return n, nil
	case nil:
		return p.arena.new(nNull, p.layer), nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// --- Go values (flags, platform values) ---

// fromGo converts a JSON-compatible Go value into nodes, through
// encoding/json for anything that is not a plain JSON type.
func fromGo(a *arena, layer int32, v any) (*node, error) {
	switch v := v.(type) {
	case nil:
		return a.new(nNull, layer), nil
	case bool:
		n := a.new(nBool, layer)
		n.b = v
		return n, nil
	case string:
		n := a.new(nString, layer)
		n.str = v
		return n, nil
	case int:
		n := a.new(nNumber, layer)
		n.str = strconv.Itoa(v)
		return n, nil
	case int32:
		n := a.new(nNumber, layer)
		n.str = strconv.FormatInt(int64(v), 10)
		return n, nil
	case int64:
		n := a.new(nNumber, layer)
		n.str = strconv.FormatInt(v, 10)
		return n, nil
	case float64:
		s, ok := formatFloat(v)
		if !ok {
			return nil, fmt.Errorf("unsupported value %v", v)
		}
		n := a.new(nNumber, layer)
		n.str = s
		return n, nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(v), 64); err != nil && !isRangeErr(err) {
			return nil, fmt.Errorf("invalid number %q", string(v))
		}
		n := a.new(nNumber, layer)
		n.str = string(v)
		return n, nil
	case []string:
		n := a.new(nArray, layer)
		n.arr = make([]*node, len(v))
		for i, s := range v {
			e := a.new(nString, layer)
			e.str = s
			n.arr[i] = e
		}
		return n, nil
	case map[string]string:
		n := a.new(nObject, layer)
		for k, s := range v {
			e := a.new(nString, layer)
			e.str = s
			n.obj = append(n.obj, member{key: k, val: e})
		}
		sortMembers(n.obj)
		return n, nil
	case map[string]bool:
		n := a.new(nObject, layer)
		for k, b := range v {
			e := a.new(nBool, layer)
			e.b = b
			n.obj = append(n.obj, member{key: k, val: e})
		}
		sortMembers(n.obj)
		return n, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return parseJSONValue(a, layer, data)
}

// parseJSONValue parses one JSON value (of encoding/json's making) into nodes.
func parseJSONValue(a *arena, layer int32, data []byte) (*node, error) {
	p := parser{arena: a, layer: layer}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return p.jsonValue(dec)
}

func isRangeErr(err error) bool {
	var ne *strconv.NumError
	return errors.As(err, &ne) && ne.Err == strconv.ErrRange
}

func sortMembers(ms []member) {
	// insertion sort: these maps are small and usually nearly sorted
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].key < ms[j-1].key; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}
