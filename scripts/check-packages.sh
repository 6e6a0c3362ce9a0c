#!/usr/bin/env bash
# Checks the package-level graphs in docs/architecture.md against the code,
# for the modules whose insides a maintainer most needs a map of: verbs,
# engram and structobj. Each has a mermaid block between
# "%% packages:<module>:begin" and "%% packages:<module>:end" listing every
# non-test import between two packages of that module ("a --> b", node ids
# are package paths below the module with '/' written as '_', the module's
# root package is "root"). Imports of other modules are the module graph's
# business (check-arch.sh). Also enforced: no package of the verbs module
# imports a package above it other than a contract (verbs itself, which
# backends implement, and verbs/discovery, the directory interface its
# conformance suite and backends implement), and the transport contract
# imports no scatterkit package, so the transports never pull in the
# engine, the gather service or the foundation modules.
#
# scripts/check-packages.sh --print prints the graphs as the code has them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=github.com/scatterkit/scatterkit/
status=0

node() { # node id of package $1 in module $2
	local rel=${1#"$root$2"}
	rel=${rel#/}
	if [ -z "$rel" ]; then echo root; else echo "${rel//\//_}"; fi
}

edges() { # the intra-module import edges of module $1, sorted
	local m=$1
	(cd "$m" && go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...) | while read -r pkg imports; do
		for i in $imports; do
			case "$i" in
			"$root$m" | "$root$m"/*)
				# a nested module (verbs/discovery/etcd) is not this module
				[ -f "${i#"$root"}/go.mod" ] && [ "${i#"$root"}" != "$m" ] && continue
				echo "  $(node "$pkg" "$m") --> $(node "$i" "$m")"
				;;
			esac
		done
	done | sort -u
}

for m in verbs engram structobj; do
	actual=$(edges "$m")
	if [ "${1:-}" = --print ]; then
		printf '%%%% packages:%s:begin\n%s\n%%%% packages:%s:end\n' "$m" "$actual" "$m"
		continue
	fi
	documented=$(sed -n "/%% packages:$m:begin/,/%% packages:$m:end/p" docs/architecture.md |
		grep -E '^\s*[A-Za-z0-9_]+\s*-->\s*[A-Za-z0-9_]+\s*$' |
		sed -E 's/^\s*([A-Za-z0-9_]+)\s*-->\s*([A-Za-z0-9_]+)\s*$/  \1 --> \2/' | sort -u)
	if [ "$actual" != "$documented" ]; then
		echo "docs/architecture.md's package graph of $m differs from the code (< code, > docs):"
		diff <(echo "$actual") <(echo "$documented") || true
		status=1
	else
		echo "$m package graph matches the imports ($(echo "$actual" | grep -c . || true) edges)"
	fi
done
[ "${1:-}" = --print ] && exit 0

# verbs: nothing runs back up but to the contract.
up=$(cd verbs && go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | while read -r pkg imports; do
	for i in $imports; do
		case "$pkg/" in
		"$i"/*) case "$i" in "${root}verbs" | "${root}verbs/discovery") ;; *) echo "  $pkg imports its ancestor $i" ;; esac ;;
		esac
	done
done)
contract=$(cd verbs && go list -f '{{join .Imports "\n"}}' . | grep "^$root" || true)
# and the backends, whatever they import, reach none of the engine's rooms
heavy=$(cd verbs && go list -deps ./shm ./tcp ./transports 2>/dev/null |
	grep -E "^${root}(verbs/(engine|gather|staging|internal/gatherwire|internal/packstream)|costmodel|bufferpool|planfmt)(/|$)" | sed 's/^/  a backend depends on /' || true)
up=$up$heavy
if [ -n "$up" ] || [ -n "$contract" ]; then
	echo "verbs: an import runs back up (only a contract, verbs or verbs/discovery, may be imported from below; verbs imports no scatterkit package):"
	[ -n "$up" ] && echo "$up"
	[ -n "$contract" ] && echo "$contract" | sed 's/^/  verbs imports /'
	status=1
else
	echo "verbs: no import runs back up; the contract imports no scatterkit package"
fi
exit $status
