#!/usr/bin/env bash
# B3 of notes/perf-baselines.md: one cassinid (RF 1, CL ONE, commitlog
# periodic 1 s ~ AOF everysec) against one redis-server (appendfsync
# everysec), same machine, same run: 50 connections, one request in flight
# each, 100-byte values.
#
#   bench/stress_vs_redis.sh [build dir (build/gcc)] [n (200000)] [depth (1)]
#
# depth P > 1 keeps P requests in flight per connection: redis-benchmark -P P
# against cassini-stress -rate threads=50*P -mode connectionsPerHost=50.
#
# Prints both tools' own output, then a table of cassini/redis ratios for
# ops/s and p99. Starts cassinid on 127.0.8.1 (ports 9042/7000/7199) and
# redis-server on 127.0.0.1:16379, and stops both on exit, whatever happens.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build/gcc}" && pwd)"
n="${2:-200000}"
depth="${3:-1}"
addr=127.0.8.1
redis_port=16379
clients=50
size=100

cassinid="$build/node/cassinid"
stress="$build/node/cassini-stress"
for b in "$cassinid" "$stress" redis-server redis-benchmark; do
	command -v "$b" >/dev/null || { echo "missing $b" >&2; exit 2; }
done

tmp="$(mktemp -d /tmp/stress_vs_redis.XXXXXX)"
node_pid=""
cleanup() {
	if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
		kill "$node_pid" 2>/dev/null || true
		wait "$node_pid" 2>/dev/null || true
	fi
	if [ -f "$tmp/redis.pid" ]; then
		rpid="$(cat "$tmp/redis.pid")"
		kill "$rpid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$rpid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# ---- cassinid ----------------------------------------------------------------
mkdir -p "$tmp/node/conf"
cat >"$tmp/node/conf/node.yaml" <<EOF
cluster_name: 'StressBench'
listen_address: $addr
endpoint_snitch: GossipingPropertyFileSnitch
commitlog_sync: periodic
commitlog_sync_period: 1000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$addr"
EOF
printf 'dc=dc1\nrack=rack1\n' >"$tmp/node/conf/rackdc.properties"
(cd "$tmp/node" && exec "$cassinid" -c conf >/dev/null 2>"$tmp/node/stderr.txt") &
node_pid=$!
for _ in $(seq 200); do
	grep -q "CQL clients on" "$tmp/node/logs/system.log" 2>/dev/null && break
	kill -0 "$node_pid" 2>/dev/null || { cat "$tmp/node/stderr.txt" >&2; exit 1; }
	sleep 0.1
done
grep -q "CQL clients on" "$tmp/node/logs/system.log" ||
	{ echo "cassinid did not start" >&2; exit 1; }

# ---- redis-server ------------------------------------------------------------
mkdir -p "$tmp/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --protected-mode yes \
	--appendonly yes --appendfsync everysec --save "" --dir "$tmp/redis" \
	--pidfile "$tmp/redis.pid" --daemonize yes >/dev/null
for _ in $(seq 100); do
	redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
	sleep 0.1
done

# ---- runs --------------------------------------------------------------------
# Each pair back to back (SET then INSERT, GET then SELECT): on a shared
# machine the load of other work drifts, and only adjacent runs compare.
run_redis() {
	echo "== redis-benchmark -h 127.0.0.1 -p $redis_port -c $clients -n $n -d $size -r 1000000 -P $depth -t $1 --csv"
	redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$clients" -n "$n" \
		-d "$size" -r 1000000 -P "$depth" -t "$1" --csv |
		tee -a "$tmp/redis.csv"
}

threads=$((clients * depth))
run_stress() {
	echo "== cassini-stress $1 n=$n -rate threads=$threads -mode connectionsPerHost=$clients -col size=$size -node $addr"
	"$stress" "$1" "n=$n" -rate "threads=$threads" \
		-mode "connectionsPerHost=$clients" -col "size=$size" \
		-node "$addr" | tee "$tmp/$1.txt"
}
run_redis set
run_stress write
run_redis get
run_stress read

# ---- table -------------------------------------------------------------------
redis_field() { # test column
	awk -F'","' -v t="$1" -v c="$2" '
		NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); col[h] = i } }
		{ name = $1; gsub(/"/, "", name) }
		name == t { v = $col[c]; gsub(/"/, "", v); print v }' "$tmp/redis.csv"
}
stress_field() { # file label
	awk -F: -v l="$2" 'index($0, l) == 1 { split($2, a, " "); print a[1] }' "$tmp/$1.txt"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

rs_ops=$(redis_field SET rps); rs_p99=$(redis_field SET p99_latency_ms)
rg_ops=$(redis_field GET rps); rg_p99=$(redis_field GET p99_latency_ms)
cw_ops=$(stress_field write "Op rate"); cw_p99=$(stress_field write "Latency 99th")
cr_ops=$(stress_field read "Op rate"); cr_p99=$(stress_field read "Latency 99th")

echo
echo "== B3: $clients connections, $depth in flight each, $size-byte values, n=$n"
printf '%-22s %12s %12s %8s %10s %10s %8s\n' "operation" "redis op/s" \
	"cassini op/s" "ratio" "redis p99" "cass. p99" "ratio"
printf '%-22s %12.0f %12.0f %8s %10.3f %10.3f %8s\n' "SET vs INSERT" \
	"$rs_ops" "$cw_ops" "$(ratio "$cw_ops" "$rs_ops")" "$rs_p99" "$cw_p99" \
	"$(ratio "$cw_p99" "$rs_p99")"
printf '%-22s %12.0f %12.0f %8s %10.3f %10.3f %8s\n' "GET vs SELECT by key" \
	"$rg_ops" "$cr_ops" "$(ratio "$cr_ops" "$rg_ops")" "$rg_p99" "$cr_p99" \
	"$(ratio "$cr_p99" "$rg_p99")"
echo "(targets: ops/s ratio >= 0.6, aim 0.9; p99 ratio <= 2)"
