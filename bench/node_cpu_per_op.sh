#!/usr/bin/env bash
# Node CPU per operation: one cassinid (RF 1, CL ONE, commitlog periodic),
# cassini-stress writes then reads with 50 connections, one request in
# flight each. Prints ops/s and the node's own CPU time (user + system,
# from /proc) per operation for each phase. CPU per op is steadier than
# throughput on a shared machine: use it to A/B two builds, run
# interleaved, same session.
#
#   bench/node_cpu_per_op.sh [build dir (build/gcc)] [n (200000)] [label]
#
# Starts cassinid on 127.0.8.1 (ports 9042/7000/7199) and stops it on exit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build/gcc}" && pwd)"
n="${2:-200000}"
label="${3:-$(basename "$build")}"
addr=127.0.8.1
tmp="$(mktemp -d /tmp/node_cpu_per_op.XXXXXX)"
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
mkdir -p "$tmp/conf"
cat >"$tmp/conf/node.yaml" <<YAML
cluster_name: 'CpuPerOp'
listen_address: $addr
commitlog_sync: periodic
commitlog_sync_period: 1000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$addr"
YAML
printf 'dc=dc1\nrack=rack1\n' >"$tmp/conf/rackdc.properties"
(cd "$tmp" && exec "$build/node/cassinid" -c conf >"$tmp/log" 2>&1) &
pid=$!
for _ in $(seq 100); do
	grep -q "CQL clients on" "$tmp/log" 2>/dev/null && break
	sleep 0.1
done
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
for phase in write read; do
	t0=$(ticks)
	"$build/node/cassini-stress" "$phase" "n=$n" -rate threads=50 \
		-mode connectionsPerHost=50 -col size=100 -node "$addr" \
		>"$tmp/$phase.out" 2>&1
	t1=$(ticks)
	ops=$(awk -F: '/Op rate/ {gsub(/[^0-9.]/, "", $2); print $2; exit}' \
		"$tmp/$phase.out")
	us=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$n" \
		'BEGIN {printf "%.1f", d * 1e6 / hz / n}')
	echo "$label $phase: $ops op/s, node CPU $us us/op"
done
