#!/usr/bin/env bash
# What owner hardening (issue 14: admission, caps, budgets, fences, tcp
# frame checksums) costs, measured on a real multi-core host: scatterbench
# built just before the hardening (c6a059b), at HEAD, and at HEAD with
# -tcp-no-checksums, through scripts/device-compare.sh.
#
#   bash scripts/device-hardening.sh build [BASE]   # here: builds .device/ (BASE: default c6a059b)
#   bash scripts/device-hardening.sh [ROUNDS]       # there, with .device carried: runs and prints
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${1:-}" = build ]; then
	exec bash scripts/device-compare.sh build "${2:-c6a059b}"
fi
exec bash scripts/device-compare.sh "${1:-3}" nocrc=-tcp-no-checksums
