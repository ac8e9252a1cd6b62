package bottlerocket

import "github.com/BurntSushi/toml"

// parseTOML decodes doc with a maintained TOML library
// (github.com/BurntSushi/toml, TOML 1.0), the tests' oracle for what
// Render writes: it rejects anything that is not valid TOML (a key or
// table defined twice, a bad escape, a control character, a leading zero,
// invalid UTF-8). Arrays whose items are all strings are returned as
// []string, as Render's lists are; the rest as the library decodes it
// (integers int64, tables map[string]any).
func parseTOML(doc string) (map[string]any, error) {
	var out map[string]any
	if _, err := toml.Decode(doc, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]any{}
	}
	return normalize(out).(map[string]any), nil
}

// normalize turns string arrays into []string, recursively.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normalize(x)
		}
		return v
	case []any:
		strs := make([]string, 0, len(v))
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				for i := range v {
					v[i] = normalize(v[i])
				}
				return v
			}
			strs = append(strs, s)
		}
		return strs
	}
	return v
}
