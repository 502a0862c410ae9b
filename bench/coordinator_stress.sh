#!/usr/bin/env bash
# The coordinator's targets, measured with cassini-stress on this machine:
#
#  1. one node, RF 1, CL ONE writes (the reference), then 3 nodes, RF 3,
#     QUORUM writes, in the same run: the ratio of their throughputs
#     (target >= 0.3) and of their p99 latencies (target <= 3);
#  2. hint replay: node3 stopped, N writes at ONE (hints on node1 and
#     node2), node3 started while a read load runs; how long until no hints
#     are pending (target: 100,000 within 10 s) and the read p99 during the
#     replay against the same read load without it (target <= 2x).
#
# Usage: bench/coordinator_stress.sh [N] [THREADS]   (defaults 100000 50)
# Node settings for both clusters may be added with CONF, e.g.
#   CONF="hinted_handoff_throttle=4MiB" bench/coordinator_stress.sh
# Clusters live under a temporary CASSINI_HOME on 127.0.12.x / 127.0.13.x
# and are removed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-100000}"
threads="${2:-50}"
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home"
cluster="$root/scripts/cluster"
bin="$root/build/release/node"
trap '"$cluster" -C one remove >/dev/null 2>&1 || true;
      "$cluster" -C three remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT

stress() { "$bin/cassini-stress" "$@"; }
conf=()
for kv in ${CONF:-}; do conf+=(-c "$kv"); done
field() { awk -F': *' -v k="$1" '$1 ~ k {print $2}' | awk '{print $1}'; }

echo "== 1. one node RF 1 ONE vs three nodes RF 3 QUORUM ($n writes, $threads in flight)"
"$cluster" create one -n 1 --base-ip 127.0.12. "${conf[@]}" -s >/dev/null
one=$(stress write n="$n" cl=ONE -rate threads="$threads" -col size=100 \
      -node 127.0.12.1 -schema "replication(factor=1)" | tee /dev/stderr)
"$cluster" -C one remove >/dev/null
"$cluster" create three -n 3 --base-ip 127.0.13. "${conf[@]}" -s >/dev/null
three=$(stress write n="$n" cl=QUORUM -rate threads="$threads" -col size=100 \
        -node 127.0.13.1,127.0.13.2,127.0.13.3 \
        -schema "replication(factor=3)" | tee /dev/stderr)
r1=$(echo "$one" | field "Op rate"); p1=$(echo "$one" | field "99th")
r3=$(echo "$three" | field "Op rate"); p3=$(echo "$three" | field "99th")
printf '\n%-28s %12s %10s\n' "" "op/s" "p99 ms"
printf '%-28s %12s %10s\n' "1 node RF1 ONE" "$r1" "$p1"
printf '%-28s %12s %10s\n' "3 nodes RF3 QUORUM" "$r3" "$p3"
awk -v a="$r3" -v b="$r1" -v c="$p3" -v d="$p1" 'BEGIN {
  printf "ratio throughput %.2f (target >= 0.30), p99 %.2f (target <= 3)\n",
         a / b, c / d }'

echo
echo "== 2. hint replay ($n hints)"
tool() { "$bin/cassini-tool" -h "$1" "${@:2}"; }
base=$(stress read n="$n" cl=ONE -rate threads=8 -col size=100 -node 127.0.13.1,127.0.13.2 \
       | tee /dev/stderr)
"$cluster" -C three node node3 stop >/dev/null
sleep 2
stress write n="$n" cl=ONE -rate threads="$threads" -col size=100 \
  -node 127.0.13.1,127.0.13.2 >/dev/null
tool 127.0.13.1 listpendinghints
tool 127.0.13.2 listpendinghints
# True once neither coordinator holds hints.
drained() {
  local out
  out=$(tool 127.0.13.1 listpendinghints; tool 127.0.13.2 listpendinghints)
  ! grep -q "^[0-9a-f]\{8\}-" <<<"$out"
}
t0=$(date +%s.%N)
"$cluster" -C three node node3 start >/dev/null &
start_pid=$!
stress read n="$n" cl=ONE -rate threads=8 -col size=100 -node 127.0.13.1,127.0.13.2 \
  >"$home/during.txt" 2>&1 &
read_pid=$!
until drained; do sleep 0.2; done
t1=$(date +%s.%N)
wait "$read_pid" || true
wait "$start_pid" || true
pb=$(echo "$base" | field "99th")
pd=$(field "99th" <"$home/during.txt")
awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN {
  printf "replay: %d hints delivered %.1f s after node3 was started\n", n, b - a }'
tool 127.0.13.1 statushandoff
tool 127.0.13.2 statushandoff
awk -v a="$pd" -v b="$pb" 'BEGIN {
  printf "read p99: %.3f ms during the replay, %.3f ms without (ratio %.2f, target <= 2)\n",
         a, b, a / b }'
