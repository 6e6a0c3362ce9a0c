#!/usr/bin/env bash
# Builds, vets and tests every module of the workspace alone (GOWORK=off),
# the way a user who `go get`s one module gets it: its own go.mod and go.sum,
# and its sibling modules fetched at the versions versions.yaml gives.
#
# Nothing is tagged yet (v0.0.0), so the siblings come from a module proxy
# written into a temp dir (tools/internal/modproxy: the zips the go command
# would fetch for a tag made from this tree), listed first in GOPROXY. The
# modules are checked in a temp copy of the tree (the files git tracks or
# would track); nothing in the checkout is changed. For each module:
#   1. its go.mod has no replace directive and requires each sibling at the
#      versions.yaml version; its go.sum holds no sibling hash (those v0.0.0
#      zips exist only here);
#   2. `go mod tidy` in the copy changes nothing in go.mod, and nothing in
#      go.sum but the sibling hashes it adds: a missing requirement, a wrong
#      `// indirect`, a missing or stale hash fails here, with the diff
#      (requirements kept on purpose, listed under `kept` below, aside);
#   3. with the committed go.mod and go.sum (plus the sibling hashes), read
#      only as a user's go command reads them: go build, go vet, the
#      cuda-tagged package graph (go list; compiling it needs the CUDA
#      headers, which scripts/gpu-build.sh does in the workspace), and go test.
# Before that, for the whole workspace: versions.yaml lists every module of
# go.work once, and go.work's replace directives point each module's
# versions.yaml version at its folder.
#
# Usage: bash scripts/check-modules.sh [-tidy] [MODULE_FOLDER...]
#   -tidy  write the tidied go.mod and go.sum (sibling hashes left out, kept
#          requirements put back) into the checkout instead of failing on a
#          difference, and skip step 3. Run it again until it reports no
#          change: a module's siblings are served with the go.mod files the
#          run started with.
#
# The go command's variables, as set for the module-alone commands:
#   GOWORK=off   the module alone, not the workspace.
#   GOPROXY      file://TMP/proxy,<go env GOPROXY>: the siblings from the temp
#                proxy, everything else as usual.
#   GONOSUMDB    github.com/scatterkit/scatterkit added: the sibling zips are
#                not in the checksum database. (Not GOPRIVATE: it also sets
#                GONOPROXY, which would send the siblings past the proxy list.)
#   GOFLAGS      -mod=readonly appended. Not -mod=mod: with it, go build looks
#                up a module for an import no requirement provides and adds
#                it, which hides the very drift this step is for.
#   GODEBUG      goindex=0 appended (see the module cache, below).
# TESTFLAGS: extra flags for the module-alone go test (default none: every
# test in full, as in go test work). Measured on a 2-core machine, -short
# would save about 20 s of the step's 5 minutes (reshard's property cases,
# structobj's killed-client test, the fault suite's trials), too little to
# give up those tests for.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=github.com/scatterkit/scatterkit

# Requirements a go.mod keeps on purpose though its module alone needs
# nothing from them (go mod tidy drops them), as "MODULE_FOLDER PATH"; each
# says why in its go.mod. Step 2 compares with tidy as if they were absent;
# step 3 builds with them.
#   cudagather google.golang.org/genproto: gorgonia.org/cu's requirements
#   reach the 2020 genproto monolith, which collides with the split genproto
#   modules of the etcd module's graph (ambiguous import) in any build that
#   loads both graphs whole, the workspace first; requiring the newer
#   monolith, which no longer holds those packages, settles it for them all.
kept="cudagather google.golang.org/genproto"
kept_of() { echo "$kept" | awk -v m="$1" '$1 == m { print $2 }'; }

tidy_only=0
if [ "${1:-}" = -tidy ]; then tidy_only=1; shift; fi
testflags=${TESTFLAGS-}

mods=$(go work edit -json | sed -n 's/.*"DiskPath": "\.\/\(.*\)".*/\1/p' | sort)
selected=${*:-$mods}
t0=$SECONDS

# versions.yaml: "MODULE_PATH VERSION" per listed module (the version of the
# module set the path is listed under).
versions=$(awk '
	/^[[:space:]]*version:/ { v = $2 }
	/^[[:space:]]*-[[:space:]]/ { print $2, v }' versions.yaml)
version_of() { echo "$versions" | awk -v p="$1" '$1 == p { print $2 }'; }

fail=0
problem() { echo "check-modules: $*"; fail=1; }

# versions.yaml lists exactly the workspace's modules, each once, at v0.
listed=$(echo "$versions" | awk '{ print $1 }' | sort)
wanted=$(for m in $mods; do echo "$root/$m"; done | sort)
if [ "$listed" != "$wanted" ]; then
	problem "versions.yaml does not list exactly the modules of go.work, each once (< go.work, > versions.yaml):"
	diff <(echo "$wanted") <(echo "$listed") || true
fi
for m in $mods; do
	v=$(version_of "$root/$m")
	case "$v" in v0.*) ;; *) problem "versions.yaml: $root/$m has version '$v' (everything stays v0)" ;; esac
