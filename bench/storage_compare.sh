#!/usr/bin/env bash
# Interleaved A/B comparison of bench/storage_bench with Debian's db_bench
# (rocksdb-tools), same flags, same machine: A B A B. Only the ratios within
# a pair mean anything on a shared box.
#
#   cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release \
#         -DCASSINI_TESTS=OFF && ninja -C build/rel storage_bench
#   bench/storage_compare.sh [pairs] [scratch dir]
set -u
cd "$(dirname "$0")/.."
SB=build/rel/bench/storage_bench
DB=/usr/bin/db_bench
PAIRS=${1:-2}
TMP=${2:-/tmp/storage_compare}
mkdir -p "$TMP"
A="--benchmarks=fillrandom,overwrite,readrandom --num=1000000 --value_size=100 --key_size=16 --sync=false --compression_type=none"
D="--benchmarks=fillrandom --num=10000 --value_size=100 --key_size=16 --sync=true --compression_type=none"
G="--benchmarks=fillrandom --num=200000 --value_size=100 --key_size=16 --commitlog_sync=group --writers=50 --group_window_ms=2 --compression_type=lz4"
for cfg in A D; do
  flags=${!cfg}
  for i in $(seq "$PAIRS"); do
    echo "== pair $i config $cfg: storage_bench $flags"
    $SB $flags --db="$TMP/sb" 2>&1 | grep -E "micros/op|rss"
    rm -rf "$TMP/dbb"
    echo "== pair $i config $cfg: db_bench $flags"
    $DB $flags --db="$TMP/dbb" 2>&1 | grep -E "micros/op"
  done
done
echo "== group commit, 50 writers: storage_bench $G"
$SB $G --db="$TMP/sb" 2>&1 | grep -E "micros/op|rss"
rm -rf "$TMP"
