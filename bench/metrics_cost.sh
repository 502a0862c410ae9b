#!/usr/bin/env bash
# The cost of metrics on INSERT/SELECT throughput: cassini-stress write and
# read against one node of build A and one of build B, alternating A B A B
# (only adjacent runs compare on a shared machine), each with the metrics
# endpoint on (and scraped every second, as Prometheus would, a bit more
# often than its default) or off.
#
#   bench/metrics_cost.sh BUILD_A on|off BUILD_B on|off [n (200000)] [pairs (3)]
#
# e.g. the endpoint's cost:  bench/metrics_cost.sh build/rel off build/rel on
#      the counters' cost:   bench/metrics_cost.sh build/old off build/rel off
# Prints each run's op rates and the B/A ratio per pair. Uses 127.0.86.1
# (ports 9042/7000/7199, metrics 9500); stops everything on exit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 4 ] || { sed -n 2,13p "$0"; exit 2; }
build_a="$(cd "$1" && pwd)"; metrics_a="$2"
build_b="$(cd "$3" && pwd)"; metrics_b="$4"
n="${5:-200000}"; pairs="${6:-3}"
addr=127.0.86.1
tmp="$(mktemp -d /tmp/metrics_cost.XXXXXX)"
node_pid=""; scraper_pid=""
stop_node() {
	[ -n "$scraper_pid" ] && kill "$scraper_pid" 2>/dev/null || true
	wait "$scraper_pid" 2>/dev/null || true
	scraper_pid=""
	if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
		kill "$node_pid" 2>/dev/null || true
		wait "$node_pid" 2>/dev/null || true
	fi
	node_pid=""
}
trap 'stop_node; rm -rf "$tmp"' EXIT INT TERM

# run BUILD on|off LABEL: a fresh node, write then read, op rates appended
# to $tmp/rates as "LABEL write read".
run() {
	local build="$1" metrics="$2" label="$3" home="$tmp/node"
	rm -rf "$home"; mkdir -p "$home/conf"
	cat >"$home/conf/node.yaml" <<YAML
cluster_name: 'MetricsCost'
listen_address: $addr
endpoint_snitch: GossipingPropertyFileSnitch
commitlog_sync: periodic
commitlog_sync_period: 1000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$addr"
YAML
	[ "$metrics" = on ] && echo "metrics_port: 9500" >>"$home/conf/node.yaml"
	printf 'dc=dc1\nrack=rack1\n' >"$home/conf/rackdc.properties"
	(cd "$home" && exec "$build/node/cassinid" -c conf >/dev/null 2>"$home/stderr.txt") &
	node_pid=$!
	for _ in $(seq 300); do
		grep -q "CQL clients on" "$home/logs/system.log" 2>/dev/null && break
		sleep 0.1
	done
	if [ "$metrics" = on ]; then
		(while :; do
			curl -s -o /dev/null --max-time 5 "http://$addr:9500/metrics" || true
			sleep 1
		done) &
		scraper_pid=$!
	fi
	local rates=()
	for op in write read; do
		"$build/node/cassini-stress" "$op" "n=$n" -rate threads=50 \
			-mode connectionsPerHost=50 -col size=100 -node "$addr" \
			>"$tmp/$op.txt"
		rates+=("$(awk -F: 'index($0, "Op rate") == 1 { split($2, a, " "); print a[1] }' "$tmp/$op.txt")")
	done
	stop_node
	echo "$label ${rates[0]} ${rates[1]}" | tee -a "$tmp/rates"
}

for p in $(seq "$pairs"); do
	run "$build_a" "$metrics_a" "A($metrics_a)"
	run "$build_b" "$metrics_b" "B($metrics_b)"
done
echo
echo "pair  write B/A  read B/A"
awk 'NR % 2 == 1 { w = $2; r = $3 } NR % 2 == 0 { printf "%4d  %9.3f  %8.3f\n", NR / 2, $2 / w, $3 / r }' "$tmp/rates"
