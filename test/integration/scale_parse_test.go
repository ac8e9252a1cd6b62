package integration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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
// series that moved, including ones new after the first scrape.
func TestRequestCountSub(t *testing.T) {
	before := requestCount{{"GET", "nodes", ""}: 4, {"LIST", "nodes", ""}: 2}
	after := requestCount{{"GET", "nodes", ""}: 10, {"LIST", "nodes", ""}: 2, {"POST", "events", ""}: 3}
	want := requestCount{{"GET", "nodes", ""}: 6, {"POST", "events", ""}: 3}
	if diff := cmp.Diff(want, after.sub(before), cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("after - before (-want +got):\n%s", diff)
	}
	wantOrder := []requestKey{{"GET", "nodes", ""}, {"POST", "events", ""}}
	if diff := cmp.Diff(wantOrder, want.keys(), cmp.AllowUnexported(requestKey{})); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
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
