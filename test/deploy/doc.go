// Package deploy builds every kustomization of deploy/ with
// sigs.k8s.io/kustomize/api, as `kubectl apply -k` does, checks what an
// operator relies on (the one-namespace layout is the default, the
// Deployment has probes, limits and a PodDisruptionBudget, the DaemonSet
// has its state dir, its Node's name and a way to the API server, `images:`
// sets the image), applies the result to a real kube-apiserver (package
// cluster) and shows the own-node admission policy refusing a component
// ServiceAccount that nobody listed.
package deploy
