package integration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/status"
)

// TestControllerStartup covers the assignments a component finds when it
// starts (Bootstrap): each row is its own Node and state dir, and the
// condition is read back from the Node's status as soon as Bootstrap
// returns (it reports before returning the config).
func TestControllerStartup(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)

	good := h.createConfigMap(ctx, t, configMapSpec{name: "startup-good", maxPods: 42})
	noKey := h.createConfigMap(ctx, t, configMapSpec{name: "startup-nokey", data: map[string]string{"config": kubeletPayload(43)}})
	ref := func(namespace, name, uid string) *string {
		v := mustJSON(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: namespace, Name: name, UID: types.UID(uid)}})
		return &v
	}
	raw := func(s string) *string { return &s }
	const wrongUID = "00000000-0000-0000-0000-000000000001"
	const localLKG = "using last-known-good (default)"

	tests := []struct {
		name        string
		annotation  *string // nil: no annotation
		want        status.Report
		wantMaxPods int32
		wantCurrent *corev1.ConfigMap // the current pointer after Bootstrap; nil: local
	}{
		{
			name: "nil assignment runs local",
			want: localDefaultReport(),
			// The kubelet's default.
			wantMaxPods: 110,
		},
		{
			name:        "all nil",
			annotation:  raw(`{}`),
			want:        syncFailedReport(localLKG, "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"),
			wantMaxPods: 110,
		},
		{
			name:        "missing uid",
			annotation:  ref(namespace, good.Name, ""),
			want:        syncFailedReport(localLKG, "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid"),
			wantMaxPods: 110,
		},
		{
			name:        "missing namespace",
			annotation:  ref("", good.Name, string(good.UID)),
			want:        syncFailedReport(localLKG, "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: namespace"),
			wantMaxPods: 110,
		},
		{
			name:        "missing name",
			annotation:  ref(namespace, "", string(good.UID)),
			want:        syncFailedReport(localLKG, "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: name"),
			wantMaxPods: 110,
		},
		{
			name:        "wrong uid",
			annotation:  ref(namespace, good.Name, wrongUID),
			want:        syncFailedReport(localLKG, "invalid NodeConfigSource.ConfigMap, uid "+wrongUID+" and default/startup-good do not refer to the same object (its uid is "+string(good.UID)+")"),
			wantMaxPods: 110,
		},
		{
			name:        "missing key",
			annotation:  raw(assignmentFor(noKey)),
			want:        syncFailedReport(localLKG, "ConfigMap default/startup-nokey (UID: "+string(noKey.UID)+`) has no key "kubelet"`),
			wantMaxPods: 110,
		},
		{
			name:        "absent ConfigMap",
			annotation:  ref(namespace, "startup-absent", wrongUID),
			want:        syncFailedReport(localLKG, "ConfigMap default/startup-absent does not exist"),
			wantMaxPods: 110,
		},
		{
			name:        "correct assignment",
			annotation:  raw(assignmentFor(good)),
			want:        currentReport(good),
			wantMaxPods: 42,
			wantCurrent: good,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := h.newNode(ctx, t)
			if tt.annotation != nil {
				n.annotate(ctx, t, tt.annotation)
			}
			p := n.start(ctx, t, processOptions{})
			n.wantReport(ctx, t, tt.want)
			wantMaxPods(t, "config returned by Bootstrap", p.cfg, tt.wantMaxPods)

			var wantUID, wantRV string
			var wantCheckpoints []string
			if tt.wantCurrent != nil {
				wantUID, wantRV = string(tt.wantCurrent.UID), tt.wantCurrent.ResourceVersion
				wantCheckpoints = []string{checkpointKey(tt.wantCurrent)}
			}
			wantPointer(t, n.dir, "current", types.UID(wantUID), wantRV)
			wantPointer(t, n.dir, "last-known-good", "", "")
			if diff := cmp.Diff(wantCheckpoints, checkpoints(t, n.dir)); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
		})
	}
}
