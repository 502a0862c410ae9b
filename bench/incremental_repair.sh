#!/usr/bin/env bash
# Incremental repair's target (issue 31): a second repair of an unchanged
# table validates <= 5% of the data the first one did.
#
#   3 nodes, RF 3, hinted handoff off; N rows of 100-byte values written
#   at ALL; node3 stopped while N/100 of them are rewritten at ONE; node3
#   back. Then, with `cassini-tool repair` (incremental, the default) on
#   node1: (1) the first repair, (2) a second one with no writes between,
#   (3) one after N/100 rows rewritten at ALL, and (4) `repair --full` for
#   comparison. Before each, every node is flushed and its unrepaired
#   Data.db bytes read (`repair_admin summarize-pending`): what an
#   incremental session anticompacts and validates. Reported per repair:
#   partitions validated (the replicas' trees, all replicas), unrepaired
#   bytes on all replicas before it, tree and hash bytes, rows streamed,
#   wall time; then the second/first and third/first ratios.
#
# Usage: bench/incremental_repair.sh [N] [THREADS]   (defaults 200000 50)
# BIN_DIR overrides where cassini-stress and cassini-tool are (default
# build/release/node). The cluster lives under a temporary CASSINI_HOME
# on 127.0.77.50-52 and is removed at the end. Starts nodes: run it under
# flock /tmp/cassini-tests.lock on a shared machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-200000}"
threads="${2:-50}"
name=ir
ips=(127.0.77.50 127.0.77.51 127.0.77.52)
# shellcheck source=bench/repair_setup.sh
. "$root/bench/repair_setup.sh"
repair_setup_diverge 5

# Unrepaired Data.db bytes of cassini_stress on all replicas (flushed).
unrepaired() {
  local sum=0 b
  for ip in "${ips[@]}"; do
    tool "$ip" flush cassini_stress >/dev/null
    b=$(tool "$ip" repair_admin summarize-pending cassini_stress |
      awk 'NR > 1 { s += $5 } END { print s + 0 }')
    sum=$((sum + b))
  done
  echo "$sum"
}

declare -A parts bytes
run_repair() { # name, repair args...
  local name="$1" t0 t1 out ub
  shift
  ub=$(unrepaired)
  t0=$(date +%s.%N)
  out=$(tool "${ips[0]}" repair "$@" cassini_stress | grep -v '^\[repair\]')
  t1=$(date +%s.%N)
  parts[$name]=$(echo "$out" | sed -n 's/.*partitions validated: \([0-9]*\).*/\1/p')
  bytes[$name]=$ub
  local tree streamed
  tree=$(echo "$out" | sed -n 's/.*tree and hash bytes: \([0-9]*\).*/\1/p')
  streamed=$(echo "$out" | awk '/streamed [0-9]+ rows/ { s += $3 } END { print s + 0 }')
  awk -v nm="$name" -v p="${parts[$name]}" -v ub="$ub" -v t="$tree" \
    -v s="$streamed" -v a="$t0" -v b="$t1" 'BEGIN {
    printf "%-28s partitions validated %9d  unrepaired bytes before %11d" \
           "  tree+hash bytes %9d  rows streamed %7d  %6.1f s\n",
           nm, p, ub, t, s, b - a }'
}

echo
echo "== repairs (on ${ips[0]})"
run_repair "1. first (incremental)"
run_repair "2. again, unchanged"
stress write n="$d" cl=ALL -rate threads="$threads" -col size=100 \
  -node "$all" >/dev/null
run_repair "3. after $d rows rewritten"
run_repair "4. --full" --full
echo
awk -v p1="${parts[1. first (incremental)]}" \
  -v p2="${parts[2. again, unchanged]}" -v p3="${parts[3. after $d rows rewritten]}" \
  -v b1="${bytes[1. first (incremental)]}" -v b2="${bytes[2. again, unchanged]}" \
  -v b3="${bytes[3. after $d rows rewritten]}" 'BEGIN {
  printf "second / first: partitions %.2f%%, unrepaired bytes %.2f%% " \
         "(target <= 5%%)\n", 100 * p2 / p1, 100 * b2 / b1
  printf "third (1%% of the rows rewritten) / first: partitions %.2f%%, unrepaired " \
         "bytes %.2f%%\n", 100 * p3 / p1, 100 * b3 / b1 }'
