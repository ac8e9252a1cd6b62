// This file keeps every dependency the packages being written need in go.mod
// while they land one by one; it is removed once they all import them.

package dynconfig

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/pflag"
	_ "golang.org/x/sys/unix"
	_ "gopkg.in/evanphx/json-patch.v4"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/strategicpatch"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/klog/v2"
	_ "k8s.io/kube-proxy/config/v1alpha1"
	_ "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/utils/clock"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)
