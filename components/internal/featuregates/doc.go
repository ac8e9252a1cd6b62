// Package featuregates owns the feature gate model of Kubernetes 1.37 that
// the kubelet and kube-proxy profiles share: what a gate is (a default, a
// lock and a stage), the one table of the gates both components register
// and the dependencies between them (zz_generated_gates.go, generated from
// k8s.io/kubernetes by test/conformance/kubeletgates), how a gate resolves
// against a configuration's featureGates map, and the check of that map.
//
// Both components of 1.37 register the same gates, so one table serves
// both; test/conformance (TestKubeProxyGateRegistrations) fails, saying that
// the profiles need separate tables, on the day kube-proxy's registrations
// stop matching the kubelet's. Only the wording of the errors differs
// between the components, and each profile passes its own (Wording).
//
// Guarantees: every function is a pure function of its arguments and the
// generated table; none modifies a map it is given; Validate reports its
// errors in the same order on every run.
//
// Not provided: the rules that read a gate to judge another field (those
// belong to each profile), and gates of any other version.
package featuregates

//go:generate sh -c "cd ../../../test && go run ./conformance/kubeletgates/generate -o ../components/internal/featuregates/zz_generated_gates.go"
