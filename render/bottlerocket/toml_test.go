package bottlerocket

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBasicStringEscaping checks the exact spelling of each character class
// TOML treats specially, and that the test parser reads each back unchanged.
func TestBasicStringEscaping(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"plain", `"plain"`},
		{"", `""`},
		{`say "hi"`, `"say \"hi\""`},
		{`C:\path`, `"C:\\path"`},
		{"a\nb\rc", `"a\nb\rc"`},
		{"tab\there", `"tab\there"`},
		{"\b\f", `"\b\f"`},
		{"nul\x00", `"nul\u0000"`},
		{"esc\x1b", `"esc\u001B"`},
		{"del\x7f", `"del\u007F"`},
		{"é ü 日本 🚀", `"é ü 日本 🚀"`},
		{"line\u2028sep", "\"line\u2028sep\""},
		{"memory.available", `"memory.available"`},
		{"#not a comment", `"#not a comment"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got, err := appendBasicString(nil, tt.in)
			if err != nil {
				t.Fatalf("appendBasicString: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("spelling (-want +got):\n%s", diff)
			}
			doc, err := parseTOML("k = " + string(got) + "\n")
			if err != nil {
				t.Fatalf("parse back: %v", err)
			}
			if back := doc["k"]; back != tt.in {
				t.Errorf("round trip = %q, want %q", back, tt.in)
			}
		})
	}
}

func TestBasicStringRejectsInvalidUTF8(t *testing.T) {
	for _, in := range []string{"\xff", "ok\xc3", "\xed\xa0\x80"} {
		if got, err := appendBasicString(nil, in); err == nil {
			t.Errorf("appendBasicString(%q) = %q, want an error", in, got)
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		key, want string
	}{
		{"max-pods", "max-pods"},
		{"cpu", "cpu"},
		{"under_score9", "under_score9"},
		{"memory.available", `"memory.available"`},
		{"nodefs.inodesFree", `"nodefs.inodesFree"`},
		{"", `""`},
		{"with space", `"with space"`},
		{"ключ", `"ключ"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(appendKey(nil, tt.key)); got != tt.want {
				t.Errorf("appendKey(%q) = %s, want %s", tt.key, got, tt.want)
			}
		})
	}
}

// TestEncodeTable checks the layout: scalars sorted, then subtables sorted,
// and that the result parses to the same data.
func TestEncodeTable(t *testing.T) {
	entries := map[string]value{
		"z-last":  tomlInt(-7),
		"a-first": tomlBool(true),
		"m-list":  tomlStrings{"x", `y"z`},
		"empty":   tomlStrings{},
		"t-two":   tomlTable{"b.b": "2", "a": "1"},
		"t-one":   tomlTable{"k": "v"},
		"s":       tomlString("s"),
	}
	got, err := encodeTable([]string{"settings", "kubernetes"}, entries)
	if err != nil {
		t.Fatal(err)
	}
	want := `[settings.kubernetes]
a-first = true
empty = []
m-list = ["x", "y\"z"]
s = "s"
z-last = -7

[settings.kubernetes.t-one]
k = "v"

[settings.kubernetes.t-two]
a = "1"
"b.b" = "2"
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("encodeTable (-want +got):\n%s", diff)
	}
	parsed, err := parseTOML(string(got))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	wantParsed := map[string]any{"settings": map[string]any{"kubernetes": map[string]any{
		"a-first": true, "empty": []string{}, "m-list": []string{"x", `y"z`}, "s": "s", "z-last": int64(-7),
		"t-one": map[string]any{"k": "v"},
		"t-two": map[string]any{"a": "1", "b.b": "2"},
	}}}
	if diff := cmp.Diff(wantParsed, parsed); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
}

