#!/usr/bin/env bash
# Internode TLS against plaintext: 3 nodes, RF 3, QUORUM writes then
# reads with cassini-stress, on a plaintext cluster (the reference) and on
# one created with `scripts/cluster create --tls all --internode-only`
# (every internode connection TLS 1.3 with mutual authentication; clients
# plaintext so only the internode cost is measured). Both clusters run
# side by side (the idle one only gossips) and the measurements
# interleave: ROUNDS rounds of write plain, write TLS, read plain, read
# TLS, alternating which cluster goes first, each run started with the
# memtables flushed and no compaction pending; op rates summed over the
# rounds, so a burst of load from elsewhere on a shared machine hits both
# sides alike. Target: TLS/plaintext throughput >= 0.7.
#
# Usage: bench/internode_tls.sh [N] [THREADS] [BUILD] [PLAIN_IP TLS_IP]
#        [ROUNDS]
# (defaults 100000 50 build/release 127.0.93.1 127.0.94.1 3): each
# cluster's three nodes take the address given and the next two, under a
# temporary CASSINI_HOME, removed at the end. Run it under the shared test
# lock on a shared machine (flock /tmp/cassini-tests.lock ...).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-100000}"
threads="${2:-50}"
export CASSINI_BIN_DIR="$root/${3:-build/release}"
plain_ip="${4:-127.0.93.1}"
tls_ip="${5:-127.0.94.1}"
rounds="${6:-3}"
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home"
cluster() { /usr/bin/python3 "$root/scripts/cluster.py" "$@"; }
trap 'cluster -C plain remove >/dev/null 2>&1 || true;
      cluster -C tls remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
stress() { "$CASSINI_BIN_DIR/node/cassini-stress" "$@"; }
field() { awk -F': *' -v k="$1" '$1 ~ k {print $2}' | awk '{print $1}'; }
nodes_of() { # first-address: the three nodes' addresses, comma-separated
	local prefix="${1%.*}." last="${1##*.}"
	echo "$1,$prefix$((last + 1)),$prefix$((last + 2))"
}
# tool NAME ARGS: cassini-tool on each node of cluster NAME, through the
# script (a --tls cluster's admin port speaks TLS)
tool_all() {
	local name=$1
	shift
	for node in node1 node2 node3; do
		cluster -C "$name" node "$node" tool "$@"
	done
}
# Flushed, and no compaction running or due, on every node.
settle() {
	tool_all "$1" flush >/dev/null
	for _ in $(seq 1 600); do
		tool_all "$1" compactionstats | grep -q "^pending tasks: [1-9]" ||
			return 0
		sleep 0.5
	done
}

cluster create plain -n 3 --base-ip "$plain_ip" -s >/dev/null
cluster create tls -n 3 --base-ip "$tls_ip" --tls all --internode-only \
	-s >/dev/null
declare -A ips=([plain]="$(nodes_of "$plain_ip")" [tls]="$(nodes_of "$tls_ip")")
for c in plain tls; do # the schema, and a warm-up
	stress write n=1000 cl=QUORUM -col size=100 -node "${ips[$c]}" \
		-schema "replication(factor=3)" >/dev/null ||
		stress write n=1000 cl=QUORUM -col size=100 \
			-node "${ips[$c]}" >/dev/null
done
run() { # cluster op: its op rate (a failed run is said and tried again)
	local out
	for _ in 1 2 3; do
		settle "$1"
		if out=$(stress "$2" n="$n" cl=QUORUM -rate threads="$threads" \
			-col size=100 -node "${ips[$1]}" 2>&1); then
			echo "$out" | field "Op rate"
			return
		fi
		echo "$1 $2 failed, again: $(echo "$out" | tail -3)" >&2
	done
	return 1
}
declare -A sum=([plain_write]=0 [tls_write]=0 [plain_read]=0 [tls_read]=0)
for i in $(seq 1 "$rounds"); do
	order="plain tls"
	[ $((i % 2)) = 0 ] && order="tls plain"
	line="round $i:"
	for op in write read; do
		for c in $order; do
			r=$(run "$c" "$op")
			sum[${c}_$op]=$(awk -v x="${sum[${c}_$op]}" -v y="$r" \
				'BEGIN {print x + y}')
			line="$line $op $c $r"
		done
	done
	echo "$line" >&2
done
cluster -C plain node node1 tool internodeconnections >&2
cluster -C tls node node1 tool internodeconnections >&2
printf '%-26s %12s %12s\n' "3 nodes RF3 QUORUM" "write op/s" "read op/s"
awk -v pw="${sum[plain_write]}" -v pr="${sum[plain_read]}" \
	-v tw="${sum[tls_write]}" -v tr="${sum[tls_read]}" -v k="$rounds" 'BEGIN {
  printf "%-26s %12.0f %12.0f\n", "plaintext", pw / k, pr / k
  printf "%-26s %12.0f %12.0f\n", "internode TLS (all)", tw / k, tr / k
  printf "ratio write %.2f, read %.2f (target >= 0.70)\n", tw / pw, tr / pr }'
