package conformance

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKubeletDocumentedDifferences: the differences TestKubeletValidation
// allows are exactly the ones components/kubelet/doc.go lists, section by
// section: "Upstream checks made here although upstream makes them at
// startup" (startupChecks), "Checks added beyond upstream" (stricterChecks)
// and "Upstream checks left out" (hostDependent). A list item names its
// fields before the first ": ".
func TestKubeletDocumentedDifferences(t *testing.T) {
	src, err := os.ReadFile("../../components/kubelet/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	sections := docSections(string(src))
	check := func(title string, inTest []string) {
		t.Helper()
		items, ok := sections[title]
		if !ok {
			t.Errorf("components/kubelet/doc.go has no section %q", title)
			return
		}
		want := normalizeAll(inTest)
		got := normalizeAll(items)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("section %q of components/kubelet/doc.go and the test disagree (-test +doc):\n%s", title, diff)
		}
	}
	var startup, stricterPaths, host []string
	for _, c := range startupChecks {
		startup = append(startup, c.path)
	}
	for _, c := range stricterChecks {
		stricterPaths = append(stricterPaths, c.path)
	}
	for _, h := range hostDependent {
		host = append(host, h.path)
	}
	check("Upstream checks made here although upstream makes them at startup", startup)
	check("Checks added beyond upstream", stricterPaths)
	check("Upstream checks left out", host)
}

// TestKubeProxyDocumentedDifferences: the differences TestKubeProxyValidation
// allows are exactly the ones components/kubeproxy/doc.go lists.
func TestKubeProxyDocumentedDifferences(t *testing.T) {
	src, err := os.ReadFile("../../components/kubeproxy/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	sections := docSections(string(src))
	for title, list := range map[string][]proxyDifference{
		"Checks added beyond upstream": kubeProxyStricter,
		"Upstream checks left out":     kubeProxyLeftOut,
	} {
		var inTest []string
		for _, d := range list {
			inTest = append(inTest, d.path)
		}
		slices.Sort(inTest)
		got := append([]string(nil), sections[title]...)
		slices.Sort(got)
		if diff := cmp.Diff(inTest, got); diff != "" {
			t.Errorf("section %q of components/kubeproxy/doc.go and the test disagree (-test +doc):\n%s", title, diff)
		}
	}
}

var (
	docItem   = regexp.MustCompile(`^//   - ([^:]+):( |$)`)
	fieldPath = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)*$`)
)

// docSections returns, per "// # Title" section of a doc comment, the field
// paths its list items name.
func docSections(src string) map[string][]string {
	out := map[string][]string{}
	title := ""
	for _, line := range strings.Split(src, "\n") {
		if t, ok := strings.CutPrefix(line, "// # "); ok {
			title = t
			out[title] = nil
			continue
		}
		m := docItem.FindStringSubmatch(line)
		if title == "" || m == nil {
			continue
		}
		fields := strings.Split(m[1], ", ")
		if !slices.ContainsFunc(fields, func(f string) bool { return !fieldPath.MatchString(f) }) {
			out[title] = append(out[title], fields...)
		}
	}
	return out
}

func normalizeAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		p = normalizePath(p)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
