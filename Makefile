# dynconfig — developer targets. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: test unit vet fmt-check bench fuzz-smoke

## test: everything CI checks, on a fresh machine.
test: fmt-check vet unit

## unit: the library module's tests (including fuzz seed corpora).
unit:
	$(GO) test -count=1 ./...

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
