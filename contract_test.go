package dynconfig

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// unreachableRemote is a Remote whose reads fail as a busy API server's do
// (a 429, a 5xx, a timeout): the desired config is unclear.
type unreachableRemote struct{}

func (unreachableRemote) Assigned(context.Context) (source.Assignment, error) {
	return source.Assignment{}, errors.New("the server is currently unable to handle the request (get nodes node-1)")
}

func (unreachableRemote) Run(ctx context.Context, _ func()) error {
	<-ctx.Done()
	return nil
}

// TestStartupSyncFailureIsNoVerdict (issue 24): a node that restarts onto a
// new config (a rollout's) and cannot read its assignment at that start runs
// its last-known-good, but publishes phase SyncFailed, not RolledBack: the
// config is not known to be bad, and a rollout must not count it failed.
// Before, the phase was RolledBack and a rollout with maxFailures 0 halted
// and reverted every node.
func TestStartupSyncFailureIsNoVerdict(t *testing.T) {
	const good = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`
	n := newNode(t, "")
	n.configMap("a", "uid-a", good, nil)
	n.assign("a", "uid-a")
	n.runTrial() // a is last-known-good

	// A process adopts b at its start (current = b) and stops before b
	// ends its trial.
	n.configMap("b", "uid-b", good, nil)
	n.assign("b", "uid-b")
	if _, rep := n.start(); rep.Message != "using current (UID: uid-b)" {
		t.Fatalf("b not adopted: %+v", rep)
	}

	// The next start cannot read the assignment.
	c := n.controller(func(o *Options[testConfig]) { o.Remote = unreachableRemote{} })
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rep, cs := n.reporter.last(), n.reporter.lastConfig()
	if rep.Status != "Unknown" || !contains(rep.Reason, "failed to sync, desired config unclear") {
		t.Fatalf("condition %+v, want Unknown: failed to sync", rep)
	}
	if cs == nil || cs.Phase != nodeapi.PhaseSyncFailed || cs.Phase.Bad() {
		t.Fatalf("published %+v, want phase SyncFailed", cs)
	}
	if nodeapi.DescribeSource(cs.Assigned) == nodeapi.DescribeSource(cs.Active) {
		t.Fatalf("assigned %s and active %s: want b assigned, a active", nodeapi.DescribeSource(cs.Assigned), nodeapi.DescribeSource(cs.Active))
	}

	// Once the assignment can be read again the node runs b.
	cfg, rep := n.start()
	if cfg.Value != 1 || rep.Status != "True" || rep.Message != "using current (UID: uid-b)" {
		t.Fatalf("after the outage: cfg %+v report %+v", cfg, rep)
	}
	if cs := n.reporter.lastConfig(); cs.Phase != nodeapi.PhaseTrial {
		t.Fatalf("after the outage: phase %s, want Trial", cs.Phase)
	}
}

// TestNewRefusesConflictingOptions (issue 24): an option the others would
// silently ignore is refused, naming both fields. Before, New accepted
// Layers with Local (the files were never read) and Remote with Cluster.
func TestNewRefusesConflictingOptions(t *testing.T) {
	n := newNode(t, "")
	for _, tc := range []struct {
		name   string
		mutate func(*Options[testConfig])
		want   []string
	}{
		{"Layers and Local", func(o *Options[testConfig]) { o.Local = LocalConfig{InitFile: "/etc/x.yaml"} },
			[]string{"Options.Local", "Options.Layers"}},
		{"Layers and Local flags", func(o *Options[testConfig]) { o.Local = LocalConfig{Flags: make([]merge.Override, 1)} },
			[]string{"Options.Local", "Options.Layers"}},
		{"Layers and Merge", func(o *Options[testConfig]) { o.Merge = merge.Options{Lenient: true} },
			[]string{"Options.Merge", "Options.Layers"}},
		{"Remote and Cluster", func(o *Options[testConfig]) {
			o.Cluster = &Cluster{Client: fake.NewClientset(), NodeName: "n1"}
		}, []string{"Options.Remote", "Options.Cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := n.options()
			tc.mutate(&opts)
			_, err := New(opts)
			if err == nil {
				t.Fatal("New accepted conflicting options")
			}
			for _, f := range tc.want {
				if !contains(err.Error(), f) {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
	if _, err := New(n.options()); err != nil {
		t.Fatalf("the options without the conflict: %v", err)
	}
}

// TestInvalidLocalConfigIsReported: a component whose own local config does
// not validate refuses to start (nothing to fall back to), and says so in
// its condition first, naming the field, so that the Node does not keep an
// old condition. (Issue 19's run role of the stock kubelet met this: the
// node's own kubelet files failed validation and the Node said nothing.)
func TestInvalidLocalConfigIsReported(t *testing.T) {
	n := newNode(t, `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`)
	_, err := n.controller().Bootstrap(n.ctx())
	if err == nil || !contains(err.Error(), "invalid local config") {
		t.Fatalf("Bootstrap = %v, want the invalid local config", err)
	}
	r, cs := n.reporter.last(), n.reporter.lastConfig()
	if r.Status != "False" || r.Message != status.LocalInvalidMessage ||
		!contains(r.Reason, "failed to validate the local config, cause: ") || !contains(r.Reason, "value") {
		t.Fatalf("report %+v, want False naming the invalid field", r)
	}
	if cs == nil || cs.Phase != nodeapi.PhaseLocal || cs.Error != r.Reason {
		t.Fatalf("ConfigStatus %+v", cs)
	}
}
