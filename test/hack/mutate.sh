#!/usr/bin/env bash
# mutate.sh (make mutate): do the tests of the decision code kill its
# mutants? Each mutant is one small change to one file of lkg, crashloop,
# the nodeapi decoders, rollout/plan's gates, fleet memory (known-bad) and
# windows, or checkpoint's forget-bad; it is built through go's -overlay
# (the worktree is never written) and judged by `go test -short` of its
# package. The report names, for each mutant, the tests that failed, and
# ends with the kill rate. Exits 1 when a mutant survives or no longer
# applies. Not part of `make test`: about 20 package test runs.
#
# Usage: test/hack/mutate.sh [NAME-SUBSTRING]   (only the mutants whose name has it;
#        MUTATE_DRY=1 only checks that each mutation still applies)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=test/hack/mutation-lib.sh
source test/hack/mutation-lib.sh
trap 'rm -rf "$MUTATION_DIR"' EXIT
GO=${GO:-go}
only=${1:-}

total=0 killed=0 bad=0

# mutant NAME FILE PERL-EXPR: one mutation (perl -0, on the whole file),
# judged by the tests of FILE's package.
mutant() {
	local name=$1 file=$2 expr=$3 overlay out failed
	[[ -z $only || $name == *"$only"* ]] || return 0
	total=$((total + 1))
	overlay=$(mutant_overlay "$name" "$file" "$expr") || {
		echo "NOT APPLIED  $name ($file): the mutation no longer applies; update this script"
		bad=$((bad + 1))
		return
	}
	if [[ -n ${MUTATE_DRY:-} ]]; then
		echo "APPLIES      $name ($file)"
		return
	fi
	out=$($GO test -overlay "$overlay" -short -count=1 "./$(dirname "$file")" 2>&1)
	if grep -q "build failed\|setup failed" <<<"$out"; then
		echo "NO BUILD     $name ($file): update this script"
		grep -m3 "\.go:[0-9]" <<<"$out" | sed 's/^/	/'
		bad=$((bad + 1))
		return
	fi
	failed=$(grep -o -- '^--- FAIL: [^ ]*' <<<"$out" | awk '{print $3}' | sort -u | tr '\n' ' ')
	if [[ -n $failed ]]; then
		killed=$((killed + 1))
		echo "KILLED       $name ($file) by: $failed"
	elif grep -q "^FAIL" <<<"$out"; then
		killed=$((killed + 1))
		echo "KILLED       $name ($file) by a failure outside a test: $(grep -m1 -i 'panic\|fatal\|error' <<<"$out" | cut -c1-160)"
	else
		echo "SURVIVED     $name ($file)"
		bad=$((bad + 1))
	fi
}

# lkg: the startup decision, promotion, the confirmation deadline.
mutant "lkg: a crash loop is ignored" lkg/decide.go 's/if in\.CurrentCrashLooping \{/if false \&\& in.CurrentCrashLooping {/'
mutant "lkg: a crash loop is not marked bad" lkg/decide.go 's/Problem: ProblemCrashLoop, MarkBad: true/Problem: ProblemCrashLoop, MarkBad: false/'
mutant "lkg: a config on trial runs with its crashes uncounted" lkg/decide.go 's/if in\.CrashCountError != nil \&\& /if false \&\& in.CrashCountError != nil \&\& /'
mutant "lkg: a last-known-good that does not load is run" lkg/decide.go 's/if err := in\.LoadLastKnownGood\(\); err != nil \{/if err := in.LoadLastKnownGood(); false \&\& err != nil {/'
mutant "lkg: promotion at half the trial" lkg/runtime.go 's/left > 0 \{/left > in.Trial\/2 {/'
mutant "lkg: promotion without the health mark" lkg/runtime.go 's/if waitHealthy \{\n\t\treturn PromotionVerdict\{WaitHealthy: true\}/if false \&\& waitHealthy {\n\t\treturn PromotionVerdict{WaitHealthy: true}/'
mutant "lkg: the confirmation deadline expires one tick late" lkg/confirm.go 's/if elapsed >= in\.ConfirmWithin \{/if elapsed > in.ConfirmWithin {/'
mutant "lkg: the confirmation deadline ignores the process's uptime" lkg/confirm.go 's/elapsed = max\(elapsed, in\.Now\.Sub\(in\.Running\.Since\)\)/_ = in.Running.Since/'
# crashloop: the verdict.
mutant "crashloop: the threshold trips one restart early" crashloop/verdict.go 's/return n > threshold/return n >= threshold/'
mutant "crashloop: no trial window" crashloop/verdict.go 's/if s\.After\(windowStart\) \{/if _ = windowStart; true {/'
mutant "crashloop: the adopting start is not pinned" crashloop/verdict.go 's/if startups\[i\]\.Equal\(since\) \{/if false {/'
mutant "crashloop: startups stamped later than now count" crashloop/verdict.go 's/if presentRun \&\& s\.After\(in\.Now\) \{/if false \&\& presentRun {/'
# nodeapi: the decoders of what nodes and rollouts write.
mutant "nodeapi: an assignment with unknown fields is accepted" nodeapi/assignment.go 's/\tif len\(strict\) > 0 \{\n\t\treturn nil, errors\.Join\(strict\.\.\.\)/\tif false {\n\t\treturn nil, errors.Join(strict...)/'
mutant "nodeapi: a claim is not validated" nodeapi/claim.go 's/if err := c\.Validate\(\); err != nil \{/if err := c.Validate(); false \&\& err != nil {/'
mutant "nodeapi: an unknown phase is accepted" nodeapi/status.go 's/case !knownPhase\(s\.Phase\):/case false:/'
# rollout/plan: gates, fleet memory (known bad), windows.
mutant "plan: the soak never ends" rollout/plan/gates.go 's/case p\.in\.Now\.Before\(end\):/case true:/'
mutant "plan: a verdict taken before the soak ended promotes" rollout/plan/gates.go 's/case a == nil \|\| a\.CheckedAt\.Before\(end\):/case a == nil:/'
mutant "plan: a failed gate is ignored" rollout/plan/gates.go 's/if a != nil \&\& a\.Failed != "" \{/if false \&\& a != nil {/'
mutant "plan: known bad needs one node more" rollout/plan/knownbad.go 's/if len\(nodes\) >= threshold \{/if len(nodes) > threshold {/'
mutant "plan: an invalid spec's halt marks the config bad" rollout/plan/knownbad.go 's/return reason != "ConfigMapChanged" \&\& reason != "InvalidSpec"/return reason != "ConfigMapChanged"/'
mutant "plan: a new resourceVersion of an immutable ConfigMap is another config" rollout/plan/knownbad.go 's/\(rv == cm\.ResourceVersion \|\| cm\.Immutable\)/(rv == cm.ResourceVersion)/'
mutant "plan: a window is open at its end" rollout/plan/windows.go 's/case !now\.Before\(from\) \&\& now\.Before\(to\):/case !now.Before(from) \&\& !now.After(to):/'
mutant "plan: a window ending at its start time is empty" rollout/plan/windows.go 's/if w\.end <= w\.start \{/if w.end < w.start {/'
# checkpoint: forget-bad gives a fresh trial.
mutant "checkpoint: forget-bad keeps the first run" checkpoint/state.go 's/cur\.FirstRun = time\.Time\{\}/_ = cur/'

echo "killed $killed of $total mutants ($bad survived, did not build or did not apply)"
((bad == 0))
