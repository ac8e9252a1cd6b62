// Package cli is `dynconfigctl rollout`: start a ConfigRollout, follow it
// (status, status -w, history) and steer it (pause, resume, abort, undo).
// NewCommand returns the cobra command; dynconfigctl adds it to its root.
//
// The commands only read and write ConfigRollout objects (through a dynamic
// client); the rollout controller (cmd/dynconfig-rollout) does the rest.
// What a command writes is a merge patch of the spec, so two operators
// steering one rollout do not overwrite each other's other fields.
//
// What it does not do: it does not wait for the controller to act on a
// request (status -w follows it), and it does not check that a rollout
// controller runs at all: a rollout nobody runs shows a phase of Pending
// (not yet seen by the rollout controller).
package cli
