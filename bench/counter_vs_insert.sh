#!/usr/bin/env bash
# Counter increments against plain writes, both at QUORUM on 3 nodes with
# RF 3, in the same run (issue #25's target: counters >= 0.5x INSERTs).
# cassini-stress `write` (INSERT into standard1) and `counter_write`
# (UPDATE counter1 SET c0 = c0 + 1) alternate ROUNDS times on one cluster;
# the table prints each round's op/s and p99 and the ratio of the medians.
#
# Usage: bench/counter_vs_insert.sh [BUILD_DIR] [N] [THREADS] [ROUNDS]
#        (defaults build/release 100000 50 3)
# The cluster lives under a temporary CASSINI_HOME on 127.0.104.1-3 and is
# removed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "${1:-$root/build/release}" && pwd)/node"
n="${2:-100000}"
threads="${3:-50}"
rounds="${4:-3}"
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home" CASSINI_BIN_DIR="$(dirname "$bin")"
cluster="$root/scripts/cluster"
trap '"$cluster" -C ctrbench remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT

nodes=127.0.104.1,127.0.104.2,127.0.104.3
stress() {
  "$bin/cassini-stress" "$1" n="$n" cl=QUORUM -rate threads="$threads" \
    -col size=8 -node "$nodes" -schema "replication(factor=3)"
}
field() { awk -F': *' -v k="$1" '$1 ~ k {print $2}' | awk '{print $1}'; }

"$cluster" create ctrbench -n 3 --base-ip 127.0.104. -s >/dev/null
declare -a wr wp cr cp
for ((i = 0; i < rounds; i++)); do
  out=$(stress write)
  wr+=("$(echo "$out" | field "Op rate")"); wp+=("$(echo "$out" | field "99th")")
  out=$(stress counter_write)
  cr+=("$(echo "$out" | field "Op rate")"); cp+=("$(echo "$out" | field "99th")")
  echo "round $((i + 1)): INSERT ${wr[i]} op/s p99 ${wp[i]} ms," \
       "counter ${cr[i]} op/s p99 ${cp[i]} ms" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '\n%-8s %12s %10s %12s %10s %8s\n' round "INSERT op/s" "p99 ms" \
  "counter op/s" "p99 ms" ratio
for ((i = 0; i < rounds; i++)); do
  awk -v r=$((i + 1)) -v a="${wr[i]}" -v b="${wp[i]}" -v c="${cr[i]}" \
      -v d="${cp[i]}" 'BEGIN { printf "%-8s %12s %10s %12s %10s %8.2f\n",
      r, a, b, c, d, c / a }'
done
mw=$(median "${wr[@]}"); mc=$(median "${cr[@]}")
awk -v a="$mw" -v c="$mc" 'BEGIN {
  printf "median: INSERT %s op/s, counter %s op/s, ratio %.2f (target >= 0.50)\n",
         a, c, c / a }'
