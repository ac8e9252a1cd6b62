# dynconfig — developer targets. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: test unit full integration bins vet fmt-check bench fuzz-smoke

## test: everything CI checks, on a fresh machine, every tier (the first run
## builds kube-apiserver and etcd into bin/: 10+ minutes on 2 cores).
test: fmt-check vet full integration

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
	cd test && $(GO) vet ./cluster/... ./integration/... ./conformance/... ./kubeletfork/... ./realnode/... ./cmd/hollow-kubelet/ && $(GO) test -count=1 -timeout 30m ./cluster/... ./integration/... ./conformance/... ./kubeletfork/... ./realnode/...

## bins: build kube-apiserver, etcd, hollow-kubelet and kubelet into bin/ when missing or stale.
bins:
	test/hack/ensure-bins.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: all benchmarks with allocation counts.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz-smoke: a short run of every fuzz target (not part of `test`).
fuzz-smoke:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; \
	done
