package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

var at0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(since), Reason: "R", Message: "m"}
}

func TestNodeVerdict(t *testing.T) {
	assigned := at0
	before, after := at0.Add(-time.Hour), at0.Add(time.Minute)
	now := at0.Add(2 * time.Minute)
	ready := cond(corev1.NodeReady, corev1.ConditionTrue, before)
	for _, tc := range []struct {
		name        string
		an          v1alpha1.RolloutAnalysis
		conds       []corev1.NodeCondition
		wantFailed  string // substring; "" passes
		wantPending bool
	}{
		{name: "healthy", conds: []corev1.NodeCondition{ready, cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, before)}},
		{name: "pressure before the assignment", conds: []corev1.NodeCondition{ready, cond(corev1.NodeDiskPressure, corev1.ConditionTrue, before)}},
		{name: "new memory pressure", conds: []corev1.NodeCondition{ready, cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, after)}, wantFailed: "node: MemoryPressure turned True"},
		{name: "new pressure at the assignment's second", conds: []corev1.NodeCondition{ready, cond(corev1.NodePIDPressure, corev1.ConditionTrue, assigned)}, wantFailed: "PIDPressure turned True"},
		{name: "new NetworkUnavailable", conds: []corev1.NodeCondition{ready, cond(corev1.NodeNetworkUnavailable, corev1.ConditionTrue, after)}, wantFailed: "NetworkUnavailable"},
		{name: "NotReady past the grace", conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, after)}, wantFailed: "node: Ready is False since"},
		{name: "NotReady within the grace", conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown, now.Add(-10*time.Second))}, wantPending: true},
		{name: "NotReady since before the assignment", conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, before)}},
		{name: "disabled", an: v1alpha1.RolloutAnalysis{Node: &v1alpha1.NodeAnalysis{Disabled: true}},
			conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, after), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, after)}},
		{name: "own list of conditions", an: v1alpha1.RolloutAnalysis{Node: &v1alpha1.NodeAnalysis{Conditions: []string{"KernelDeadlock"}}},
			conds: []corev1.NodeCondition{ready, cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, after), cond("KernelDeadlock", corev1.ConditionTrue, after)}, wantFailed: "KernelDeadlock turned True"},
		{name: "component condition turns False", an: v1alpha1.RolloutAnalysis{ComponentConditions: []string{"KubeProxyConfigOK"}},
			conds: []corev1.NodeCondition{ready, cond("KubeProxyConfigOK", corev1.ConditionFalse, after)}, wantFailed: "component condition KubeProxyConfigOK is False"},
		{name: "component condition absent", an: v1alpha1.RolloutAnalysis{ComponentConditions: []string{"KubeProxyConfigOK"}}, conds: []corev1.NodeCondition{ready}},
		{name: "zero grace", an: v1alpha1.RolloutAnalysis{Node: &v1alpha1.NodeAnalysis{GracePeriod: &metav1.Duration{}}},
			conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, now)}, wantFailed: "Ready is False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{Status: corev1.NodeStatus{Conditions: tc.conds}}
			failed, pending := nodeVerdict(&tc.an, n, assigned, now)
			if (tc.wantFailed == "") != (failed == "") || !strings.Contains(failed, tc.wantFailed) || pending != tc.wantPending {
				t.Errorf("failed %q pending %v, want %q pending %v", failed, pending, tc.wantFailed, tc.wantPending)
			}
		})
	}
}

// readyOnN1 is a pod Ready for an hour before at0, bound to node n1.
func readyOnN1(name string) *corev1.Pod {
	p := pod(name, corev1.PodRunning, corev1.ConditionTrue, at0.Add(-time.Hour))
	p.Spec.NodeName = "n1"
	return &p
}

func pod(name string, phase corev1.PodPhase, ready corev1.ConditionStatus, since time.Time) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}, Status: corev1.PodStatus{Phase: phase}}
	if ready != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}
	}
	return p
}

