#!/usr/bin/env bash
# Prints what a `make test` run skipped because this machine lacks a real
# part (the lines internal/testenv appended to the log named by $1:
# package, test, what is missing, how to get it, tab-separated), grouped by
# the part, and the one command that installs every part (.ci/run's list,
# the README's command); one line saying so when it skipped none. Always
# exits 0 (make test keeps the steps' exit code).
set -uo pipefail
log=${1:?usage: skip-summary.sh SKIP_LOG}
if [[ ! -s $log ]]; then
	echo "make test: no test skipped for a missing real part (root, containerd, systemd, strace, promtool, ...)."
	exit 0
fi
cd "$(dirname "$0")/../.."
n=$(wc -l <"$log")
echo
echo "make test: $n test(s) skipped because this machine lacks a real part (green covers the rest only):"
awk -F'\t' '
	{ key = $3 "\t" $4; if (!(key in count)) order[++k] = key; count[key]++
	  if (count[key] <= 3) tests[key] = tests[key] (count[key] > 1 ? ", " : "") $2 " (" $1 ")" }
	END { for (i = 1; i <= k; i++) { split(order[i], f, "\t"); more = count[order[i]] - 3
	  printf "  %s is missing (%s): %s%s\n", f[1], f[2], tests[order[i]], (more > 0 ? ", and " more " more" : "") } }
' "$log"
pkgs=$(sed -n 's/^pkgs=(\(.*\))$/\1/p' .ci/run)
echo "Install every part as .ci/run does (Debian/Ubuntu), then run make test as root:"
echo "  sudo apt-get install -y --no-install-recommends $pkgs"
exit 0
