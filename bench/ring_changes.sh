#!/usr/bin/env bash
# What growing and shrinking a cluster costs, measured with cassini-stress
# on this machine:
#
#   3 nodes on 3 racks, RF 3, N rows of 100-byte values written at ALL and
#   flushed; `scripts/cluster add -s` (node4 bootstraps: the wall time until
#   every node is UN, and the rows, bytes and seconds its streaming took
#   from its log); `cassini-tool cleanup` on nodes 1-3 (each one's time and
#   partitions before and after); `cassini-tool decommission` of node4
#   (wall time, rows and bytes streamed); then a read of every row at ALL
#   (target: 0 rows not found, 0 errors).
#
# Usage: bench/ring_changes.sh [N] [THREADS]   (defaults 500000 32)
# BIN_DIR overrides where cassini-stress and cassini-tool are (default
# build/release/node). The cluster lives under a temporary CASSINI_HOME on
# 127.0.24.x and is removed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-500000}"
threads="${2:-32}"
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home"
bin="${BIN_DIR:-$root/build/release/node}"
export CASSINI_BIN_DIR="$(dirname "$bin")"
cluster="$root/scripts/cluster"
trap '"$cluster" -C rc remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
ip=127.0.24.
stress() { "$bin/cassini-stress" "$@"; }
tool() { "$bin/cassini-tool" -h "$1" "${@:2}"; }
partitions() {
  tool "$1" tablestats cassini_stress |
    awk -F': ' '/Number of partitions/ {print $2}'
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

"$cluster" create rc -n 3 --racks 3 --base-ip "$ip" -s >/dev/null
echo "== $n rows at ALL, RF 3, 3 nodes"
stress write n="$n" cl=ALL -rate threads="$threads" -col size=100 \
  -node "${ip}1" -schema "replication(factor=3)" |
  grep -E "Op rate|Total errors" || true
for i in 1 2 3; do tool "$ip$i" flush; done

echo
echo "== add node4 (bootstrap)"
t0=$(date +%s.%N)
"$cluster" -C rc add -s >/dev/null
echo "every node UN after $(elapsed "$t0") s"
grep -h "movement" "$home/clusters/rc/node4/logs/system.log" |
  sed 's/^.*\[movement\] /  /'

echo
echo "== cleanup on nodes 1-3"
for i in 1 2 3; do
  before=$(partitions "$ip$i")
  t0=$(date +%s.%N)
  tool "$ip$i" cleanup
  echo "  node$i: $before -> $(partitions "$ip$i") partitions in $(elapsed "$t0") s"
done

echo
echo "== decommission node4"
t0=$(date +%s.%N)
tool "${ip}4" decommission | grep -E "streamed|Decommissioned"
echo "command took $(elapsed "$t0") s"
sleep 6

echo
echo "== every row at ALL"
stress read n="$n" cl=ALL -rate threads="$threads" -col size=100 \
  -node "${ip}1" | grep -E "Op rate|Rows not found|Total errors" || true
