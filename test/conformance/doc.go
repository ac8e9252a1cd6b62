// Package conformance holds the differential tests that prove the library's
// kubelet and kube-proxy profiles (components/kubelet, components/kubeproxy)
// equal to the components' own code in k8s.io/kubernetes v1.37.0, on
// generated inputs:
//
//   - TestKubeletDefaults: kubelet.Default against the kubelet's scheme
//     defaulting plus the eviction defaults it applies when it loads its
//     config file, field for field.
//   - TestKubeletValidation: kubelet.Validate against
//     ValidateKubeletConfiguration (through the kubelet's scheme, with the
//     kubelet's feature gates) and the startup checks the library makes up
//     front, on valid and invalid configurations: the same verdict and the
//     same fields at fault. The differences allowed are the ones
//     components/kubelet/doc.go lists, and TestKubeletDocumentedDifferences
//     fails when those lists and the test's disagree.
//   - TestGeneratedGatesAreCurrent: the gate table the kubelet and
//     kube-proxy profiles share,
//     components/internal/featuregates/zz_generated_gates.go, is what the
//     generator (kubeletgates, run by go generate
//     ./components/internal/featuregates) writes from the upstream code
//     now; TestKubeletGateRegistrations checks that the generator sees every
//     package of the kubelet binary that registers gates,
//     TestKubeletGateSetMatchesKubelet that its table says what the kubelet
//     does with featureGates maps, and TestKubeProxyGateRegistrations that
//     the kube-proxy binary registers the same gates (kubeproxygates); it
//     fails, saying the profiles need separate tables, when it does not.
//   - TestKubeletDropIns: merge.Pipeline with the kubelet profile against
//     the kubelet's own config-file loading and --config-dir merge (its
//     loader, eviction defaults, JSON merge patches and v1beta1 defaults,
//     in cmd/kubelet/app's order), on generated base files and drop-in sets,
//     compared on the kubelet's internal type.
//   - TestKubeletInstanceMerge: merge.Pipeline's instance layer against
//     strategicpatch.StrategicMergePatch on the typed KubeletConfiguration
//     (the KEP "Instance-Specific ComponentConfig"'s way), on generated base
//     and instance documents with nulls and $patch directives; the only
//     differences allowed are the table "Differences from strategicpatch"
//     of merge/doc.go, which TestInstanceDifferencesDocumented keeps in step.
//   - TestKubeletAllowlistPatterns: the kubelet profile's check of
//     preloadedImagesVerificationAllowlist entries against the kubelet's
//     image pull manager (ValidateAllowlistImagesPatterns), on generated
//     entries near the image reference grammar.
//   - TestKubeProxyDefaults, TestKubeProxyValidation: the same for the
//     kube-proxy profile against kube-proxy's v1alpha1 defaulting and its
//     Validate (after the platform defaults and the global feature gate
//     kube-proxy sets first); TestKubeProxyDocumentedDifferences keeps the
//     allowed differences and components/kubeproxy/doc.go in step.
//
// Each test draws its cases from a fixed seed, so a run is reproducible; a
// failing case prints its own seed, and
//
//	go test ./conformance -run '^TestKubeletDefaults$' -conformance.seed=N -v
//
// runs that case alone. -conformance.cases=N changes how many cases a test
// draws, -short draws a tenth, and -conformance.keep-going reports up to 20
// failing cases instead of stopping at the first.
//
// These tests need no cluster and no binaries: they run in seconds once the
// upstream packages are compiled.
package conformance
