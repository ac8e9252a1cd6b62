package main

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NodeGreeterConfiguration is the node-greeter's config: a config type of
// its own, in a group of its own (greeter.example.com/v1alpha1).
type NodeGreeterConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// Greeting is what the greeter says. Default: "Hello".
	Greeting string `json:"greeting,omitempty"`
	// Interval is how often it says it. Default: 10s; at least 100ms.
	Interval metav1.Duration `json:"interval,omitempty"`
}

// Profile is the node-greeter's dynconfig profile.
type Profile struct{}

// GroupVersionKind implements dynconfig.Profile.
func (Profile) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "greeter.example.com", Version: "v1alpha1", Kind: "NodeGreeterConfiguration"}
}

// PayloadKey implements dynconfig.Profile: the ConfigMap key of the config.
func (Profile) PayloadKey() string { return "greeter.yaml" }

// Default implements dynconfig.Profile.
func (Profile) Default(c *NodeGreeterConfiguration) {
	if c.Greeting == "" {
		c.Greeting = "Hello"
	}
	if c.Interval.Duration == 0 {
		c.Interval.Duration = 10 * time.Second
	}
}

// Validate implements dynconfig.Profile.
func (Profile) Validate(c *NodeGreeterConfiguration) field.ErrorList {
	var errs field.ErrorList
	if len(c.Greeting) > 64 {
		errs = append(errs, field.TooLong(field.NewPath("greeting"), c.Greeting, 64))
	}
	if c.Interval.Duration < 100*time.Millisecond {
		errs = append(errs, field.Invalid(field.NewPath("interval"), c.Interval.Duration.String(), "must be at least 100ms"))
	}
	return errs
}
