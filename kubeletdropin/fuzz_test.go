package kubeletdropin

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-logr/logr"
)

// FuzzCandidateRoundTrip: whatever a ConfigMap's payload holds, Build
// never panics, and when it accepts the payload, the drop-in Apply writes
// (dynconfig's header, then the payload) is read back as an ordinary
// drop-in to the same effective config: the header never changes what the
// kubelet runs, and what was validated is what is written.
func FuzzCandidateRoundTrip(f *testing.F) {
	for _, s := range []string{
		head + "maxPods: 50\n",
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50}`,
		head + "evictionHard: {memory.available: 200Mi}\n",
		head + "maxPods: 50",
		head + "---\n" + head + "maxPods: 3\n",
		head + "# a comment\nmaxPods: 7 # trailing\n",
		head + "maxPodz: 1\n",
		"",
		"\xff\xfe",
		"apiVersion: kubelet.config.k8s.io/v1beta1\r\nkind: KubeletConfiguration\r\nmaxPods: 9\r\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	files := Files{Config: filepath.Join(dir, "config.yaml"), ConfigDir: filepath.Join(dir, "conf.d")}
	if err := os.MkdirAll(files.ConfigDir, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(files.Config, []byte(head+"maxPods: 10\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	l, err := NewLayers(files, logr.Discard())
	if err != nil {
		f.Fatal(err)
	}
	// The written file, read as somebody else's drop-in.
	other := files
	other.Name = "00-other.conf"
	lo, err := NewLayers(other, logr.Discard())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		ch := chosen(payload)
		want, err := l.Build(ch.Document)
		if err != nil {
			return
		}
		if err := files.Apply(context.Background(), ch); err != nil {
			t.Fatal(err)
		}
		defer files.Remove()
		got, err := lo.Build(nil)
		if err != nil {
			t.Fatalf("the written drop-in does not read back: %v\npayload %q", err, payload)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("the written drop-in reads back to another config\npayload %q", payload)
		}
	})
}