done
# go.work points each module's versions.yaml version at its folder (so the
# workspace reads that version's go.mod from the folder and never fetches
# it), and names no other version of a workspace module.
replaced=$(go work edit -print | sed -nE "s#^[[:space:]]*(replace[[:space:]]+)?($root/[^[:space:]]+)[[:space:]]+([^[:space:]]+)[[:space:]]+=>[[:space:]]+([^[:space:]]+)[[:space:]]*\$#\2 \3 => \4#p" | sort)
wanted=$(for m in $mods; do echo "$root/$m $(version_of "$root/$m") => ./$m"; done | sort)
if [ "$replaced" != "$wanted" ]; then
	problem "go.work's replace directives for the workspace modules are not one per module, at its versions.yaml version, to its folder (< wanted, > go.work):"
	diff <(echo "$wanted") <(echo "$replaced") || true
fi
[ "$fail" = 0 ] || exit 1

# Step 1, on the committed files.
for m in $selected; do
	if go mod edit -json "$m/go.mod" | grep -q '"Replace": \['; then
		problem "$m/go.mod has a replace directive (none may be committed: go.work does the workspace's wiring)"
	fi
	if [ -f "$m/go.sum" ] && grep -q "^$root/" "$m/go.sum"; then
		problem "$m/go.sum holds hashes of sibling modules (their v0.0.0 zips exist only locally):"
		grep "^$root/" "$m/go.sum" | sed 's/^/    /'
	fi
	reqs=$(go mod edit -json "$m/go.mod" | tr -d '\n\t ' |
		grep -oE "\{\"Path\":\"$root/[^\"]+\",\"Version\":\"[^\"]+\"" |
		sed -E 's/.*"Path":"([^"]+)","Version":"([^"]+)"/\1 \2/' || true)
	while read -r p v; do
		[ -n "$p" ] || continue
		want=$(version_of "$p")
		[ "$v" = "$want" ] || problem "$m/go.mod requires $p $v; versions.yaml gives ${want:-nothing}"
	done <<<"$reqs"
done
[ "$fail" = 0 ] || exit 1

tmp=$(mktemp -d)
modcache=$(go env GOMODCACHE)
# The go command keeps what it fetched from the temp proxy in the module
# cache and takes it from there next time, never asking the proxy for the
# new zip: the served versions are dropped from the cache before and after,
# with the cache's scatterkit folder locked meanwhile, so two runs on one
# machine take turns. The go command also keeps an index of each module
# cache folder, keyed by the folder's name alone (the cache is meant to be
# immutable); GODEBUG=goindex=0 keeps it from listing an earlier run's files.
mkdir -p "$modcache/cache/download/$root"
if command -v flock >/dev/null; then
	exec 9>"$modcache/cache/download/$root/.check-modules.lock"
	flock 9
