package integration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseMetrics proves the reading of the open watches: the WATCH
// series of apiserver_longrunning_requests by verb, resource and
// subresource, resource requests only, zero series left out; none when the
// gauge is missing.
func TestParseMetrics(t *testing.T) {
	body := `# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests.
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 50
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH",version="v1"} 51
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="cluster",subresource="",verb="WATCH",version="v1"} 0
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="CONNECT",version="v1"} 1
`
	requests, watches, err := parseMetrics([]byte(body))
	if err != nil {
		t.Fatalf("parseMetrics: %v", err)
	}
	if diff := cmp.Diff(requestCount{{"WATCH", "configmaps", ""}: 4}, requests, cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	want := requestCount{{"WATCH", "configmaps", ""}: 52, {"WATCH", "nodes", ""}: 51}
	if diff := cmp.Diff(want, watches, cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("open watches (-want +got):\n%s", diff)
	}
	_, watches, err = parseMetrics([]byte("# TYPE apiserver_request_total counter\napiserver_request_total{verb=\"GET\",resource=\"nodes\"} 1\n"))
	if err != nil || len(watches) != 0 {
		t.Errorf("parseMetrics without the gauge: open watches %v, error %v; want none and no error", watches, err)
	}
}

// TestParseRequestCounts proves the benchmark's reading of
// apiserver_request_total: summed over codes, scopes and versions by verb,
// resource and subresource, non-resource requests left out.
func TestParseRequestCounts(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    requestCount
		wantErr bool
	}{
		{
			name: "sums and skips",
			body: `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 9
# HELP other_total Something else.
# TYPE other_total counter
other_total{verb="GET",resource="nodes"} 100
`,
			want: requestCount{
				{"PATCH", "nodes", "status"}: 5,
				{"GET", "nodes", ""}:         7,
				{"LIST", "configmaps", ""}:   1,
			},
		},
		{name: "no such metric", body: "# TYPE other_total counter\nother_total 1\n", wantErr: true},
		{name: "not the text format", body: "apiserver_request_total{verb=\"GET\" 1\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequestCounts([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseRequestCounts: error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(requestKey{})); diff != "" && !tt.wantErr {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRequestCountSub proves the before/after difference keeps only the
// series that moved, including ones new after the first scrape, and ones
// only the subtrahend has (as the test's own requests the API server did
// not count).
func TestRequestCountSub(t *testing.T) {
	before := requestCount{{"GET", "nodes", ""}: 4, {"LIST", "nodes", ""}: 2, {"WATCH", "nodes", ""}: 1}
	after := requestCount{{"GET", "nodes", ""}: 10, {"LIST", "nodes", ""}: 2, {"POST", "events", ""}: 3}
	want := requestCount{{"GET", "nodes", ""}: 6, {"POST", "events", ""}: 3, {"WATCH", "nodes", ""}: -1}
	if diff := cmp.Diff(want, after.sub(before), cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("after - before (-want +got):\n%s", diff)
	}
	if got, want := (requestCount{{"PATCH", "nodes", "status"}: 5, {"GET", "nodes", ""}: 0, {"POST", "events", ""}: 7}).String(),
		"POST events 7, PATCH nodes/status 5"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (requestCount{}).String(); got != "none" {
		t.Errorf("String() of nothing = %q, want none", got)
	}
	wantOrder := []requestKey{{"GET", "nodes", ""}, {"POST", "events", ""}, {"WATCH", "nodes", ""}}
	if diff := cmp.Diff(wantOrder, want.keys(), cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

// TestRequestCountOnly proves the split of the series by resource.
func TestRequestCountOnly(t *testing.T) {
	c := requestCount{{"GET", "nodes", ""}: 1, {"PATCH", "nodes", "status"}: 2, {"PUT", "leases", ""}: 3, {"POST", "events", ""}: 4}
	in := requestCount{{"GET", "nodes", ""}: 1, {"PATCH", "nodes", "status"}: 2, {"POST", "events", ""}: 4}
	if diff := cmp.Diff(in, c.only([]string{"nodes", "events"}, true), cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("only(in) (-want +got):\n%s", diff)
	}
	out := requestCount{{"PUT", "leases", ""}: 3}
	if diff := cmp.Diff(out, c.only([]string{"nodes", "events"}, false), cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("only(out) (-want +got):\n%s", diff)
	}
}

// TestPercentile proves the nearest-rank percentiles the benchmark reports.
func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"p50 of 100", hundred, 50, ms(50)},
		{"p99 of 100", hundred, 99, ms(99)},
		{"p100 of 100", hundred, 100, ms(100)},
		{"p99 of 3", []time.Duration{ms(1), ms(2), ms(3)}, 99, ms(3)},
		{"p0 is the minimum", []time.Duration{ms(5), ms(6)}, 0, ms(5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}
