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
d=$((n / 100))
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home"
bin="${BIN_DIR:-$root/build/release/node}"
export CASSINI_BIN_DIR="$(dirname "$bin")"
cluster="$root/scripts/cluster"
trap '"$cluster" -C rp remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
ip=127.0.15.
stress() { "$bin/cassini-stress" "$@"; }
tool() { "$bin/cassini-tool" -h "$1" "${@:2}"; }

"$cluster" create rp -n 3 --base-ip "$ip" -c gossip_interval=250ms \
  -c hinted_handoff_enabled=false -s >/dev/null
echo "== $n rows at ALL"
stress write n="$n" cl=ALL -rate threads="$threads" -col size=100 \
  -node "${ip}1,${ip}2,${ip}3" -schema "replication(factor=3)" |
  grep -E "Op rate|Total errors" || true
"$cluster" -C rp node node3 stop >/dev/null
sleep 3
echo "== node3 down: $d rows rewritten at ONE"
stress write n="$d" cl=ONE -rate threads="$threads" -col size=100 \
  -node "${ip}1,${ip}2" | grep -E "Op rate|Total errors" || true
"$cluster" -C rp node node3 start >/dev/null
sleep 3

run_repair() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$(tool "${ip}1" repair cassini_stress | grep -v '^\[repair\]')
  t1=$(date +%s.%N)
  echo "$out"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "wall time %.1f s\n", b - a }'
  REPAIR_OUT="$out"
}
echo
echo "== repair"
run_repair
rows=$(echo "$REPAIR_OUT" | awk -v h="${ip}3:" '$1 ~ h {print $3}')
bytes=$(echo "$REPAIR_OUT" | awk -v h="${ip}3:" '$1 ~ h {gsub(/\(/, "", $5); print $5}')
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
