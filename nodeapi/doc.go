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
//     phases, its decoder (ParseConfigStatus) and encoder;
//   - Claim, the rollout's claim annotation (DecodeClaim, EncodeClaim),
//     with what the rollout's health gates remember of the Node
//     (GateMemory: the soak start and the pod baseline, each pod by
//     PodKeyOf), so that a new controller carries on;
//   - the pre-flight check: PreflightRequest, the rollout's ask
//     (DecodePreflightRequest, EncodePreflightRequest), and
//     PreflightResult, the node's answer in its ConfigStatus (preflight.go).
//
// The node (packages source, status and the Controller), the rollout
// planner and controller, and dynconfigctl all read and write Nodes through
// this package, so that they cannot disagree about what a value means. It
// imports only k8s.io/api and k8s.io/apimachinery, and is pure: no I/O, no
// clock, no globals that change.
//
// # Skew: what versions may meet on a Node
//
// The values on a Node are written and read by dynconfig processes that
// are upgraded separately: a component's agent on every node (a DaemonSet
// or host units, rolled one node at a time), the rollout controller (one
// Deployment), dynconfigctl on an operator's laptop. Supported skew: any
// two versions from N-2 to N, agent and controller, in both directions;
// nothing halts, reverts or is marked bad because two versions met. That
// is all nine pairs of agent and controller versions, in a fleet whose
// agents run several versions at once, the controller never required to
// be newer than the agents (a DaemonSet and a Deployment roll in either
// order), and a controller upgraded or downgraded by up to two versions
// in the middle of a rollout. test/versions.txt names N-1 and N-2 (commits
// of main's history); test/integration/versionmatrix builds them and runs
// every pair on a real API server (a rollout completes, a bad config
// halts and reverts, a controller hand-off, an undo from every version's
// claims, and the state dir across the three). The rule, from the commit
// that wrote it here:
//
//   - Fields are added, never repurposed, renamed or removed, and never
//     required: an absent field means what the version before the field
//     did. A writer omits a field that is empty.
//   - Readers of ConfigStatus and Claim ignore fields they do not know.
//   - A phase a reader does not know was written by a newer component and
//     means "wait": it is no verdict (ConfigPhase.Known; Bad is false),
//     as Trial is not; the rollout's progress deadline still bounds the
//     wait, counted, as for Trial, from the trialEnds the status reports
//     on the rollout's config when it is later (the controllers
//     test/versions.txt names count from the assignment only).
//     Every phase is a CamelCase word (MaxPhaseLength). A writer
//     writes only the phases it knows.
//   - A change that cannot be additive (a field whose absence an older
//     reader would misread) raises formatVersion (FormatVersion). Writers
//     of format 1 never write the field, so that readers from before the
//     rule read them; a reader refuses a higher version with
//     ErrNewerFormat, never misreading it nor calling it damage: the
//     rollout planner waits on such a status and leaves a Node with such
//     a claim alone. A version reads its own format and the two before.
//   - The assignment annotation is written by people (dynconfigctl,
//     kubectl) as well as the planner, and stays strict: an unknown field
//     is an error there, since it is a typo more often than a newer
//     writer.
//   - One set of JSON rules for every decoder (sigs.k8s.io/json, as the
//     API server decodes): names match case-sensitively (a name in
//     another case is an unknown field), a duplicate key and anything
//     after the value are errors.
//   - Every writer goes through this package's encoders (EncodeAssignment,
//     ConfigStatus.MarshalAnnotation, EncodeClaim, EncodePreflightRequest);
//     nobody else spells these values.
//
// Readers from before this rule (every commit up to 0a61e24) refuse
// unknown fields and phases: a value with a field added after the rule is
// unreadable to them. Claim.PreviousClaim is the first such field; only a
// controller writes it, and only when one rollout takes a Node over from
// another, so only a downgrade of the controller to such a version meets
// it (the Node is then left alone as one whose claim is unreadable). The
// same holds for the fields of a rollout with health gates (HoldUntil,
// Passed, Gates), which the claim of every Node it assigns carries.
// Claim.Gates is read by controllers only, and only of a claim of their
// own rollout: a controller that does not know it judges the Node as it
// did before the field (its soak from its own first sight, its pod
// baseline taken then). ConfigStatus.Preflight is another: a component writes it only while
// its Node carries a pre-flight request (PreflightAnnotationFor), which
// only a controller of this version writes, so again only a downgrade of
// the controller below the rule, with requests left on the Nodes, meets
// it. The request annotation is new: agents older than it never read it,
// and never answer (the rollout's spec.preflight says what that means).
//
// testdata/golden.jsonl holds what the encoders of earlier commits wrote,
// built from git history by testdata/golden.sh; TestGoldenValues decodes
// every value of it, and checks that this version still writes what the
// base commit wrote, and the claim with Gates byte for byte as the commit
// that added it (a pod key never changes).
package nodeapi
