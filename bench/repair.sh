#!/usr/bin/env bash
# Repair's targets, measured with cassini-stress on this machine:
#
#   3 nodes, RF 3, hinted handoff off; N rows of 100-byte values written at
#   ALL; node3 stopped while N/100 of them are rewritten (new timestamps)
#   at ONE; node3 back; `cassini-tool repair` on node1. Reported: the
#   repair's duration, rows and bytes streamed to node3 against the
#   divergent data (N/100 rows of 10-byte key + 100-byte value; target
#   bytes streamed / divergent bytes <= 2), tree and hash traffic against
#   the data's size (target <= 1%), and a second repair of the now
#   in-sync replicas (target: zero rows; its duration is about the
#   validation time of the whole table on every node, target <= 30 s).
#
# Usage: bench/repair.sh [N] [THREADS]   (defaults 1000000 50)
# BIN_DIR overrides where cassini-stress and cassini-tool are
# (default build/release/node). The cluster lives under a temporary
# CASSINI_HOME on 127.0.15.x and is removed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-1000000}"
threads="${2:-50}"
name=rp
ips=(127.0.15.1 127.0.15.2 127.0.15.3)
# shellcheck source=bench/repair_setup.sh
. "$root/bench/repair_setup.sh"
repair_setup_diverge 3

run_repair() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$(tool "${ips[0]}" repair cassini_stress | grep -v '^\[repair\]')
  t1=$(date +%s.%N)
  echo "$out"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "wall time %.1f s\n", b - a }'
  REPAIR_OUT="$out"
}
echo
echo "== repair"
run_repair
rows=$(echo "$REPAIR_OUT" | awk -v h="${ips[2]}:" '$1 ~ h {print $3}')
bytes=$(echo "$REPAIR_OUT" | awk -v h="${ips[2]}:" '$1 ~ h {gsub(/\(/, "", $5); print $5}')
tree=$(echo "$REPAIR_OUT" | sed -n 's/.*tree and hash bytes: \([0-9]*\).*/\1/p')
awk -v r="$rows" -v b="$bytes" -v d="$d" -v t="$tree" -v n="$n" 'BEGIN {
  printf "node3: %d rows streamed for %d divergent; %d bytes for %d " \
         "divergent bytes: ratio %.2f (target <= 2)\n", r, d, b, d * 110,
         b / (d * 110)
  printf "tree and hash traffic %d bytes = %.1f%% of the data (%d bytes " \
         "on each of 3 replicas; target <= 1%%)\n", t,
         100 * t / (3 * n * 110), n * 110 }'
echo
echo "== repair again (in sync)"
run_repair
