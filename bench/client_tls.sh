#!/usr/bin/env bash
# Client TLS against plaintext on one node, in the same run: a node with
# client_encryption_options `optional: true` serves plain CQL and TLS on
# the same port, so cassini-stress measures both against the same process
# and data, plaintext and TLS rounds interleaved (writes, then reads;
# ROUNDS times, op rates summed). The TLS connections verify the node's
# certificate (P-256, TLS 1.3, the suite OpenSSL picks). Every run starts
# with the memtable flushed and no compaction pending, and the rounds
# alternate which of the two goes first: otherwise the second run of each
# pair pays for compacting the first one's data (seen: 0.61 instead of
# 0.8 on writes).
#
# Usage: bench/client_tls.sh [N] [THREADS] [BUILD] [ROUNDS]  (defaults
# 100000 50 build/release 2). The node runs on 127.0.91.50 (BENCH_IP) under a
# temporary directory, removed at the end. Run it under the shared test
# lock on a shared machine (flock /tmp/cassini-tests.lock ...).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-100000}"
threads="${2:-50}"
bin="$root/${3:-build/release}"
rounds="${4:-2}"
ip="${BENCH_IP:-127.0.91.50}"
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$home"' EXIT

ssl() { openssl "$@" >/dev/null 2>&1; }
cd "$home"
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca
ssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout node.key -out node.csr -subj /CN=bench-node
echo "subjectAltName=IP:$ip" >node.ext
ssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
	-out node.crt -days 2 -extfile node.ext
cat node.key node.crt >node.pem
mkdir -p node/conf
cat >node/conf/node.yaml <<YAML
cluster_name: 'bench'
listen_address: $ip
rpc_address: $ip
endpoint_snitch: GossipingPropertyFileSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$ip"
client_encryption_options:
  enabled: true
  optional: true
  keystore: $home/node.pem
YAML
printf 'dc=dc1\nrack=rack1\n' >node/conf/rackdc.properties
"$bin/node/cassinid" -c node/conf >node/stdout.txt 2>&1 &
pid=$!
for _ in $(seq 1 300); do
	grep -q "CQL clients on" node/logs/system.log 2>/dev/null && break
	sleep 0.2
done
grep -q "CQL clients on" node/logs/system.log

stress() { "$bin/node/cassini-stress" "$@" -rate threads="$threads" \
	-col size=100 -node "$ip"; }
field() { awk -F': *' '$1 ~ "Op rate" {print $2}' | awk '{print $1}'; }
tls=(-transport "truststore=$home/ca.pem")
tool() { "$bin/node/cassini-tool" -c node/conf "$@"; }
# Flushed, and no compaction running or due.
settle() {
	tool flush >/dev/null
	for _ in $(seq 1 600); do
		tool compactionstats | grep -q "^pending tasks: 0" && return
		sleep 0.5
	done
}
run() { settle; stress "$@" | field; }
stress write n=1000 cl=ONE -schema "replication(factor=1)" >/dev/null
pw=0 tw=0 pr=0 tr=0
for i in $(seq 1 "$rounds"); do
	if [ $((i % 2)) = 1 ]; then
		a=$(run write n="$n" cl=ONE)
		b=$(run write n="$n" cl=ONE "${tls[@]}")
		c=$(run read n="$n" cl=ONE)
		d=$(run read n="$n" cl=ONE "${tls[@]}")
	else
		b=$(run write n="$n" cl=ONE "${tls[@]}")
		a=$(run write n="$n" cl=ONE)
		d=$(run read n="$n" cl=ONE "${tls[@]}")
		c=$(run read n="$n" cl=ONE)
	fi
	echo "round: write plain $a tls $b, read plain $c tls $d" >&2
	pw=$(awk -v x="$pw" -v y="$a" 'BEGIN {print x + y}')
	tw=$(awk -v x="$tw" -v y="$b" 'BEGIN {print x + y}')
	pr=$(awk -v x="$pr" -v y="$c" 'BEGIN {print x + y}')
	tr=$(awk -v x="$tr" -v y="$d" 'BEGIN {print x + y}')
done
printf '%-28s %12s %12s\n' "1 node, CL ONE, $threads in flight" \
	"write op/s" "read op/s"
awk -v a="$pw" -v b="$tw" -v c="$pr" -v d="$tr" -v k="$rounds" 'BEGIN {
  printf "%-28s %12.0f %12.0f\n", "plaintext", a / k, c / k
  printf "%-28s %12.0f %12.0f\n", "client TLS", b / k, d / k
  printf "ratio write %.2f, read %.2f\n", b / a, d / c }'
