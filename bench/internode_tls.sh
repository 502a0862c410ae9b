#!/usr/bin/env bash
# Internode TLS against plaintext: 3 nodes, RF 3, QUORUM writes then
# reads with cassini-stress, first on a plaintext cluster (the reference),
# then on one created with `scripts/cluster create --tls all
# --internode-only` (every internode connection TLS 1.3 with mutual
# authentication; clients plaintext so only the internode cost is
# measured). Target: TLS/plaintext throughput >= 0.7.
#
# Usage: bench/internode_tls.sh [N] [THREADS] [BUILD] [PLAIN_IP TLS_IP]
# (defaults 100000 50 build/release 127.0.93.1 127.0.94.1): each cluster's
# three nodes take the address given and the next two, under a temporary
# CASSINI_HOME, removed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-100000}"
threads="${2:-50}"
export CASSINI_BIN_DIR="$root/${3:-build/release}"
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home"
cluster() { /usr/bin/python3 "$root/scripts/cluster.py" "$@"; }
trap 'cluster -C plain remove >/dev/null 2>&1 || true;
      cluster -C tls remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
stress() { "$CASSINI_BIN_DIR/node/cassini-stress" "$@"; }
field() { awk -F': *' -v k="$1" '$1 ~ k {print $2}' | awk '{print $1}'; }

plain_ip="${4:-127.0.93.1}"
tls_ip="${5:-127.0.94.1}"

run() { # name first-address create-flags...
	local name=$1 ip=$2
	shift 2
	cluster create "$name" -n 3 --base-ip "$ip" "$@" -s >/dev/null
	local prefix="${ip%.*}." last="${ip##*.}"
	local nodes="$ip,$prefix$((last + 1)),$prefix$((last + 2))"
	w=$(stress write n="$n" cl=QUORUM -rate threads="$threads" \
		-col size=100 -node "$nodes" -schema "replication(factor=3)" |
		field "Op rate")
	r=$(stress read n="$n" cl=QUORUM -rate threads="$threads" \
		-col size=100 -node "$nodes" | field "Op rate")
	# through the script: a --tls cluster's admin port speaks TLS
	cluster -C "$name" node node1 tool internodeconnections >&2
	cluster -C "$name" remove >/dev/null
	echo "$w $r"
}

read -r pw pr < <(run plain "$plain_ip")
read -r tw tr < <(run tls "$tls_ip" --tls all --internode-only)
printf '%-26s %12s %12s\n' "3 nodes RF3 QUORUM" "write op/s" "read op/s"
printf '%-26s %12s %12s\n' "plaintext" "$pw" "$pr"
printf '%-26s %12s %12s\n' "internode TLS (all)" "$tw" "$tr"
awk -v a="$tw" -v b="$pw" -v c="$tr" -v d="$pr" 'BEGIN {
  printf "ratio write %.2f, read %.2f (target >= 0.70)\n", a / b, c / d }'
