package app

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews answers TokenReviews ("good" and "reader" are users, the
// rest is not) and SubjectAccessReviews (only "reader" may get /metrics),
// and counts them.
func fakeReviews(t *testing.T) (*fake.Clientset, *int, *int) {
	t.Helper()
	client := fake.NewClientset()
	var tokens, sars int
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tokens++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "good", "reader":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tr.Spec.Token, Groups: []string{"g"}}}
		case "boom":
			return true, nil, errors.New("the API server is down")
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sars++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		if na == nil || sar.Spec.ResourceAttributes != nil {
			t.Errorf("SubjectAccessReview %+v is not of a non-resource URL", sar.Spec)
			return true, sar, nil
		}
		sar.Status.Allowed = sar.Spec.User == "reader" && na.Path == "/metrics" && na.Verb == "get" && len(sar.Spec.Groups) == 1
		return true, sar, nil
	})
	return client, &tokens, &sars
}

func TestDelegatedAuth(t *testing.T) {
	client, tokens, sars := fakeReviews(t)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a := &DelegatedAuth{Client: client, Open: []string{"/livez"}, Now: func() time.Time { return now }}
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) }))
	get := func(path, auth string) (int, string) {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	for _, tc := range []struct {
		path, auth string
		code       int
		body       string
	}{
		{"/metrics", "", 401, "bearer token is required"},
		{"/metrics", "Basic dXNlcjpwdw==", 401, "bearer token is required"},
		{"/metrics", "Bearer nobody", 401, "Unauthorized"},
		{"/metrics", "Bearer good", 403, `user "good" cannot get path "/metrics"`},
		{"/metrics", "Bearer reader", 200, "served"},
		{"/metrics", "bearer reader", 200, "served"},
		{"/debug/pprof/", "Bearer reader", 403, "Forbidden"},
		{"/metrics", "Bearer boom", 500, "authentication failed"},
		{"/livez", "", 200, "served"},
	} {
		code, body := get(tc.path, tc.auth)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s with %q: %d %q, want %d %q", tc.path, tc.auth, code, body, tc.code, tc.body)
		}
	}
	// Cached: a scrape every 15s for 10 minutes reviews its token once a
	// minute and asks for its access once per 5 minutes.
	*tokens, *sars = 0, 0
	start := now
	for now = start; now.Before(start.Add(10 * time.Minute)); now = now.Add(15 * time.Second) {
		if code, _ := get("/metrics", "Bearer reader"); code != 200 {
			t.Fatalf("scrape at %v: %d", now, code)
		}
	}
	if *tokens > 11 || *sars > 3 {
		t.Errorf("40 scrapes made %d TokenReviews and %d SubjectAccessReviews, want at most 11 and 3", *tokens, *sars)
	}
	// An error is not cached: the API server back, the token passes.
	if code, _ := get("/metrics", "Bearer boom"); code != 500 {
		t.Errorf("boom again: %d", code)
	}
}

func TestMetricsAuthOptions(t *testing.T) {
	for _, tc := range []struct {
		o    MetricsAuthOptions
		want string
	}{
		{MetricsAuthOptions{Mode: "none"}, ""},
		{MetricsAuthOptions{Mode: "delegated"}, ""},
		{MetricsAuthOptions{Mode: "delegated", CertFile: "c"}, "give both or neither"},
		{MetricsAuthOptions{Mode: "none", CertFile: "c", KeyFile: "k"}, "only with --metrics-auth=delegated"},
		{MetricsAuthOptions{Mode: "rbac"}, `--metrics-auth "rbac": want "none" or "delegated"`},
	} {
		err := tc.o.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	o := MetricsAuthOptions{Mode: "delegated"}
	cfg, err := o.TLSConfig("localhost")
	if err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("self-signed: %v", err)
	}
}

// The caches stay bounded whatever tokens arrive.
func TestTTLCacheBounded(t *testing.T) {
	var c ttlCache[int, bool]
	now := time.Now()
	for i := range 3 * maxCached {
		c.put(i, true, now, now.Add(time.Minute))
		if len(c.m) > maxCached {
			t.Fatalf("%d entries after %d puts, bound %d", len(c.m), i+1, maxCached)
		}
	}
	if _, ok := c.get(3*maxCached-1, now); !ok {
		t.Error("the newest entry is gone")
	}
	if _, ok := c.get(3*maxCached-1, now.Add(time.Minute)); ok {
		t.Error("an expired entry is served")
	}
}

// A component with --metrics-auth=delegated serves HTTPS, /metrics only to
// a token the API server authorizes for it, /healthz to anyone.
func TestComponentMetricsAuth(t *testing.T) {
	client, _, _ := fakeReviews(t)
	if _, err := client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := testComponent(nil, func(ctx context.Context, _ *greeterConfig, _ Env) error {
		<-ctx.Done()
		return ctx.Err()
	})
	c.NewClient = func(string) (kubernetes.Interface, error) { return client, nil }
	s := start(t, NewCommand(c), "--dynamic-config-dir="+filepath.Join(t.TempDir(), "state"), "--port=0", "--node-name=n1",
		"--kubeconfig=unused", "--metrics-auth=delegated")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		path, token string
		code        int
	}{
		{"/metrics", "", 401},
		{"/metrics", "good", 403},
		{"/metrics", "reader", 200},
		{"/configz", "reader", 403},
		{"/healthz", "", 200},
	} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+s.addr+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s with token %q: %d, want %d", tc.path, tc.token, resp.StatusCode, tc.code)
		}
	}
	if resp, err := http.Get("http://" + s.addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("/metrics served over plain HTTP")
		}
	}

	s.stop()
	// Without an API server there is nobody to ask: refused at start.
	code, _, stderr := execute(t, testComponent(nil, nil), "--dynamic-config-dir="+filepath.Join(t.TempDir(), "state"), "--port=0", "--metrics-auth=delegated")
	if code == 0 || !strings.Contains(stderr, "--metrics-auth=delegated: needs the API server") {
		t.Errorf("delegated without --kubeconfig: exit %d, stderr %s", code, stderr)
	}
}
