#!/usr/bin/env bash
# capture-node.sh: capture the Node the real v1.37 kubelet writes (test/realnode
# TestCaptureNode: the stock kubelet under dynconfig on this host, with a pod
# running and a config assigned and promoted) into
# rollout/controller/testdata/node-realnode.json, the fixture that the rollout
# controller's memory benchmarks compare with their hand-written production Node.
# Needs root and what test/realnode needs (bin/kubelet: make bins; containerd,
# runc, CNI plugins, busybox-static); it waits for the host lock of real nodes
# (/run/dynconfig-realnode.lock). Without DYNCONFIG_CAPTURE_NODE the same test
# only checks that both fixtures have every field of the live Node.
set -euo pipefail
cd "$(dirname "$0")/.."
DYNCONFIG_CAPTURE_NODE=1 exec ${GO:-go} test -count=1 -run '^TestCaptureNode$' -v ./realnode/
