package source

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// benchPayload is a KubeletConfiguration of a realistic size (about 1 KiB).
var benchPayload = func() string {
	var b strings.Builder
	b.WriteString("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	for i := range 40 {
		fmt.Fprintf(&b, "field%02d: value-%02d\n", i, i)
	}
	return b.String()
}()

// benchConfigMap is one ConfigMap file of the directory source.
func benchConfigMap(name string) string {
	indented := "    " + strings.ReplaceAll(strings.TrimSuffix(benchPayload, "\n"), "\n", "\n    ")
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: kube-system\n  name: %s\n  uid: uid-%s\n"+
		"  annotations:\n    dynconfig.io/trial-duration: 10m\ndata:\n  kubelet: |\n%s\n", name, name, indented)
}

// BenchmarkDirAssigned reads the assignment of a directory source that
// holds n ConfigMap files, one of which is assigned. "named" files are
// called after their ConfigMap (<name>.yaml, as every writer in this
// repository does); "unnamed" ones are not, so the assigned ConfigMap can
// only be found by reading the files.
//
//	go test -run '^$' -bench BenchmarkDirAssigned -benchmem ./source/
func BenchmarkDirAssigned(b *testing.B) {
	for _, tc := range []struct {
		files int
		named bool
	}{{1, true}, {1000, true}, {1000, false}} {
		layout := "named"
		if !tc.named {
			layout = "unnamed"
		}
		b.Run(fmt.Sprintf("configmaps=%d/%s", tc.files, layout), func(b *testing.B) {
			dir := b.TempDir()
			assigned := fmt.Sprintf("cm-%04d", tc.files/2)
			for i := range tc.files {
				name := fmt.Sprintf("cm-%04d", i)
				file := name + ".yaml"
				if !tc.named {
					file = fmt.Sprintf("file-%04d.yaml", (i*7919)%tc.files)
				}
				write(b, filepath.Join(dir, ConfigMapsDir, file), benchConfigMap(name))
			}
			write(b, filepath.Join(dir, AssignmentFile),
				fmt.Sprintf("configMap: {namespace: kube-system, name: %s, uid: uid-%s}\n", assigned, assigned))
			d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				a, err := d.Assigned(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if a.ConfigMap == nil || a.ConfigMap.Name != assigned {
					b.Fatalf("assigned %+v", a.Source)
				}
			}
		})
	}
}
