#!/usr/bin/env bash
# Runs rdmalab-micro-softnic (or MICRO_PROGRAM, e.g. rdmalab-micro-registration) on softnic,
# on a fabric of its own that is removed afterwards.
# Usage: benchmarks/micro/run_micro.sh [BUILD_DIR] [google-benchmark flags...]
#   e.g. benchmarks/micro/run_micro.sh build --benchmark_format=json
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
[[ $# -gt 0 ]] && shift
program=${MICRO_PROGRAM:-rdmalab-micro-softnic}
bin=$build/bin/$program
target=${program#rdmalab-}
lib=$build/lib/softnic
for f in "$bin" "$lib/libibverbs.so.1" "$build/bin/softnic"; do
  [[ -e $f ]] || { echo "run_micro.sh: $f is missing; build it: cmake --build $build --target ${target//-/_} softnic softnic_ibverbs" >&2; exit 2; }
done
fabric=micro-$$
trap '"$build/bin/softnic" fabric rm --fabric "$fabric" >/dev/null 2>&1 || true' EXIT
LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} SOFTNIC_FABRIC=$fabric \
  taskset -c "${MICRO_CORE:-1}" "$bin" "$@"