fi
purge() {
	local m v d
	for m in $mods; do
		v=$(version_of "$root/$m")
		for d in "$modcache/$root/$m@$v" "$modcache/cache/download/$root/$m/@v"; do
			if [ -e "$d" ]; then chmod -R u+w "$d"; fi
		done
		rm -rf "$modcache/$root/$m@$v" "$modcache/cache/download/$root/$m/@v/$v."* "$modcache/cache/download/$root/$m/@v/list"
	done
}
cleanup() { purge; chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
purge

# The copy: what git tracks or would track in the module folders (build
# outputs and other ignored files stay out, as they would from a tag); the
# folders whole where this is not a git checkout.
mkdir "$tmp/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z -co --exclude-standard -- $mods | while IFS= read -r -d '' f; do
		if [ -f "$f" ]; then printf '%s\0' "$f"; fi
	done | tar --null -T - -cf - | tar -xf - -C "$tmp/src"
else
	tar -cf - $mods | tar -xf - -C "$tmp/src"
fi
args=()
for m in $mods; do args+=("$root/$m@$(version_of "$root/$m")=$tmp/src/$m"); done
go run ./tools/internal/modproxy -o "$tmp/proxy" "${args[@]}"

export GOWORK=off
export GOPROXY="file://$tmp/proxy,$(go env GOPROXY)"
export GONOSUMDB="$root${GONOSUMDB:+,$GONOSUMDB}"
export GOFLAGS="$(go env GOFLAGS) -mod=readonly"
export GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0"

# sums FILE [PATH...]: go.sum's lines but the siblings' and PATHs' (any
# version), sorted.
sums() {
	local f=$1 p; shift
	local re="^$root/"
	for p in "$@"; do re="$re|^${p//./\\.} "; done
	if [ -f "$f" ]; then grep -vE "$re" "$f" | LC_ALL=C sort || true; fi
}

changed=0
for m in $selected; do
	t=$SECONDS
	dir=$tmp/src/$m
	keep=$(kept_of "$m")
	echo "-- $m"
	# What tidy should make: the committed go.mod without the kept
	# requirements, the committed go.sum without the siblings' and kept
	# modules' hashes.
	cp "$dir/go.mod" "$tmp/go.mod.committed"
	cp "$dir/go.mod" "$tmp/go.mod.want"
	for p in $keep; do go mod edit -droprequire="$p" "$tmp/go.mod.want"; done
	touch "$dir/go.sum"
	cp "$dir/go.sum" "$tmp/go.sum.committed"
	sums "$dir/go.sum" $keep >"$tmp/go.sum.want"
	cp "$tmp/go.mod.want" "$dir/go.mod"
	if ! (cd "$dir" && go mod tidy) >"$tmp/log" 2>&1; then
		cat "$tmp/log"; problem "$m: go mod tidy failed alone"; continue
	fi
	sums "$dir/go.sum" $keep >"$tmp/go.sum.got"
	if [ "$tidy_only" = 1 ]; then
		if ! cmp -s "$dir/go.mod" "$tmp/go.mod.want" || ! cmp -s "$tmp/go.sum.got" "$tmp/go.sum.want"; then
			# tidy's files, the sibling hashes left out, the kept requirements
			# and their hashes put back (in go.sum's order: by path)
			cp "$dir/go.mod" "$m/go.mod"
			grep -v "^$root/" "$dir/go.sum" >"$m/go.sum" || true
			for p in $keep; do
				v=$(go mod edit -json "$tmp/go.mod.committed" | tr -d '\n\t ' |
					grep -oE "\{\"Path\":\"${p//./\\.}\",\"Version\":\"[^\"]+\"" | sed -E 's/.*"Version":"([^"]+)"/\1/')
				go mod edit -require="$p@$v" "$m/go.mod"
				grep -E "^${p//./\\.} " "$tmp/go.sum.committed" | LC_ALL=C sort >"$tmp/kept.sum" || true
				grep -vE "^${p//./\\.} " "$m/go.sum" | LC_ALL=C awk -v p="$p" -v f="$tmp/kept.sum" '
					BEGIN { while ((getline l < f) > 0) k[n++] = l }
					!done && $1 > p { for (i = 0; i < n; i++) print k[i]; done = 1 }
					{ print }
					END { if (!done) for (i = 0; i < n; i++) print k[i] }' >"$tmp/merged.sum"
				cp "$tmp/merged.sum" "$m/go.sum"
				echo "   kept $p $v: mark it // indirect and put its comment (see git diff) back in $m/go.mod"
			done
			if [ ! -s "$m/go.sum" ]; then rm -f "$m/go.sum"; fi
			echo "   wrote $m/go.mod, $m/go.sum"; changed=1
		fi
		continue
	fi
	if ! cmp -s "$dir/go.mod" "$tmp/go.mod.want"; then
		problem "$m/go.mod is not what go mod tidy makes of it alone (- committed, + tidy); bash scripts/check-modules.sh -tidy writes it:"
		diff -u "$tmp/go.mod.want" "$dir/go.mod" | tail -n +3 || true
	fi
	if ! cmp -s "$tmp/go.sum.got" "$tmp/go.sum.want"; then
		problem "$m/go.sum is not what go mod tidy makes of it alone, sibling hashes aside (- committed, + tidy); bash scripts/check-modules.sh -tidy writes it:"
		diff -u "$tmp/go.sum.want" "$tmp/go.sum.got" | tail -n +3 || true
	fi
	# Step 3: the committed go.mod and go.sum, with the sibling hashes tidy
	# found, so a requirement tidy had to add fails here too.
	{ cat "$tmp/go.sum.committed"; grep "^$root/" "$dir/go.sum" || true; } >"$tmp/go.sum.build"
	cp "$tmp/go.mod.committed" "$dir/go.mod"
	cp "$tmp/go.sum.build" "$dir/go.sum"
	for cmd in "go build ./..." "go vet ./..." "go list -tags cuda -deps -test ./..." "go test $testflags ./..."; do
		if ! (cd "$dir" && $cmd) >"$tmp/log" 2>&1; then
			cat "$tmp/log"; problem "$m: '$cmd' failed alone (GOWORK=off)"; break
		fi
		case "$cmd" in "go test"*) grep -v "no test files" "$tmp/log" | sed 's/^/   /' || true ;; esac
	done
	echo "   $((SECONDS - t)) s"
done
if [ "$fail" != 0 ]; then
	echo "check-modules: FAILED (modules alone, GOWORK=off)"; exit 1
fi
if [ "$tidy_only" = 1 ]; then
	if [ "$changed" = 1 ]; then echo "go.mod and go.sum files written: run again until nothing changes"; else echo "every go.mod and go.sum is tidy alone"; fi
	exit 0
fi
echo "every module builds, vets and passes its tests alone ($(echo $selected | wc -w) modules, $((SECONDS - t0)) s)"
