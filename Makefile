# dynconfig — developer targets. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: test test-steps unit full integration bins vet fmt-check bench fuzz-smoke images

## test: everything CI checks, on a fresh machine, every tier (the first run
## builds kube-apiserver and etcd into bin/: 10+ minutes on 2 cores). A test
## that lacks a real part (root, containerd, systemd, promtool, strace, ...)
## skips and is recorded in $(SKIP_LOG) (DYNCONFIG_SKIP_LOG); test ends,
## passed or failed, with that list and the command that installs the parts,
## and keeps the steps' exit code. In CI (DYNCONFIG_CI=1, .ci/run) such a test
## fails instead. See test/README.md.
SKIP_LOG ?= $(CURDIR)/bin/skipped-tests.log
test:
	@mkdir -p $(dir $(SKIP_LOG)) && : >$(SKIP_LOG)
	@DYNCONFIG_SKIP_LOG=$(abspath $(SKIP_LOG)) $(MAKE) --no-print-directory test-steps; rc=$$?; \
	  test/hack/skip-summary.sh $(SKIP_LOG); exit $$rc

## test-steps: the steps of test, without the list of skips at the end.
test-steps: fmt-check vet full integration

## unit: the developer loop: the library module's fast tests (-short skips
## the real-clock waits, the corruption matrix, most lifecycle sequences
## and the real-process tests). Under two minutes.
unit:
	$(GO) test -count=1 -short ./...

## full: every test of the library module (including fuzz seed corpora,
## real-process tests and 300 random lifecycle sequences).
full:
	$(GO) test -count=1 ./...

## integration: the separate test/ module against a real kube-apiserver and etcd
## (test/realnode also runs the stock kubelet on containerd: root, see .ci/run).
integration: bins
	cd test && $(GO) vet ./cluster/... ./integration/... ./conformance/... ./kubeletfork/... ./monitoring/... ./deploy/... ./images/... ./realnode/... ./promserver/... ./cmd/hollow-kubelet/ ./cmd/mkimage/ ./kubeletpin/... && $(GO) test -count=1 -timeout 30m ./cluster/... ./integration/... ./conformance/... ./kubeletpin/... ./kubeletfork/... ./monitoring/... ./deploy/... ./images/... ./realnode/...

## bins: build kube-apiserver, etcd, hollow-kubelet, kubelet, kube-controller-manager and
## kube-scheduler into bin/ when missing or stale.
bins:
	test/hack/ensure-bins.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: all benchmarks with allocation counts.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz-smoke: a short run (10s) of every fuzz target (not part of `test`);
## test/hack/fuzz-smoke.sh says when a failure is Go's deadline race, not a finding.
fuzz-smoke:
	GO=$(GO) test/hack/fuzz-smoke.sh

## mutate: mutants of the decision code (lkg, crashloop, the nodeapi decoders,
## rollout/plan's gates, known-bad memory and windows, forget-bad), each built
## through -overlay (the worktree is never written) and judged by its package's
## `go test -short`; reports the tests that kill each and the kill rate (not
## part of `test`). test/hack/model-mutations.sh does the same for the models
## (every fsync of the state dir against TestPowerLossOracle; the lifecycle model).
.PHONY: mutate
mutate:
	GO=$(GO) test/hack/mutate.sh

## images: one OCI image (an OCI layout in a tar) per binary that runs in a
## cluster, FROM scratch, static (CGO_ENABLED=0), non-root (65532), built
## without a container engine by test/cmd/mkimage: $(IMAGES_DIR)/NAME.oci.tar,
## named localhost/NAME:$(IMAGE_TAG). Load one with
## `ctr -n k8s.io images import bin/images/dynconfig-rollout.oci.tar`.
## The same sources give the same digests (-trimpath, no build id, fixed
## timestamps). dynconfig-kubelet's image is for a DaemonSet beside the stock
## kubelet: it needs the host's D-Bus socket, the kubelet's files and root
## (runAsUser: 0 in its Pod) to restart kubelet.service; deploy/kubelet runs it
## as a host service instead.
IMAGES_DIR ?= bin/images
IMAGE_TAG ?= dev
IMAGE_BINS = dynconfig-rollout=./cmd/dynconfig-rollout kube-proxy-like=./examples/kube-proxy-like \
	node-greeter=./examples/node-greeter kubelet-like=./examples/kubelet-like \
	dynconfig-kubelet=./cmd/dynconfig-kubelet
images:
	@mkdir -p $(IMAGES_DIR)/build
	cd test && $(GO) build -o $(abspath $(IMAGES_DIR))/build/mkimage ./cmd/mkimage
	@set -e; for spec in $(IMAGE_BINS); do name=$${spec%%=*}; pkg=$${spec#*=}; \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -buildid=' -o $(IMAGES_DIR)/build/$$name $$pkg; \
	  $(IMAGES_DIR)/build/mkimage -name $$name -binary $(IMAGES_DIR)/build/$$name \
	    -ref localhost/$$name:$(IMAGE_TAG) -out $(IMAGES_DIR)/$$name.oci.tar; \
	done
