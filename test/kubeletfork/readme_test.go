package kubeletfork

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADME keeps the code of README.md's "Embedding in a kubelet fork"
// equal to the part of cmd/hollow-kubelet's run between "// README begin"
// and "// README end", apart from comments and layout.
func TestREADME(t *testing.T) {
	readme := readFile(t, "../../README.md")
	const heading = "## Embedding in a kubelet fork\n"
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatalf("README.md has no %q section", strings.TrimSpace(heading))
	}
	section := readme[i+len(heading):]
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	doc := between(t, "README.md's section", section, "```go\n", "```\n")

	mainGo := readFile(t, "../cmd/hollow-kubelet/main.go")
	code := between(t, "cmd/hollow-kubelet/main.go", mainGo, "// README begin\n", "// README end\n")

	if got, want := normalize(doc), normalize(code); got != want {
		t.Errorf("README.md's kubelet fork code differs from cmd/hollow-kubelet/main.go's (comments and layout aside):\nREADME: %s\nmain.go: %s", got, want)
	}
	if n := strings.Count(strings.TrimSpace(doc), "\n") + 1; n > 40 {
		t.Errorf("README.md's kubelet fork code is %d lines; keep it to the lines that matter", n)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// between returns the text of s from the end of the first begin to the
// next end.
func between(t *testing.T, what, s, begin, end string) string {
	t.Helper()
	i := strings.Index(s, begin)
	if i < 0 {
		t.Fatalf("%s: no %q", what, begin)
	}
	s = s[i+len(begin):]
	j := strings.Index(s, end)
	if j < 0 {
		t.Fatalf("%s: no %q after %q", what, end, begin)
	}
	return s[:j]
}

var (
	lineComment = regexp.MustCompile(`//[^\n]*`)
	space       = regexp.MustCompile(`\s+`)
)

// normalize drops line comments and collapses white space, so gofmt's
// layout and the README's one-line error checks compare equal.
func normalize(code string) string {
	return strings.TrimSpace(space.ReplaceAllString(lineComment.ReplaceAllString(code, ""), " "))
}
