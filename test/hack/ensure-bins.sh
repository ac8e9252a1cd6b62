#!/usr/bin/env bash
# ensure-bins.sh builds the kube-apiserver and etcd binaries that the
# integration tests start (test/cluster) into the repository's bin/ directory.
#
# A binary is rebuilt only when it is missing or older than test/go.sum,
# test/go.mod or its main.go, so a second run returns at once. The first build
# compiles most of Kubernetes: expect several minutes on a small machine.
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

# stale NAME: true when bin/NAME must be (re)built.
stale() {
	local out="$bin_dir/$1" dep
	[[ $force == 1 || ! -x $out ]] && return 0
	for dep in go.sum go.mod "cmd/$1/main.go"; do
		[[ $dep -nt $out ]] && return 0
	done
	return 1
}

# build NAME [LDFLAGS...]: build into a temporary file, then rename, so an
# interrupted build never leaves a half-written binary that looks fresh.
build() {
	local name="$1" out="$bin_dir/$1" tmp="$bin_dir/.$1.tmp" start
	shift
	start=$SECONDS
	echo "ensure-bins: building $out"
	go build -trimpath -buildvcs=false -ldflags="-s -w $*" -o "$tmp" "./cmd/$name"
	mv -f "$tmp" "$out"
	echo "ensure-bins: built $name in $((SECONDS - start))s ($(du -h "$out" | cut -f1))"
}

if stale kube-apiserver; then
	# Stamp the Kubernetes release the binary is built from, so /version and
	# the server's compatibility version tell the truth instead of
	# v0.0.0-master.
	k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
	[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\. ]] || {
		echo "ensure-bins: cannot parse k8s.io/kubernetes version $k8s_version" >&2
		exit 1
	}
	pkg=k8s.io/component-base/version
	build kube-apiserver \
		"-X $pkg.gitVersion=$k8s_version" \
		"-X $pkg.gitMajor=${BASH_REMATCH[1]}" \
		"-X $pkg.gitMinor=${BASH_REMATCH[2]}" \
		"-X $pkg.gitTreeState=clean"
else
	echo "ensure-bins: $bin_dir/kube-apiserver is up to date"
fi

if stale etcd; then
	build etcd
else
	echo "ensure-bins: $bin_dir/etcd is up to date"
fi