func TestEncodeTableErrors(t *testing.T) {
	tests := []struct {
		name    string
		entries map[string]value
		want    string
	}{
		{"bad string", map[string]value{"k": tomlString("\xff")}, `key k: string "\xff" is not valid UTF-8`},
		{"bad list item", map[string]value{"k": tomlStrings{"ok", "\xff"}}, `key k: list item 1: string "\xff" is not valid UTF-8`},
		{"bad key", map[string]value{"\xff": tomlInt(1)}, `key "\xff" is not valid UTF-8`},
		{"bad table value", map[string]value{"t": tomlTable{"k": "\xff"}}, `table t: key k: string "\xff" is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encodeTable([]string{"settings", "kubernetes"}, tt.entries)
			if err == nil {
				t.Fatal("encodeTable succeeded, want an error")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParserRejects makes sure the validity checks in the other tests can
// fail: the test parser must refuse documents that are not valid TOML.
func TestParserRejects(t *testing.T) {
	for _, doc := range []string{
		"[a]\n[a]\n",
		"[a]\nk = 1\nk = 2\n",
		"[a]\nk = \"unterminated\n",
		"[a]\nk = \"bad \\q escape\"\n",
		"[a]\nk = \"raw \x01 control\"\n",
		"[a]\nk = 01\n",
		"[a]\nk = bare\n",
		"[a]\nk = [\"x\" \"y\"]\n",
		"[a\n",
		"[a]\nk = 1 junk\n",
		"[a]\n.k = 1\n",
		"[a]\nk = 1\n[a.k]\n",
	} {
		if _, err := parseTOML(doc); err == nil {
			t.Errorf("parseTOML accepted %q", doc)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{time.Nanosecond, "0.000001ms"},
		{1500 * time.Nanosecond, "0.0015ms"},
		{999999 * time.Nanosecond, "0.999999ms"},
		{time.Millisecond, "1ms"},
		{1500 * time.Microsecond, "1.5ms"},
		{1500 * time.Millisecond, "1.5s"},
		{90 * time.Second, "1m30s"},
		{time.Hour, "1h0m0s"},
		{time.Hour + time.Nanosecond, "1h0m0.000000001s"},
		{1<<63 - 1, "2562047h47m16.854775807s"},
	}
	re := brDuration()
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := formatDuration(tt.d)
			if got != tt.want {
				t.Errorf("formatDuration(%d) = %q, want %q", int64(tt.d), got, tt.want)
			}
			if !re.MatchString(got) {
				t.Errorf("%q does not match Bottlerocket's duration pattern", got)
			}
			if back, err := time.ParseDuration(got); err != nil || back != tt.d {
				t.Errorf("time.ParseDuration(%q) = %v, %v; want %v", got, back, err, tt.d)
			}
		})
	}
}

// TestFormatDurationProperty checks, over many random non-negative
// durations, that the spelling matches Bottlerocket's pattern and that the
// kubelet's parser reads back the same duration.
func TestFormatDurationProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	re := brDuration()
	for i := 0; i < 20000; i++ {
		var d time.Duration
		switch i % 3 {
		case 0:
			d = time.Duration(rng.Int64N(int64(time.Millisecond)))
		case 1:
			d = time.Duration(rng.Int64N(int64(time.Hour)))
		default:
			d = time.Duration(rng.Int64())
		}
		s := formatDuration(d)
		if !re.MatchString(s) {
			t.Fatalf("formatDuration(%d) = %q does not match Bottlerocket's pattern", int64(d), s)
		}
		if back, err := time.ParseDuration(s); err != nil || back != d {
			t.Fatalf("time.ParseDuration(%q) = %v, %v; want %v", s, back, err, d)
		}
	}
}

// Bottlerocket's own regular expressions, transcribed from its modeled types
// (see doc.go), serve as the oracle for the hand-written matchers.

func brQuantity() *regexp.Regexp {
	return regexp.MustCompile(`^(?:([+-]?[0-9.]+)((e)?[0-9]*)|([+-]?[0-9.]+)((E|P|T|G|M|K)i?)?|([+-]?[0-9.]+)(n|u|m|k)?)$`)
}

func brDuration() *regexp.Regexp {
	return regexp.MustCompile(`^(([0-9]+\.)?[0-9]+h)?(([0-9]+\.)?[0-9]+m)?(([0-9]+\.)?[0-9]+s)?(([0-9]+\.)?[0-9]+ms)?$`)
}

func plainDecimal() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$`)
}

// TestMatchersAgreeWithBottlerocket compares each matcher with its regular
// expression on every string of up to four characters over an alphabet of
// the characters that matter, and on random longer strings.
func TestMatchersAgreeWithBottlerocket(t *testing.T) {
	tests := []struct {
		name     string
		match    func(string) bool
		re       *regexp.Regexp
		alphabet string
	}{
		{"quantity", matchQuantity, brQuantity(), "09.+-eEPTGMKinumkx"},
		{"duration", matchDuration, brDuration(), "09.hmsnux"},
		{"decimal", matchDecimal, plainDecimal(), "09.e-x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(s string) {
				if got, want := tt.match(s), tt.re.MatchString(s); got != want {
					t.Fatalf("match(%q) = %v, Bottlerocket's pattern says %v", s, got, want)
				}
			}
			var all func(prefix string, n int)
			all = func(prefix string, n int) {
				check(prefix)
				if n == 0 {
					return
				}
				for i := 0; i < len(tt.alphabet); i++ {
					all(prefix+tt.alphabet[i:i+1], n-1)
				}
			}
			all("", 4)
			rng := rand.New(rand.NewPCG(3, 4))
			buf := make([]byte, 12)
			for i := 0; i < 50000; i++ {
				n := 5 + rng.IntN(len(buf)-4)
				for j := range n {
					buf[j] = tt.alphabet[rng.IntN(len(tt.alphabet))]
				}
				check(string(buf[:n]))
			}
		})
	}
}

// TestPatterns pins the matchers to the examples in Bottlerocket's own tests
// of its modeled types.
func TestPatterns(t *testing.T) {
	tests := []struct {
		name string
		fn   func(string) bool
		good []string
		bad  []string
	}{
		{"quantity", matchQuantity,
			[]string{"129e6", "10Mi", "1024M", "1Gi", "120Ki", "1Ti", "1000n", "100m"},
			[]string{"", "12%", "12ki", "100e23m", "1100KTi", "100Kiii", "1000i"}},
		{"duration", func(s string) bool { return s != "" && matchDuration(s) },
			[]string{"9ms", "99s", "20m", "1h", "1h2m3s10ms", "4m5s10ms", "2h3s10ms", "1.5h3.5m"},
			[]string{"", "100", "...3ms", "1..5s", "ten second", "1m2h", "9ns"}},
		{"threshold", func(s string) bool { _, err := fitThreshold(s); return err == nil },
			[]string{"10%", "0%", "99.9%", "129e6", "10Mi", "1Gi", "100m"},
			[]string{"", "anything%", "100%", "-1%", "inf%", "12ki", "100Kiii"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range tt.good {
				if !tt.fn(s) {
					t.Errorf("%q refused, want accepted", s)
				}
			}
			for _, s := range tt.bad {
				if tt.fn(s) {
					t.Errorf("%q accepted, want refused", s)
				}
			}
		})
	}
}
