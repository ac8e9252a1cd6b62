package changeclass

import (
	"fmt"
	"strings"
)

// Markdown renders Table as a Markdown table: field, class, state files,
// when, upstream. deploy/kubelet/README.md holds it between the markers
// MarkdownBegin and MarkdownEnd, and a test keeps the two equal.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| field | class | state files removed | when | upstream (k8s.io/kubernetes v1.37.0 pkg/kubelet unless named) |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, f := range Table() {
		files := "none"
		if len(f.StateFiles) > 0 {
			files = "`" + strings.Join(f.StateFiles, "`, `") + "`"
		}
		when := f.When
		if when == "" {
			when = "any change"
		}
		upstream := "`" + strings.Join(strings.Split(f.Upstream, "; "), "`; `") + "`"
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Path, f.Class, files, escape(when), escape(upstream))
	}
	return b.String()
}

// The markers around Markdown's table in deploy/kubelet/README.md.
const (
	// MarkdownBegin starts the generated table.
	MarkdownBegin = "<!-- BEGIN changeclass.Markdown (generated: go test ./components/kubelet/changeclass -update) -->\n"
	// MarkdownEnd ends it.
	MarkdownEnd = "<!-- END changeclass.Markdown -->\n"
)

func escape(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
