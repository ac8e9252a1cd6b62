// Package app is the skeleton of a component binary that takes its config
// from dynconfig: NewCommand turns a Component (a config type's profile, the
// flags that set config fields, and what the component does with a config)
// into a cobra command that behaves like a Kubernetes component.
package app
