#!/usr/bin/env bash
# Checks that the module graph in docs/architecture.md (the mermaid block
# between "%% modules:begin" and "%% modules:end") is exactly the graph of
# imports between workspace modules (non-test imports). Node ids are module
# folders with '/' written as '_' (verbs/discovery/etcd -> verbs_discovery_etcd).
# Edges to external dependencies use ids starting with ext_ and are not checked
# here: the third-party edges are checked against their own table (below).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=github.com/scatterkit/scatterkit/

mods=$(go work edit -json | sed -n 's/.*"DiskPath": "\.\/\(.*\)".*/\1/p' | sort)
# module folder of an import path: the longest module folder that prefixes it
modof() {
	local p=${1#"$root"} best=""
	for m in $mods; do
		case "$p/" in "$m"/*) [ ${#m} -gt ${#best} ] && best=$m ;; esac
	done
	echo "$best"
}
actual=$(for m in $mods; do
	go list -f '{{.ImportPath}} {{join .Imports " "}}' "$root$m/..." 2>/dev/null | while read -r pkg imports; do
		from=$(modof "$pkg")
		for i in $imports; do
			case "$i" in "$root"*) to=$(modof "$i"); [ -n "$to" ] && [ "$to" != "$from" ] && echo "${from//\//_} --> ${to//\//_}" ;; esac
		done
	done
done | sort -u)
documented=$(sed -n '/%% modules:begin/,/%% modules:end/p' docs/architecture.md |
	grep -E '^\s*[A-Za-z0-9_]+\s*-->\s*[A-Za-z0-9_]+\s*$' | grep -v 'ext_' |
	sed -E 's/^\s*([A-Za-z0-9_]+)\s*-->\s*([A-Za-z0-9_]+)\s*$/\1 --> \2/' | sort -u)
if [ "$actual" != "$documented" ]; then
	echo "docs/architecture.md's module graph differs from the code (< code, > docs):"
	diff <(echo "$actual") <(echo "$documented") || true
	exit 1
fi
echo "architecture graph matches the imports ($(echo "$actual" | grep -c . || true) edges)"

# One funnel per risky dependency (STYLE.md): cilium/ebpf only under
# tools/cmd/scatterprof, gorgonia.org/cu only under cudagather (tests
# included; both build tags, so the cuda files are seen).
funnel() {
	local dep=$1 allowed=$2 bad
	bad=$(for m in $mods; do
		for tags in "" "cuda"; do
			go list -tags "$tags" -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' "$root$m/..." 2>/dev/null
		done
	done | awk -v dep="$dep" -v allowed="$root$allowed" '
		{ for (i = 2; i <= NF; i++) if (index($i, dep) == 1 && index($1, allowed) != 1) print $1 }' | sort -u)
	if [ -n "$bad" ]; then
		echo "$dep may be imported only under $allowed; imported by:"; echo "$bad"; exit 1
	fi
}
funnel github.com/cilium/ebpf tools/cmd/scatterprof
funnel gorgonia.org/cu cudagather
funnel go.etcd.io verbs/discovery/etcd
# The core modules' dependency graphs stay free of etcd: only the etcd
# module and tools (the commands, through tools/internal/dirspec) require it.
for m in $mods; do
	case $m in verbs/discovery/etcd | tools) continue ;; esac
	if grep -q 'go\.etcd\.io\|scatterkit/verbs/discovery/etcd ' "$m/go.mod"; then
		echo "$m/go.mod requires etcd (only verbs/discovery/etcd and tools may)"; exit 1
	fi
done
echo "risky dependencies stay in their funnels (cilium/ebpf, gorgonia.org/cu, go.etcd.io); no core module requires etcd"

# Third-party edges: which workspace module imports which third-party module
# (non-test imports, linux, with and without the cuda tag), against the table
# between "<!-- third-party:begin -->" and "<!-- third-party:end -->" in
# docs/architecture.md. Its rows are `module folder` | the third-party module
# paths it imports, each in backticks (or none) | free text. Every workspace
# module has exactly one row.
third_party_actual() {
	local tags
	for tags in "" cuda; do
		# the module of every non-standard package in the build, then each
		# workspace package's module and imports
		go list -tags "$tags" -deps -f '{{if not .Standard}}P {{.ImportPath}} {{with .Module}}{{.Path}}{{end}}{{end}}' work
		go list -tags "$tags" -f 'I {{.Module.Path}} {{join .Imports " "}}' work
	done | awk -v root="$root" '
		$1 == "P" { mod[$2] = $3; next }
		{ for (i = 3; i <= NF; i++) if (($i in mod) && mod[$i] != "" && index(mod[$i], root) != 1) print substr($2, length(root) + 1), mod[$i] }' |
		sort -u
}
third_party_table() {
	sed -n '/<!-- third-party:begin -->/,/<!-- third-party:end -->/p' docs/architecture.md | grep -E '^\|[[:space:]]*`' || true
}
check_third_party() {
	local actual documented rows
	actual=$(third_party_actual)
	rows=$(third_party_table | awk -F'|' '{ m = $2; gsub(/[` ]/, "", m); print m }' | sort)
	if [ "$rows" != "$mods" ]; then
		echo "docs/architecture.md's third-party table must have one row per workspace module (< go.work, > table):"
		diff <(echo "$mods") <(echo "$rows") || true
		exit 1
	fi
	documented=$(third_party_table | awk -F'|' '{
		m = $2; gsub(/[` ]/, "", m)
		n = split($3, part, "`"); for (i = 2; i <= n; i += 2) print m, part[i] }' | sort -u)
	if [ "$actual" != "$documented" ]; then
		echo "docs/architecture.md's third-party table differs from the imports (< code, > docs; module, then the third-party module it imports):"
		diff <(echo "$actual") <(echo "$documented") || true
		echo "Fix the table (and docs/dependencies.md, which says why each dependency is here), or the imports."
		exit 1
	fi
	echo "third-party table matches the imports ($(echo "$actual" | grep -c . || true) edges)"
}
check_third_party

# The package-level graphs of verbs, engram and structobj, and the verbs
# module's rule that nothing runs back up (scripts/check-packages.sh).
bash scripts/check-packages.sh
