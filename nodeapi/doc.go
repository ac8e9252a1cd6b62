// Package nodeapi is the contract between the node side of dynconfig and
// its fleet side: everything dynconfig writes on a Node, and the one way to
// read it back.
//
// It owns:
//   - component naming: DefaultComponent, ValidateComponentName, and the
//     names derived from a component (AssignmentAnnotationFor,
//     StatusAnnotationFor, ConditionTypeFor);
//   - the default payload keys of the known components (DefaultPayloadKey);
//     an unknown component has none, and every tool then requires one;
//   - the assignment annotation's codec: DecodeAssignment (strict JSON
//     NodeConfigSource; a blank value and "null" mean "no assignment"),
//     Validate (the NodeConfigSource rules that need no API server),
//     ParseAssignment (both), EncodeAssignment, and DescribeSource;
//   - ConfigStatus, the status annotation a component publishes, with its
//     phases and its strict decoder.
//
// The node (packages source, status and the Controller), the rollout
// planner and controller, and dynconfigctl all read and write Nodes through
// this package, so that they cannot disagree about what a value means. It
// imports only k8s.io/api and k8s.io/apimachinery, and is pure: no I/O, no
// clock, no globals that change.
package nodeapi
