#!/usr/bin/env bash
# model-mutations.sh checks that the models of this repo catch deliberate
# breaks of the rules they model. Each mutant is one change to one source
# file, built through go's -overlay (the worktree is never written); the
# model runs against it. A mutant that survives means the model lost an
# invariant; the script then exits 1. Not part of `make test`.
#
#   fsync      every fsync of every write path of the state dir (each
#              atomicfile.SyncDir call in checkpoint/, and the file and
#              directory fsyncs of internal/atomicfile), found by grep so
#              that a new one is covered, removed one at a time; the judge
#              is TestPowerLossOracle (needs strace). ~15 s each.
#   lifecycle  five breaks of the lifecycle rules; the judge is
#              TestLifecycleModel with its default seeds (~1 CPU-minute each).
#
# Usage: test/hack/model-mutations.sh [fsync] [lifecycle]   (default: both)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=test/hack/mutation-lib.sh
source test/hack/mutation-lib.sh
trap 'rm -rf "$MUTATION_DIR"' EXIT
GO=${GO:-go}

total=0 caught=0 survived=0

# judge NAME OVERLAY TEST FAILMARK MSGREGEX: runs TEST against the mutant
# and counts it caught when FAILMARK appears.
judge() {
	local name=$1 overlay=$2 test=$3 failmark=$4 msg=$5 out
	total=$((total + 1))
	out=$($GO test -overlay "$overlay" -count=1 -run "^$test\$" . 2>&1)
	if grep -q "build failed\|setup failed" <<<"$out"; then
		echo "$name: the mutant does not build; update this script"
		grep -m3 "\.go:[0-9]" <<<"$out" | sed 's/^/	/'
		survived=$((survived + 1))
		return
	fi
	if grep -q -- "--- SKIP: $test" <<<"$out"; then
		echo "$name: $test was skipped: $(grep -m1 -A1 -- "--- SKIP" <<<"$out" | tail -1)"
		survived=$((survived + 1))
		return
	fi
	if grep -q -- "$failmark" <<<"$out"; then
		caught=$((caught + 1))
		if [[ $test == TestLifecycleModel ]]; then
			echo "$name: CAUGHT by $(grep -c -- "$failmark" <<<"$out") of the default sequences; first: $(grep -m1 -o -- "$msg" <<<"$out" | cut -c1-300)"
		else
			echo "$name: CAUGHT: $( (grep -m1 -o -- "LOST: .*" <<<"$out" || grep -m1 -o -- "$msg" <<<"$out") | cut -c1-400)"
		fi
	else
		survived=$((survived + 1))
		echo "$name: SURVIVED"
	fi
}

fsync_mutants() {
	# A call that fsyncs: atomicfile.SyncDir(...), SyncDir(...) inside
	# atomicfile, x.Sync(). SyncDir becomes a function that does nothing
	# (its arguments stay used), x.Sync() becomes error(nil).
	local call='\b(?:atomicfile\.)?SyncDir\(|\b\w+\.Sync\(\)'
	local noop='s/\batomicfile\.SyncDir\(/func(string, ...atomicfile.Option) error { return nil }(/ ||
		s/\bSyncDir\(/func(string, ...Option) error { return nil }(/ || s/\b\w+\.Sync\(\)/error(nil)/'
	local file line code overlay
	while IFS=: read -r file line code; do
		overlay=$(mutant_overlay "fsync-$file-$line" "$file" "$noop" "$line") || {
			echo "$file:$line: the mutation does not apply; update this script"
			survived=$((survived + 1))
			continue
		}
		code=$(sed 's/^[[:space:]]*//' <<<"$code")
		judge "no fsync at $file:$line ($code)" "$overlay" TestPowerLossOracle \
			"LOST: \|power cut .*: ran value\|power cut .*: Bootstrap" \
			"LOST: .*\|power cut .*: ran value.*\|power cut .*: Bootstrap.*"
	done < <(grep -n -P "$call" internal/atomicfile/atomicfile.go $(ls checkpoint/*.go | grep -v _test.go) |
		grep -v -P '^[^:]+:\d+:\s*//' | grep -v -P '^[^:]+:\d+:func ')
}

lifecycle_mutant() {
	local name=$1 file=$2 expr=$3 overlay
	overlay=$(mutant_overlay "lifecycle-$name" "$file" "$expr") || {
		echo "$name: the mutation no longer applies; update this script"
		survived=$((survived + 1))
		return
	}
	judge "$name" "$overlay" TestLifecycleModel "--- FAIL: TestLifecycleModel/seed=" 'seed [0-9]*: .*'
}

lifecycle_mutants() {
	lifecycle_mutant "forget-bad skips the fresh trial" checkpoint/state.go 's/cur\.FirstRun = time\.Time\{\}/_ = cur/'
	lifecycle_mutant "crash-loop threshold off by one" crashloop/verdict.go 's/return n > threshold/return n > threshold+1/'
	lifecycle_mutant "promotion without the health mark" run.go 's/RequireHealthy: c\.opts\.RequireHealthy,/RequireHealthy: false,/'
	lifecycle_mutant "the reload result is ignored" reload.go 's/err := c\.opts\.Reload\(ctx, cfg\)\n\tif err == nil \{/err := c.opts.Reload(ctx, cfg)\n\terr = nil\n\tif err == nil {/'
	lifecycle_mutant "the confirmation deadline never fires" lkg/confirm.go 's/if elapsed >= in\.ConfirmWithin \{/if false \&\& elapsed >= in.ConfirmWithin {/'
}

parts=("$@")
((${#parts[@]})) || parts=(fsync lifecycle)
for p in "${parts[@]}"; do
	case $p in
	fsync) fsync_mutants ;;
	lifecycle) lifecycle_mutants ;;
	*) echo "unknown part $p (fsync, lifecycle)" >&2; exit 2 ;;
	esac
done
echo "killed $caught of $total mutants ($survived survived or did not apply)"
((survived == 0))
