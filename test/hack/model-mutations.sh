#!/usr/bin/env bash
# model-mutations.sh checks that TestLifecycleModel, with its default seed
# and count, catches deliberate breaks of the rules it models. Each mutation
# is applied to a copy-restored file, the model runs, and the file is put
# back. A mutation that survives (0 failing sequences) means the model lost
# an invariant. Not part of `make test` (5 model runs, ~1 CPU-minute each).
#
# Usage: test/hack/model-mutations.sh        (from anywhere in the repo)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

survived=0
mutate() {
	local name=$1 file=$2 expr=$3 out fails
	cp "$file" "$file.mutation-backup"
	perl -0pi -e "$expr" "$file"
	if cmp -s "$file" "$file.mutation-backup"; then
		mv -f "$file.mutation-backup" "$file"
		echo "$name: the mutation no longer applies; update this script"
		survived=1
		return
	fi
	out=$(go test -count=1 -run 'TestLifecycleModel$' . 2>&1)
	mv -f "$file.mutation-backup" "$file"
	if grep -q "build failed\|setup failed" <<<"$out"; then
		echo "$name: the mutant does not build; update this script"
		survived=1
		return
	fi
	fails=$(grep -c -- "--- FAIL: TestLifecycleModel/seed=" <<<"$out")
	echo "$name: caught by $fails of the default sequences; first: $(grep -m1 -o 'seed [0-9]*: .*' <<<"$out" | cut -c1-200)"
	((fails > 0)) || survived=1
}

mutate "forget-bad skips the fresh trial" checkpoint/state.go 's/cur\.FirstRun = time\.Time\{\}/_ = cur/'
mutate "crash-loop threshold off by one" crashloop/verdict.go 's/return n > threshold/return n > threshold+1/'
mutate "promotion without the health mark" run.go 's/RequireHealthy: c\.opts\.RequireHealthy,/RequireHealthy: false,/'
mutate "the reload result is ignored" reload.go 's/err := c\.opts\.Reload\(ctx, cfg\)\n\tif err == nil \{/err := c.opts.Reload(ctx, cfg)\n\terr = nil\n\tif err == nil {/'
mutate "the confirmation deadline never fires" lkg/confirm.go 's/if elapsed >= in\.ConfirmWithin \{/if false \&\& elapsed >= in.ConfirmWithin {/'
exit $survived
