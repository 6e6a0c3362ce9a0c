#!/usr/bin/env bash
# Checks that the module graph in docs/architecture.md (the mermaid block
# between "%% modules:begin" and "%% modules:end") is exactly the graph of
# imports between workspace modules (non-test imports). Node ids are module
# folders with '/' written as '_' (verbs/discovery/etcd -> verbs_discovery_etcd).
# Edges to external dependencies use ids starting with ext_ and are not checked.
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
echo "risky dependencies stay in their funnels (cilium/ebpf, gorgonia.org/cu)"
