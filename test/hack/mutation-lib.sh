# mutation-lib.sh: sourced by the mutation scripts (model-mutations.sh,
# mutate.sh). A mutant is one file with one change, handed to the go command
# through -overlay (https://pkg.go.dev/cmd/go#hdr-Build_flags): the worktree
# is never written, so an interrupted run leaves nothing mutated behind.
#
# mutant_overlay NAME FILE PERL-EXPR [LINE]
#   writes the mutated copy of FILE (PERL-EXPR applied to the whole file with
#   perl -0, or to line LINE only) and an overlay for it under $MUTATION_DIR,
#   and prints the overlay's path. Returns 1 (and prints nothing) when the
#   expression changes nothing: the mutation no longer applies.
MUTATION_DIR=${MUTATION_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mutants.XXXXXX")}

mutant_overlay() {
	local name=$1 file=$2 expr=$3 line=${4:-} safe copy overlay
	safe=$(tr -c 'A-Za-z0-9_.-' '_' <<<"$name")
	copy="$MUTATION_DIR/$safe.go"
	overlay="$MUTATION_DIR/$safe.json"
	if [[ -n $line ]]; then
		perl -pe "if (\$. == $line) { $expr }" "$file" >"$copy"
	else
		perl -0pe "$expr" "$file" >"$copy"
	fi
	if cmp -s "$file" "$copy"; then
		return 1
	fi
	printf '{"Replace":{"%s":"%s"}}\n' "$(realpath "$file")" "$copy" >"$overlay"
	echo "$overlay"
}
