#!/usr/bin/env bash
# fuzz-smoke.sh: a short run (FUZZTIME, default 10s) of every fuzz target of
# the library module. A target fails the run when it writes a reproducer
# (testdata/fuzz/<target>/) or fails twice in a row. A failure that wrote no
# reproducer and says only "context deadline exceeded" is Go's fuzzing
# coordinator racing its own -fuzztime deadline (golang/go#75804, unfixed
# in go1.26), not a finding: the target is run once more. PKGS limits the
# packages (default ./...).
set -uo pipefail
cd "$(dirname "$0")/../.."
go=${GO:-go}
fuzztime=${FUZZTIME:-10s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pkg in $($go list ${PKGS:-./...}); do
	dir=$($go list -f '{{.Dir}}' "$pkg")
	for f in $($go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		for try in 1 2; do
			echo "== $pkg $f"
			before=$(ls "$dir/testdata/fuzz/$f" 2>/dev/null | wc -l)
			if $go test -run '^$' -fuzz "^$f\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$out"; [[ ${PIPESTATUS[0]} == 0 ]]; then
				break
			fi
			after=$(ls "$dir/testdata/fuzz/$f" 2>/dev/null | wc -l)
			if [[ $try == 1 && $after == "$before" ]] && grep -q '^    context deadline exceeded$' "$out" && ! grep -q 'Failing input written' "$out"; then
				echo "fuzz-smoke: $f stopped on Go's fuzztime deadline race (golang/go#75804), no reproducer written: running it again"
				continue
			fi
			echo "fuzz-smoke: $pkg $f failed" >&2
			exit 1
		done
	done
done