func TestPodVerdict(t *testing.T) {
	now := at0
	old := now.Add(-time.Hour)
	base := []corev1.Pod{
		pod("a", corev1.PodRunning, corev1.ConditionTrue, old),
		pod("b", corev1.PodRunning, corev1.ConditionTrue, old),
		pod("c", corev1.PodRunning, corev1.ConditionTrue, old),
		pod("d", corev1.PodRunning, corev1.ConditionTrue, old),
		pod("gone-bad", corev1.PodFailed, "", old),
		pod("slow", corev1.PodPending, corev1.ConditionFalse, old),
	}
	rejected := func(name string) corev1.Pod {
		p := pod(name, corev1.PodFailed, "", time.Time{})
		p.Status.Reason = "OutOfpods"
		return p
	}
	with := func(change func([]corev1.Pod) []corev1.Pod) []corev1.Pod {
		out := append([]corev1.Pod(nil), base...)
		return change(out)
	}
	for _, tc := range []struct {
		name         string
		pa           v1alpha1.PodAnalysis
		now          []corev1.Pod
		want         string
		inconclusive bool
	}{
		{name: "as before", pa: v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0)), MaxUnready: ptr.To(intstr.FromInt32(0))}, now: base},
		{name: "two rejected", pa: v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(1))},
			now:  with(func(p []corev1.Pod) []corev1.Pod { p[0], p[1] = rejected("a"), rejected("b"); return p }),
			want: "pods: 2 pods newly failed since the node was assigned (maxNewFailures 1): ns/a (OutOfpods), ns/b (OutOfpods)"},
		{name: "one rejected within maxNewFailures", pa: v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(1))},
			now: with(func(p []corev1.Pod) []corev1.Pod { p[0] = rejected("a"); return p })},
		{name: "a new pod rejected", pa: v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0))},
			now: with(func(p []corev1.Pod) []corev1.Pod { return append(p, rejected("new")) }), want: "ns/new (OutOfpods)"},
		{name: "unready past grace, over 25%", pa: v1alpha1.PodAnalysis{MaxUnready: ptr.To(intstr.FromString("25%"))},
			now: with(func(p []corev1.Pod) []corev1.Pod {
				p[0] = pod("a", corev1.PodRunning, corev1.ConditionFalse, now.Add(-time.Minute))
				p[1] = rejected("b")
				return p
			}), want: "pods: 2 of the 4 pods Ready when the node was assigned are not Ready (maxUnready 25%)"},
		{name: "unready within grace", pa: v1alpha1.PodAnalysis{MaxUnready: ptr.To(intstr.FromInt32(0))},
			now: with(func(p []corev1.Pod) []corev1.Pod {
				p[0] = pod("a", corev1.PodRunning, corev1.ConditionFalse, now.Add(-5*time.Second))
				return p
			}), inconclusive: true},
		{name: "unready within maxUnready", pa: v1alpha1.PodAnalysis{MaxUnready: ptr.To(intstr.FromInt32(1))},
			now: with(func(p []corev1.Pod) []corev1.Pod {
				p[0] = pod("a", corev1.PodRunning, corev1.ConditionFalse, old)
				return p
			})},
		{name: "deleted and succeeded pods do not count", pa: v1alpha1.PodAnalysis{MaxUnready: ptr.To(intstr.FromInt32(0)), MaxNewFailures: ptr.To(int32(0))},
			now: with(func(p []corev1.Pod) []corev1.Pod {
				p[0] = rejected("a")
				p[0].DeletionTimestamp = &metav1.Time{Time: now}
				p[1] = pod("b", corev1.PodSucceeded, corev1.ConditionFalse, now)
				return p
			})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := podVerdict(&tc.pa, baselineOf(base), tc.now, now)
			if tc.inconclusive {
				if err != errInconclusive {
					t.Fatalf("got %q, %v; want inconclusive", got, err)
				}
				return
			}
			if err != nil || (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// promServer answers /api/v1/query with the body answer returns for the
// query.
func promServer(t *testing.T, answer func(query string) (int, string)) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			t.Errorf("path %s", r.URL.Path)
		}
		code, body := answer(r.URL.Query().Get("query"))
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func vector(v string) string {
	return fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"n1"},"value":[1700000000.1,%q]}]}}`, v)
}

func TestCheckPrometheus(t *testing.T) {
	a := newAnalyzer(nil, clocktesting.NewFakeClock(at0), func(string) {})
	for _, tc := range []struct {
		name    string
		code    int
		body    string
		wantErr string
		want    string
	}{
		{name: "within", code: 200, body: vector("0.01")},
		{name: "above max", code: 200, body: vector("0.5"), want: `prometheus errors: rate{node="n1"} at {node="n1"} is 0.5, outside [-Inf, 0.1]`},
		{name: "NaN", code: 200, body: vector("NaN"), want: "is NaN"},
		{name: "scalar", code: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1,"0.05"]}}`},
		{name: "empty", code: 200, body: `{"status":"success","data":{"resultType":"vector","result":[]}}`, wantErr: "returned no data"},
		{name: "bad query", code: 400, body: `{"status":"error","errorType":"bad_data","error":"parse error"}`, wantErr: "bad_data: parse error"},
		{name: "not JSON", code: 502, body: `<html>bad gateway</html>`, wantErr: "HTTP 502, an answer that does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			s := promServer(t, func(q string) (int, string) { asked = q; return tc.code, tc.body })
			p := &v1alpha1.PrometheusCheck{ExternalCheck: v1alpha1.ExternalCheck{Name: "errors"}, Address: s.URL + "/", Query: `rate{node="$node"}`, Max: ptr.To("0.1")}
			got, err := a.checkPrometheus(context.Background(), p, "n1")
			if asked != `rate{node="n1"}` {
				t.Errorf("asked %q: $node not replaced", asked)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestExternalErrorsAreInconclusive: an unreachable check does not fail a
// node until consecutiveErrorLimit runs in a row failed; a success in
// between starts the count over; and the runs before the limit hold no
// verdict (the soak cannot end on them).
func TestExternalErrorsAreInconclusive(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			panic(http.ErrAbortHandler) // the connection drops: no answer
		}
		var req v1alpha1.WebhookRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Node != "n1" || req.Rollout.Name != "ro" || req.ConfigMap.UID != "cm-uid" || req.Phase != "Trial" {
			t.Errorf("request %+v, %v", req, err)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer s.Close()
	clk := clocktesting.NewFakeClock(at0)
	var planned int
	a := newAnalyzer(nil, clk, func(string) { planned++ })
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.ConfigMapName = "cm"
	ro.Status.ConfigMap = &v1alpha1.ConfigMapRef{UID: "cm-uid", ResourceVersion: "7"}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Webhooks: []v1alpha1.WebhookCheck{{
		ExternalCheck: v1alpha1.ExternalCheck{Name: "smoke", ConsecutiveErrorLimit: ptr.To(int32(3))}, URL: s.URL}}}
	gn := &gateNode{assignedAt: at0, checks: map[string]*checkState{"webhook/smoke": {}}}
	cs := gn.checks["webhook/smoke"]
	run := func() {
		a.runCheck(context.Background(), job{key: "ns/ro", node: "n1", check: "webhook/smoke", ro: ro, gn: gn, cs: cs})
	}

	run()
	if cs.failed != "" || cs.at.IsZero() || cs.errors != 0 {
		t.Fatalf("after a go: %+v", cs)
	}
	up.Store(false)
	for i := 1; i <= 2; i++ {
		clk.Step(time.Minute)
		run()
		if cs.failed != "" || cs.errors != i || !cs.at.Equal(at0) {
			t.Fatalf("after %d errors: %+v, want no verdict and no failure", i, cs)
		}
	}
	up.Store(true)
	run()
	if cs.errors != 0 {
		t.Fatalf("a success does not reset the count: %+v", cs)
	}
	up.Store(false)
	for range 3 {
		run()
	}
	if cs.failed != "" || planned != 0 {
		t.Fatalf("after 3 errors, as many as consecutiveErrorLimit allows: %+v, planned %d", cs, planned)
	}
	run()
	if !strings.Contains(cs.failed, "webhook/smoke: 4 errors in a row, more than consecutiveErrorLimit 3") || planned != 1 {
		t.Fatalf("after 4 errors: %+v, planned %d", cs, planned)
	}
}

// TestWebhookServerErrorsAreErrors (issue 29): a webhook that answers 5xx
// (or 408, 429) failed, it did not judge the node: as Argo Rollouts counts
// a web metric's non-2xx answer, each is an error toward
// consecutiveErrorLimit (default 4: the fifth in a row fails the node),
// and a go in between starts the count over. Only a 4xx answer is a
// no-go, and fails the node at once. Before, any answer but 2xx failed the
// node at once.
func TestWebhookServerErrorsAreErrors(t *testing.T) {
	var code atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(code.Load()))
		io.WriteString(w, "upstream said "+http.StatusText(int(code.Load())))
	}))
	defer s.Close()
	clk := clocktesting.NewFakeClock(at0)
	var planned int
	a := newAnalyzer(nil, clk, func(string) { planned++ })
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Webhooks: []v1alpha1.WebhookCheck{{ExternalCheck: v1alpha1.ExternalCheck{Name: "smoke"}, URL: s.URL}}}
	gn := &gateNode{assignedAt: at0, checks: map[string]*checkState{"webhook/smoke": {}}}
	cs := gn.checks["webhook/smoke"]
	run := func(c int) {
		code.Store(int32(c))
		clk.Step(time.Minute)
		a.runCheck(context.Background(), job{key: "ns/ro", node: "n1", check: "webhook/smoke", ro: ro, gn: gn, cs: cs})
	}
	for i, c := range []int{500, 502, 503, 408, 429, 504} {
		if i == 3 {
			run(200) // a go in between: the count starts over
			if cs.errors != 0 || cs.failed != "" {
				t.Fatalf("after a go: %+v", cs)
			}
		}
		run(c)
		if cs.failed != "" || planned != 0 {
			t.Fatalf("HTTP %d failed the node: %q (planned %d); want an error toward consecutiveErrorLimit", c, cs.failed, planned)
		}
	}
	if cs.errors != 3 || !strings.Contains(cs.lastErr, "webhook smoke: HTTP 504, no verdict: upstream said Gateway Timeout") {
		t.Fatalf("errors %d, last %q", cs.errors, cs.lastErr)
	}
	run(500)
	if cs.failed != "" {
		t.Fatalf("4 errors in a row, as many as the default limit allows, failed the node: %q", cs.failed)
	}
	run(500)
	if want := "webhook/smoke: 5 errors in a row, more than consecutiveErrorLimit 4, the last: webhook smoke: HTTP 500"; !strings.Contains(cs.failed, want) || planned != 1 {
		t.Fatalf("after 5 errors: %q (planned %d), want %q", cs.failed, planned, want)
	}

	// An explicit no-go fails the node at once.
	for _, c := range []int{400, 403, 404, 409, 412} {
		got, err := webhookAnswer("smoke", c, []byte("no"))
		if err != nil || got != fmt.Sprintf("webhook smoke: no-go (HTTP %d): no", c) {
			t.Errorf("HTTP %d: %q, %v; want a no-go", c, got, err)
		}
	}
	for _, c := range []int{100, 304, 408, 429, 500, 599} {
		if got, err := webhookAnswer("smoke", c, nil); got != "" || err == nil {
			t.Errorf("HTTP %d: %q, %v; want an error", c, got, err)
		}
	}
}

