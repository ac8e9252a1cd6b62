package sourcetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/source/sourcetest"
)

// fakeBackend is the conformance harness of Fake.
type fakeBackend struct{ f *sourcetest.Fake }

func (b fakeBackend) Remote() source.Remote { return b.f }
func (b fakeBackend) PutConfigMap(_ *testing.T, cm *corev1.ConfigMap) {
	b.f.PutConfigMap(cm)
}
func (b fakeBackend) DeleteConfigMap(t *testing.T, namespace, name string) {
	if !b.f.DeleteConfigMap(namespace, name) {
		t.Fatalf("DeleteConfigMap(%s/%s): it did not exist", namespace, name)
	}
}
func (b fakeBackend) Assign(_ *testing.T, src *corev1.NodeConfigSource) { b.f.Assign(src) }

func TestFakeConformance(t *testing.T) {
	sourcetest.RunRemoteConformance(t, sourcetest.Harness{
		PayloadKey: "kubelet",
		New:        func(*testing.T) sourcetest.Backend { return fakeBackend{sourcetest.NewFake("kubelet")} },
	})
}

// TestFakeReadErrors covers what the hand-rolled Remotes of the root
// package's tests do: an API server that is down (SetReadError), or down
// only for the first reads (FailNextReads).
func TestFakeReadErrors(t *testing.T) {
	ctx := context.Background()
	f := sourcetest.NewFake("kubelet")
	stored := f.PutConfigMap(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "uid-1", ResourceVersion: "42"},
		Data:       map[string]string{"kubelet": "x"},
	})
	if stored.ResourceVersion != "42" || stored.UID != "uid-1" || stored.Kind != "ConfigMap" {
		t.Fatalf("PutConfigMap stored %+v; want the given uid and resourceVersion, kind ConfigMap", stored.ObjectMeta)
	}
	f.Assign(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "cm", UID: "uid-1"}})

	down := errors.New("connection refused")
	f.FailNextReads(2, down)
	for i := range 2 {
		if _, err := f.Assigned(ctx); !errors.Is(err, down) {
			t.Fatalf("read %d: error %v, want %v", i+1, err, down)
		}
	}
	if a, err := f.Assigned(ctx); err != nil || a.Source.ConfigMap.ResourceVersion != "42" {
		t.Fatalf("after the failed reads: %+v, %v", a.Source, err)
	}

	calls := make(chan struct{}, 10)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx, func() { calls <- struct{}{} }) }()
	waitCall(t, calls, "the first call")
	f.SetReadError(down)
	waitCall(t, calls, "SetReadError(err)")
	if _, err := f.Assigned(ctx); !errors.Is(err, down) {
		t.Fatalf("with SetReadError: error %v, want %v", err, down)
	}
	var ie *nodeapi.InvalidError
	if _, err := f.Assigned(ctx); errors.As(err, &ie) {
		t.Fatal("a read error is an *InvalidError; want a plain error (the desired config is unclear)")
	}
	f.SetReadError(nil)
	waitCall(t, calls, "SetReadError(nil)")
	if _, err := f.Assigned(ctx); err != nil {
		t.Fatalf("after SetReadError(nil): %v", err)
	}
	f.Notify()
	waitCall(t, calls, "Notify")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(sourcetest.DefaultTimeout):
		t.Fatal("Run did not return")
	}
}

func waitCall(t *testing.T, calls <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-calls:
	case <-time.After(sourcetest.DefaultTimeout):
		t.Fatalf("no changed call after %s", after)
	}
}
