# Sourced by device-compare.sh and device-transfer.sh: the variants of a
# before/head comparison on the device machine and the order of a round.
#
#   variants_init HEAD_FLAGS NAME=FLAGS ...   # sets variants, bins, flags
#   round_order R                              # sets order for round R
#
# variants holds before (when .device/scatterbench-before exists) and head,
# then each NAME; bins maps a variant to its binary (a NAME variant runs
# .device/scatterbench-NAME where that exists, a build of another commit
# carried beside the two, else head's), flags to its extra scatterbench
# flags. Odd rounds run the
# variants in order, even rounds in reverse, so a drift of the machine over
# a round (or the cost of going first) does not favour one variant.

variants_init() {
	local head_flags=$1 v
	shift
	variants=(before head)
	[ -x .device/scatterbench-before ] || variants=(head)
	declare -gA bins=([before]=before [head]=head) flags=([before]="" [head]="$head_flags")
	for v in "$@"; do
		variants+=("${v%%=*}")
		bins[${v%%=*}]=head
		[ -x ".device/scatterbench-${v%%=*}" ] && bins[${v%%=*}]=${v%%=*}
		flags[${v%%=*}]=${v#*=}
	done
}

round_order() {
	local i
	order=("${variants[@]}")
	if [ $(($1 % 2)) -eq 0 ]; then
		order=()
		for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[$i]}"); done
	fi
}
