#!/usr/bin/env bash
# Point reads of a table many times the memtables and the block cache
# (its data in the OS page cache) against a table that fits in memory, on
# one node, for two builds in the same run (A B A B on the same data):
#
#   1. N keys of 100-byte values (cassini-stress write), then compaction
#      left to catch up (no pending compactions);
#   2. per build and round: the node restarted with that build, then
#      uniform random reads over the N keys for S seconds (cassini-stress
#      mixed with reads only);
#   3. the same on a table of SMALL keys (it fits in the block cache).
#
# Reported per run: op/s, p50/p99, the node's CPU per read (steadier than
# op/s on a shared machine) and the ratios large/small. The target
# (issue 31): large >= 0.8x small's op/s once compaction caught up.
#
# Usage: bench/large_read.sh BIN_A BIN_B [N] [SECONDS] [SMALL] [ROUNDS]
#   BIN_A/BIN_B: build directories (node/cassinid in each, e.g. a build
#   of main and build/release); cassini-stress and cassini-tool are BIN_B's.
#   Defaults: N 3000000, 30 s, SMALL 100000, 2 rounds.
#   LOCK_ONCE=1: the read phase holds the lock once, not once a run (on
#   a busy lock each run would queue again).
#   LOCK_HELD=1: the caller holds the lock (reads only, with REUSE).
#   REUSE=DIR: the CASSINI_HOME of an earlier run killed after its loads
#   (its clusters lg and sm): reads only, DIR kept.
#   PERF_DIR: a perf profile of the node during each read run there
#   (LABEL-lg.data, LABEL-sm.data; perf report -i ...).
# Nodes live under a temporary CASSINI_HOME on 127.0.76.1 and .2; each
# step that runs a node holds /tmp/cassini-tests.lock.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin_a="$(cd "$1" && pwd)"
bin_b="$(cd "$2" && pwd)"
n="${3:-3000000}"
secs="${SECS:-${4:-30}}"
small="${5:-100000}"
rounds="${6:-2}"
if [ -z "${STEP:-}" ]; then
  home="${REUSE:-$(mktemp -d /tmp/cassini-bench.XXXXXX)}"
  export CASSINI_HOME="$home"
fi
cluster="$root/scripts/cluster"
lock=/tmp/cassini-tests.lock
tool() { "$bin_b/node/cassini-tool" -h "$1" "${@:2}"; }
field() { awk -F': *' -v k="$1" '$1 ~ k {print $2}' | awk '{print $1}'; }

# The steps that run a node, each under the lock: this script again.
NAME=${3:-} IP=${4:-} KEYS=${5:-}
if [ "${STEP:-}" = load ]; then # name ip keys
  "$cluster" -C "$NAME" start >/dev/null
  "$bin_b/node/cassini-stress" write n="$KEYS" -rate threads=50 -col size=100 \
    -node "$IP" | grep -E "Op rate|Total errors"
  tool "$IP" flush >/dev/null
  t=0
  while tool "$IP" compactionstats | grep -q "pending tasks: [1-9]"; do
    sleep 5
    t=$((t + 5))
  done
  echo "compaction settled ${t} s after the flush;" \
    "$(tool "$IP" tablestats cassini_stress standard1 |
       grep -E 'SSTable count|Space used \(live\)' | tr -s ' ' | paste -sd';')"
  "$cluster" -C "$NAME" stop >/dev/null
  exit 0
elif [ "${STEP:-}" = read ]; then # name ip keys
  "$cluster" -C "$NAME" start >/dev/null
  pid=$(cat "$CASSINI_HOME/clusters/$NAME/node1/cassinid.pid")
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  if [ -n "${PERF_DIR:-}" ]; then # a profile of the node's read phase
    perf record -q -g -F 499 -p "$pid" -o "$PERF_DIR/$LABEL-$NAME.data" \
      -- sleep "$((secs > 10 ? secs - 5 : secs))" >/dev/null 2>&1 &
  fi
  "$bin_b/node/cassini-stress" mixed "ratio(write=0,read=1)" n="$KEYS" \
    duration="${secs}s" -rate threads=50 -col size=100 -node "$IP" || true
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  echo "Node CPU : $(( (t1 - t0) * 1000000 / $(getconf CLK_TCK) )) us"
  wait
  "$cluster" -C "$NAME" stop >/dev/null
  exit 0
fi
[ -z "${REUSE:-}" ] && trap 'CASSINI_BIN_DIR=$bin_b "$cluster" -C lg remove >/dev/null 2>&1 || true;
      CASSINI_BIN_DIR=$bin_b "$cluster" -C sm remove >/dev/null 2>&1 || true;
      rm -rf "$home"' EXIT

load() { # name ip keys
  CASSINI_BIN_DIR=$bin_b "$cluster" create "$1" -n 1 --base-ip "$2" \
    >/dev/null
  CASSINI_BIN_DIR=$bin_b STEP=load flock "$lock" "$0" "$bin_a" "$bin_b" \
    "$1" "$2" "$3"
}

read_run() { # name ip keys bin label
  local out
  local held=(flock "$lock")
  [ "${LOCK_ONCE:-0}" = 1 ] && held=()
  out=$(CASSINI_BIN_DIR=$4 STEP=read SECS=$secs LABEL=$5 "${held[@]}" "$0" \
        "$bin_a" "$bin_b" "$1" "$2" "$3" 9>&-)
  RATE=$(echo "$out" | field 'Op rate')
  local ops cpu
  ops=$(echo "$out" | field 'Total operations')
  cpu=$(echo "$out" | field 'Node CPU')
  CPU=$(awk -v c="$cpu" -v n="$ops" 'BEGIN { printf "%.2f", c / n }')
  printf '%-4s %-3s %8s op/s  p50 %s ms  p99 %s ms  node CPU %s us/op  errors %s\n' \
    "$5" "$1" "$RATE" "$(echo "$out" | field 'Latency median')" \
    "$(echo "$out" | field '99th')" "$CPU" "$(echo "$out" | field 'Total errors')"
}

if [ -z "${REUSE:-}" ]; then
  echo "== load: $n keys on 127.0.76.1, $small keys on 127.0.76.2"
  load lg 127.0.76.1 "$n"
  load sm 127.0.76.2 "$small"
fi
echo
echo "== reads: $secs s each, 50 in flight"
if [ "${LOCK_HELD:-0}" = 1 ]; then
  LOCK_ONCE=1
elif [ "${LOCK_ONCE:-0}" = 1 ]; then
  exec 9>"$lock"
  flock 9
fi
for i in $(seq "$rounds"); do
  for b in A B; do
    bin=$bin_a
    [ "$b" = B ] && bin=$bin_b
    read_run lg 127.0.76.1 "$n" "$bin" "$b$i"
    large=$RATE large_cpu=$CPU
    read_run sm 127.0.76.2 "$small" "$bin" "$b$i"
    awk -v a="$large" -v b="$RATE" -v c="$large_cpu" -v d="$CPU" -v l="$b$i" \
      'BEGIN { printf "%-4s large/small: op/s %.2f (target >= 0.80), node CPU per op %.2f\n", l, a / b, c / d }'
  done
done
