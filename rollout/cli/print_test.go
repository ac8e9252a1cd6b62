package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func twoRollouts() []*v1alpha1.ConfigRollout {
	a := sample()
	a.CreationTimestamp = metav1.NewTime(t0)
	beat := metav1.NewTime(t0.Add(9 * time.Minute))
	a.Status.LastReconcileTime = &beat
	b := sample()
	b.Name, b.CreationTimestamp = "done", metav1.NewTime(t0)
	b.Status.Phase, b.Status.CurrentStep, b.Status.Message = v1alpha1.PhaseCompleted, 4, "completed: 20 nodes promoted"
	return []*v1alpha1.ConfigRollout{a, b}
}

func TestListOutputs(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list"}, `NAME   PHASE         STEP   ASSIGNED   IN TRIAL   PROMOTED   FAILED   AGE   MESSAGE
done   Completed     4/4    3          1          1          1        10m   completed: 20 nodes promoted
ro     Progressing   3/4    3          1          1          1        10m   step 3 of 4: target 2 of 20 nodes, 3 assigned, 1 promoted, 1 failed
`},
		{[]string{"get", "ro", "-o", "wide", "--no-headers"}, "ro    Progressing   3/4   new   kubelet   20    3     1     1     1     60s   10m   step 3 of 4: target 2 of 20 nodes, 3 assigned, 1 promoted, 1 failed\n"},
		{[]string{"list", "-o", "name"}, "configrollout.dynconfig.io/done\nconfigrollout.dynconfig.io/ro\n"},
		{[]string{"get", "ro", "-o", "jsonpath={.status.phase}"}, "Progressing"},
		{[]string{"list", "-o", "custom-columns=NAME:.metadata.name,CM:.spec.configMapName,NONE:.status.nothing"}, "NAME   CM    NONE\ndone   new   <none>\nro     new   <none>\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := runCLI(t, newListFake(t, twoRollouts()...), clocktesting.NewFakeClock(now), append([]string{"rollout"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestListJSON(t *testing.T) {
	out, err := runCLI(t, newListFake(t, twoRollouts()...), nil, "rollout", "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Kind  string                   `json:"kind"`
		Items []v1alpha1.ConfigRollout `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if l.Kind != "List" || len(l.Items) != 2 || l.Items[1].Status.Message == "" {
		t.Errorf("-o json: %+v", l)
	}
	out, err = runCLI(t, newListFake(t, twoRollouts()...), nil, "rollout", "status", "ro", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: ConfigRollout") || !strings.Contains(out, "phase: Progressing") {
		t.Errorf("status -o yaml:\n%s", out)
	}
}

func TestListStale(t *testing.T) {
	// ro's heartbeat is 9m after t0: 6m later it is stale.
	out, err := runCLI(t, newListFake(t, twoRollouts()...), clocktesting.NewFakeClock(t0.Add(15*time.Minute)), "rollout", "get", "ro", "done")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "STALE: controller not seen for 6m") {
		t.Errorf("a rollout unreconciled for 6m does not say so:\n%s", out)
	}
	if strings.Count(out, "STALE") != 1 {
		t.Errorf("a completed rollout is called stale:\n%s", out)
	}
}

func TestListErrors(t *testing.T) {
	fake := newListFake(t, twoRollouts()...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "ro", "missing"}, "ConfigRollout ns/missing not found"},
		{[]string{"get"}, "get takes one or more NAMEs"},
		{[]string{"list", "-o", "bogus"}, `-o bogus: unable to match a printer suitable for the output format "bogus"`},
		{[]string{"list", "-o", "custom-columns=NAME"}, `"NAME": want NAME:.jsonpath`},
		{[]string{"delete", "missing"}, "ConfigRollout ns/missing not found"},
	} {
		if _, err := runCLI(t, fake, nil, append([]string{"rollout"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestDelete(t *testing.T) {
	fake := newListFake(t, twoRollouts()...)
	out, err := runCLI(t, fake, nil, "rollout", "delete", "done", "--wait=false")
	if err != nil || out != "configrollout.dynconfig.io/done deleted\n" {
		t.Fatalf("delete: %q, %v", out, err)
	}
	out, _ = runCLI(t, fake, nil, "rollout", "list", "-o", "name")
	if out != "configrollout.dynconfig.io/ro\n" {
		t.Errorf("after delete, list says %q", out)
	}
}

// newListFake is newFake whose scheme does not know the typed
// ConfigRollout: the fake's List cannot convert into it.
func newListFake(t *testing.T, objs ...*v1alpha1.ConfigRollout) *dynamicfake.FakeDynamicClient {
	t.Helper()
	var us []runtime.Object
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, &unstructured.Unstructured{Object: m})
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource(): "ConfigRolloutList"}, us...)
}
