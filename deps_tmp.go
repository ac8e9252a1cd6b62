package dynconfig

import (
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/strategicpatch"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/kube-proxy/config/v1alpha1"
	_ "k8s.io/utils/clock"
	_ "k8s.io/utils/clock/testing"
	_ "k8s.io/klog/v2"
	_ "github.com/google/go-cmp/cmp"
	_ "sigs.k8s.io/yaml"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "gopkg.in/evanphx/json-patch.v4"
	_ "golang.org/x/sys/unix"
	_ "github.com/spf13/pflag"
	_ "github.com/spf13/cobra"
)