func TestWebhookNoGo(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPreconditionFailed)
		io.WriteString(w, "canary error budget spent on "+r.Method)
	}))
	defer s.Close()
	a := newAnalyzer(nil, clocktesting.NewFakeClock(at0), func(string) {})
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro"}}
	got, err := a.checkWebhook(context.Background(), &v1alpha1.WebhookCheck{ExternalCheck: v1alpha1.ExternalCheck{Name: "smoke"}, URL: s.URL},
		job{node: "n1", ro: ro, gn: &gateNode{}})
	if err != nil || got != "webhook smoke: no-go (HTTP 412): canary error budget spent on POST" {
		t.Errorf("got %q, %v", got, err)
	}
}

// TestAnalyzerFlow drives the analyzer as reconcile does: a plan assigns a
// node (the pod baseline is taken before the patch), a pod is rejected
// after, the pods check runs, and the next plan's input carries the
// failure; a promotion is noted once; a plan that watches nothing forgets
// the rollout.
func TestAnalyzerFlow(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(at0)
	client := fake.NewClientset(readyOnN1("a"), readyOnN1("b"), readyOnN1("c"))
	var planned []string
	a := newAnalyzer(client, clk, func(key string) { planned = append(planned, key) })
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0))}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		cond(corev1.NodeReady, corev1.ConditionTrue, at0.Add(-time.Hour))}}}
	get := func(string) *corev1.Node { return node }
	input := func() *plan.Analysis {
		nodes := []plan.Node{{Name: "n1"}}
		a.inputs("ns/ro", ro, nodes, get)
		return nodes[0].Analysis
	}

	a.watch(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0, Fresh: true}})
	if got := input(); got == nil || got.Failed != "" || !got.CheckedAt.IsZero() {
		t.Fatalf("before the first pods check: %+v, want no failure and no verdict", got)
	}
	// The new config rejects pod c.
	c := readyOnN1("c")
	c.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfpods"}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	jobs := a.due()
	if len(jobs) != 1 || jobs[0].check != "pods" {
		t.Fatalf("due %+v, want the pods check", jobs)
	}
	a.runCheck(ctx, jobs[0])
	if len(a.due()) != 0 {
		t.Errorf("the pods check is due again at once")
	}
	got := input()
	if got == nil || got.Failed != "pods: 1 pods newly failed since the node was assigned (maxNewFailures 0): ns/c (OutOfpods)" {
		t.Fatalf("after the pods check: %+v", got)
	}
	if len(planned) != 1 || planned[0] != "ns/ro" {
		t.Errorf("a new failure planned %v, want ns/ro once", planned)
	}

	// Promotion is noted once, at the first plan that says so.
	a.watch(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0, Promoted: true}})
	promoted := clk.Now()
	clk.Step(time.Minute)
	a.watch(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0, Promoted: true}})
	if got := input(); !got.PromotedAt.Equal(promoted) {
		t.Errorf("promoted at %v, want %v", got.PromotedAt, promoted)
	}
	// A Node condition turns bad: it fails at once, from the informer.
	node.Status.Conditions = append(node.Status.Conditions, cond(corev1.NodeDiskPressure, corev1.ConditionTrue, clk.Now()))
	if got := input(); !strings.HasPrefix(got.Failed, "node: DiskPressure turned True") {
		t.Errorf("with new disk pressure: %+v", got)
	}

	a.watch(ctx, "ns/ro", ro, nil)
	if got := input(); got != nil {
		t.Errorf("after a plan that watches nothing: %+v", got)
	}
}

// FuzzPromVerdict: any answer of a Prometheus (or of anything at its
// address) gives a verdict or an error, never a panic; a failure reason
// stays bounded by what the check quotes.
func FuzzPromVerdict(f *testing.F) {
	for _, seed := range []string{
		vector("0.5"), vector("NaN"), vector("+Inf"), vector("x"),
		`{"status":"success","data":{"resultType":"scalar","result":[1,"0.05"]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1,5]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[]}]}}`,
		`{"status":"error","errorType":"bad_data","error":"parse error"}`,
		`null`, `[]`, "", "\xff\xfe",
	} {
		f.Add(200, []byte(seed))
	}
	p := &v1alpha1.PrometheusCheck{ExternalCheck: v1alpha1.ExternalCheck{Name: "q"}, Query: "up", Min: ptr.To("-1"), Max: ptr.To("1")}
	f.Fuzz(func(t *testing.T, code int, body []byte) {
		failed, err := promVerdict(p, "up", code, body)
		if failed != "" && err != nil {
			t.Fatalf("both a failure %q and an error %v", failed, err)
		}
		if failed != "" && !strings.HasPrefix(failed, "prometheus q: up") {
			t.Fatalf("failure %q does not name the check", failed)
		}
	})
}
