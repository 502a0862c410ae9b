# shellcheck shell=bash disable=SC2154
# Sourced by bench/repair.sh and bench/incremental_repair.sh: their
# cluster and the divergence both repair. Before sourcing, set `root` (the
# checkout), `name` (the cluster's), `ips` (its three nodes' addresses),
# `n` (rows) and `threads`. Sets `d` (n / 100), `home` (a temporary
# CASSINI_HOME, removed at exit with the cluster), `bin`, `cluster` and
# `all` (the three addresses, comma-separated); defines stress, tool and
# repair_setup_diverge.
d=$((n / 100))
home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
export CASSINI_HOME="$home"
bin="${BIN_DIR:-$root/build/release/node}"
export CASSINI_BIN_DIR="$(dirname "$bin")"
cluster="$root/scripts/cluster"
trap '"$cluster" -C "$name" remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
all="${ips[0]},${ips[1]},${ips[2]}"
stress() { "$bin/cassini-stress" "$@"; }
tool() { "$bin/cassini-tool" -h "$1" "${@:2}"; }

# repair_setup_diverge SETTLE: 3 nodes, RF 3, hinted handoff off; n rows
# of 100-byte values written at ALL; node3 stopped while d of them are
# rewritten at ONE; node3 back, then SETTLE seconds for gossip to see it.
repair_setup_diverge() {
  "$cluster" create "$name" -n 3 --base-ip "${ips[0]}" \
    -c gossip_interval=250ms -c hinted_handoff_enabled=false -s >/dev/null
  echo "== $n rows at ALL"
  stress write n="$n" cl=ALL -rate threads="$threads" -col size=100 \
    -node "$all" -schema "replication(factor=3)" |
    grep -E "Op rate|Total errors" || true
  "$cluster" -C "$name" node node3 stop >/dev/null
  sleep 3
  echo "== node3 down: $d rows rewritten at ONE"
  stress write n="$d" cl=ONE -rate threads="$threads" -col size=100 \
    -node "${ips[0]},${ips[1]}" | grep -E "Op rate|Total errors" || true
  "$cluster" -C "$name" node node3 start >/dev/null
  sleep "$1"
}
