#!/usr/bin/env bash
# rdmalab-bench against perftest on rxe0/rxe1 inside the Soft-RoCE VM: WRITE, READ and SEND,
# bandwidth and latency, 64 B and 4 KB, median of 3 paired rounds; prints the ratio table and
# writes it as JSON. The pairs run from a generated bash script in the guest (no Python
# there); the host parses the guest log with the same metric definitions and parsers as
# benchmarks/peers/compare_perftest.py. Fails when a pair fails, not on a ratio (a benchmark).
# Usage: tests/vm/bench_vs_perftest.sh [BUILD_DIR] [OUT_JSON] [compare_perftest.py options...]
#   e.g. ... build /tmp/aa.json --against perftest   (A/A control: perftest against itself)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$build/vm-bench-vs-perftest.json}
cd "$root"
bench=$build/bin/rdmalab-bench
[[ -x $bench ]] || { echo "bench_vs_perftest: $bench not built" >&2; exit 2; }

compare=(/usr/bin/python3 benchmarks/peers/compare_perftest.py --backend verbs --server-dev rxe0
         --client-dev rxe1 --bench "$bench" --lat-sizes 64,4096 --bw-sizes 64,4096
         --lat-verbs write,read,send --bw-verbs write,read,send --runs "${VM_BENCH_RUNS:-3}"
         --lat-iters "${VM_BENCH_LAT_ITERS:-5000}" --bw-seconds "${VM_BENCH_BW_SECONDS:-1}"
         "${@:3}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${compare[@]}" --guest-script "$work/pairs.sh"
# The guest's exit status is the last pair's; every pair's own status is in the log.
scripts/rxe-vm -t "${VM_BENCH_TIMEOUT_S:-1500}" -f "$bench" "$work/pairs.sh" | tee "$work/guest.log"
"${compare[@]}" --guest-log "$work/guest.log" --out "$out"
