#!/usr/bin/env bash
# ensure-bins.sh builds the kube-apiserver and etcd binaries that the
# integration tests start (test/cluster), and the hollow-kubelet (a kubelet
# fork on dynconfig, test/cmd/hollow-kubelet), into the repository's bin/
# directory, and the unmodified upstream kubelet (test/realnode),
# kube-controller-manager and kube-scheduler (test/cluster's
# Options.ControlPlane).
#
# A binary is rebuilt only when it is missing or older than test/go.sum,
# test/go.mod or its main.go; the hollow-kubelet also when any of its own
# sources (test/cmd/hollow-kubelet, test/kubeletfork) or the dynconfig
# library's (the root module's non-test Go files, go.mod, go.sum) is newer.
# A second run returns at once. The first build compiles most of Kubernetes:
# expect several minutes on a small machine.
#
# Usage: test/hack/ensure-bins.sh [-f]    (-f: rebuild even when up to date)
set -euo pipefail

force=0
case "${1:-}" in
-f) force=1 ;;
"") ;;
*)
	echo "usage: $0 [-f]" >&2
	exit 2
	;;
esac

test_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(dirname "$test_dir")"
bin_dir="$repo_root/bin"
mkdir -p "$bin_dir"
cd "$test_dir"

# stale NAME [DIR...]: true when bin/NAME must be (re)built: it is missing,
# or older than go.mod, go.sum, cmd/NAME/main.go or any non-test Go file,
# go.mod or go.sum under the DIRs.
stale() {
	local out="$bin_dir/$1" dep
	[[ $force == 1 || ! -x $out ]] && return 0
	for dep in go.sum go.mod "cmd/$1/main.go"; do
		[[ $dep -nt $out ]] && return 0
	done
	shift
	(($# == 0)) && return 1
	[[ -n "$(find "$@" \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum \) \
		-newer "$out" -print -quit)" ]]
}

# build NAME [LDFLAGS...]: build ./cmd/NAME (or the package $PKG) into a
# temporary file, then rename, so an interrupted build never leaves a
# half-written binary that looks fresh.
build() {
	local name="$1" out="$bin_dir/$1" tmp="$bin_dir/.$1.tmp" start
	shift
	start=$SECONDS
	echo "ensure-bins: building $out"
	go build -trimpath -buildvcs=false -ldflags="-s -w $*" -o "$tmp" "${PKG:-./cmd/$name}"
	mv -f "$tmp" "$out"
	echo "ensure-bins: built $name in $((SECONDS - start))s ($(du -h "$out" | cut -f1))"
}

# version_ldflags prints the -X flags that stamp the Kubernetes release a
# binary is built from, so /version, the API server's compatibility version
# and the hollow kubelet's Node (nodeInfo.kubeletVersion) tell the truth
# instead of v0.0.0-master.
version_ldflags() {
	local k8s_version pkg=k8s.io/component-base/version
	k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
	[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\. ]] || {
		echo "ensure-bins: cannot parse k8s.io/kubernetes version $k8s_version" >&2
		return 1
	}
	echo "-X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=${BASH_REMATCH[1]}" \
		"-X $pkg.gitMinor=${BASH_REMATCH[2]} -X $pkg.gitTreeState=clean"
}

if stale kube-apiserver; then
	stamp="$(version_ldflags)"
	build kube-apiserver "$stamp"
else
	echo "ensure-bins: $bin_dir/kube-apiserver is up to date"
fi

if stale etcd; then
	build etcd
else
	echo "ensure-bins: $bin_dir/etcd is up to date"
fi

# The fork links the dynconfig library from the working tree (the replace in
# test/go.mod): a change to the library's sources makes it stale too. The
# root module's test/ and examples/ are not part of it.
library_dirs=()
for d in "$repo_root"/*; do
	case "$(basename "$d")" in
	test | examples | bin) ;;
	*) [[ -d $d ]] && library_dirs+=("$d") ;;
	esac
done
if stale hollow-kubelet cmd/hollow-kubelet kubeletfork "${library_dirs[@]}" \
	"$repo_root/go.mod" "$repo_root/go.sum" "$repo_root"/*.go; then
	stamp="$(version_ldflags)"
	build hollow-kubelet "$stamp"
else
	echo "ensure-bins: $bin_dir/hollow-kubelet is up to date"
fi

# The stock kubelet, unmodified: upstream's own main package
# (test/cmd/kubelet/tools.go keeps it in the module graph), for
# test/realnode. Built after the hollow-kubelet with the same flags, it
# reuses the hollow-kubelet's compiled packages: about a link (5.4 CPU-s
# measured; 18 CPU-min alone from an empty build cache).
if stale kubelet cmd/kubelet; then
	stamp="$(version_ldflags)"
	PKG=k8s.io/kubernetes/cmd/kubelet build kubelet "$stamp"
else
	echo "ensure-bins: $bin_dir/kubelet is up to date"
fi

# The stock kube-controller-manager and kube-scheduler, unmodified
# (test/cmd/kube-controller-manager/tools.go and test/cmd/kube-scheduler/
# tools.go keep them in the module graph), for test/cluster's
# Options.ControlPlane. Built after the kubelet from the same
# k8s.io/kubernetes with the same flags: most of their packages are
# compiled already.
for name in kube-controller-manager kube-scheduler; do
	if stale "$name" "cmd/$name"; then
		stamp="$(version_ldflags)"
		PKG="k8s.io/kubernetes/cmd/$name" build "$name" "$stamp"
	else
		echo "ensure-bins: $bin_dir/$name is up to date"
	fi
done
