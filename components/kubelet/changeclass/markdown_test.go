package changeclass

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated table in deploy/kubelet/README.md")

// The README's table is Markdown's: run with -update after changing Table.
func TestReadmeTable(t *testing.T) {
	path := filepath.Join("..", "..", "..", "deploy", "kubelet", "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin := strings.Index(doc, MarkdownBegin)
	end := strings.Index(doc, MarkdownEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s: no %q ... %q section", path, MarkdownBegin, MarkdownEnd)
	}
	got := doc[begin+len(MarkdownBegin) : end]
	want := Markdown()
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s: the table of changes that need a drain is not Table's (run go test -update):\n got:\n%s\nwant:\n%s", path, got, want)
	}
	doc = doc[:begin+len(MarkdownBegin)] + want + doc[end:]
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}
