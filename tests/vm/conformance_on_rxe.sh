#!/usr/bin/env bash
# Runs the conformance suite inside the Soft-RoCE VM against rxe0/rxe1, excluding the
# documented differences in rxe_differences.txt: every other test must pass on rxe.
# Usage: tests/vm/conformance_on_rxe.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build}
cd "$root"
binary=$build/bin/conformance
[[ -x $binary ]] || { echo "conformance_on_rxe: $binary not built (cmake --build $build --target conformance)" >&2; exit 2; }

excluded=$(grep -v '^\s*#' tests/vm/rxe_differences.txt | grep -v '^\s*$' | sed 's/ | .*//' | paste -sd: -)
echo "conformance_on_rxe: excluding $(grep -cv '^\s*#\|^\s*$' tests/vm/rxe_differences.txt) documented differences (tests/vm/rxe_differences.txt)"
exec scripts/rxe-vm -t 900 -f "$binary" -f "$root/tests/vm/conformance_guest.sh" -- \
  bash "$root/tests/vm/conformance_guest.sh" "$binary" "$excluded"
