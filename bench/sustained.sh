#!/usr/bin/env bash
# Storage under sustained load (issue 31), one node, per compaction
# strategy: cassini-stress mixed (writes, reads, 10% deletes, a share of
# the writes with a TTL) for MINUTES, with memtable_heap_space small enough
# that the data written passes 20x it. Reported per minute:
#
#   op/s, p50/p99 (the client's, all operations), SSTables per read mean
#   and p50/p99 (the node's histogram over that minute; its buckets are
#   exact from 0 to 7, then powers of two from 15), live SSTables, pending
#   compactions, disk (live SSTables' bytes) against the live data (keys
#   written, not deleted and not expired, times key + value bytes), and
#   write amplification so far (bytes written by flushes and compactions
#   over the bytes ingested: key + value per write, key per delete).
#
# Strategies: STCS and LCS tables get TTL_SHARE percent of TTL'd writes,
# the TWCS table every write TTL'd (a time-series table); all have
# gc_grace_seconds GC_GRACE and tombstone_compaction_interval GC_GRACE so
# tombstones may go within the run. Then, when /usr/bin/db_bench is
# there (Debian's rocksdb-tools: `apt-get install -y rocksdb-tools`, for
# this bench only, not a dependency of the project; without it the
# RocksDB part is skipped), the same mix against RocksDB
# (randomwithverify: reads, writes and deletes, leveled compaction, no
# TTL) for MINUTES, with its write buffer the node's flush size: its
# write amplification (flush + compaction bytes over user bytes, from its
# compaction stats) and space amplification (its files over its live
# keys' bytes, counted by a full scan at the end; its values are made
# incompressible, --compression_ratio=1, as cassini-stress's are).
#
# Usage: bench/sustained.sh [MINUTES] [KEYS]     (defaults 3, 4000000)
#   BIN_DIR     build directory (default build/release)
#   STRATEGIES  default "STCS LCS TWCS"
#   MEMTABLE    memtable_heap_space (default 16MiB: flushes at ~5 MiB)
#   THREADS     requests in flight (default 32)
#   RATIO       default write=5,read=4,delete=1
#   TTL, TTL_SHARE, GC_GRACE   default 60 s, 20 %, 60 s
#   LCS_MB      LCS sstable_size_in_mb (default 16: 160 makes no levels
#               in a few minutes of data)
# SETTLE=M: after the writes, M minutes with no writes (a sample a
#   minute: SSTables, pending and tombstone compactions, disk against live
#   data; the compactor looks for tombstone compactions every 5 minutes,
#   so M >= 7 sees one look past the last deletes' gc_grace), then a
#   minute of reads (SSTables per read once caught up), then a major
#   compaction (disk/live with no garbage: the format's floor). Live is
#   exact with TTL_SHARE=0.
# LOCK_HELD=1: the caller holds the lock already; DB_BENCH=0: no RocksDB;
# REPORT=1: only the tables again, from the samples in OUT.
# The node runs on 127.0.76.3 under a temporary CASSINI_HOME, holding
# /tmp/cassini-tests.lock for each strategy's run; raw samples are kept
# in $OUT (default /tmp/sustained-<time>).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
minutes="${1:-3}"
keys="${2:-4000000}"
bin="$(cd "${BIN_DIR:-$root/build/release}" && pwd)"
strategies="${STRATEGIES-STCS LCS TWCS}" # empty: RocksDB only
memtable="${MEMTABLE:-16MiB}"
threads="${THREADS:-32}"
ratio="${RATIO:-write=5,read=4,delete=1}"
ttl="${TTL:-60}"
ttl_share="${TTL_SHARE:-20}"
gc="${GC_GRACE:-60}"
lcs_mb="${LCS_MB:-16}"
settle="${SETTLE:-0}"
out="${OUT:-/tmp/sustained-$(date +%Y%m%d-%H%M%S)}"
ip=127.0.76.3
mport=9576
mkdir -p "$out"
cluster="$root/scripts/cluster"
if [ -z "${STEP:-}" ]; then
  home="$(mktemp -d /tmp/cassini-bench.XXXXXX)"
  export CASSINI_HOME="$home" CASSINI_BIN_DIR="$bin"
  trap '"$cluster" -C su remove >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
else
  home=$CASSINI_HOME
fi

# One strategy's run, under the lock (this script again).
if [ "${STEP:-}" = run ]; then
  s=$3 dir=$4
  "$cluster" create su -n 1 --base-ip "$ip" -c memtable_heap_space="$memtable" \
    -c metrics_port=$mport >/dev/null
  "$cluster" -C su start >/dev/null
  case $s in
    STCS) comp="'class': 'SizeTieredCompactionStrategy'"; share=$ttl_share ;;
    LCS) comp="'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': '$lcs_mb'"
         share=$ttl_share ;;
    TWCS) comp="'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'MINUTES', 'compaction_window_size': '1'"
          share=100 ;;
  esac
  /usr/bin/python3 - "$ip" "$comp" "$gc" <<'PYEOF'
import sys
from cassandra.cluster import Cluster
ip, comp, gc = sys.argv[1:]
c = Cluster([ip], protocol_version=4)
s = c.connect()
s.execute("CREATE KEYSPACE cassini_stress WITH replication = "
          "{'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE cassini_stress.standard1 (key blob PRIMARY KEY, "
          f"c0 blob) WITH compaction = {{{comp}, "
          f"'tombstone_compaction_interval': '{gc}'}} "
          f"AND gc_grace_seconds = {gc}")
c.shutdown()
PYEOF
  data="$home/clusters/su/node1/data"
  sample() { # index
    curl -s "http://$ip:$mport/metrics" | grep -E \
      'cassini_stress|cassandra_compaction_pending_tasks' >"$dir/m$1.txt"
    du -sb "$data" | awk '{print $1}' >"$dir/du$1.txt"
  }
  sample 0
  "$bin/node/cassini-stress" mixed "ratio($ratio)" n="$keys" \
    duration="${minutes}m" ttl="$ttl" ttl_share="$share" -log interval=60 \
    -rate threads="$threads" -col size=100 -node "$ip" >"$dir/stress.txt" &
  pid=$!
  for i in $(seq "$minutes"); do
    sleep 60
    sample "$i"
  done
  wait "$pid" || true
  if [ "$settle" -gt 0 ]; then
    # No more writes, SETTLE minutes: a sample a minute (compaction
    # catching up, then the tombstone compactions of the compactor's
    # 5-minute look once the last deletes pass gc_grace), the seconds
    # until pending compactions first read 0 (twice, 10 s apart), then a
    # minute of reads over the same keys, then a major compaction: what
    # the same live data takes with no garbage left (the format's floor).
    end=$(($(date +%s) + settle * 60)) zero=0 t0=$(date +%s) i=0
    next=$((t0 + 60))
    : >"$dir/settle_s.txt"
    while [ "$(date +%s)" -lt "$end" ]; do
      sleep 10
      p=$(curl -s "http://$ip:$mport/metrics" |
        awk '/^cassandra_compaction_pending_tasks/ {s += $2} END {print s + 0}')
      if [ "$p" = 0 ]; then zero=$((zero + 1)); else zero=0; fi
      if [ "$zero" = 2 ] && [ ! -s "$dir/settle_s.txt" ]; then
        echo $(($(date +%s) - t0)) >"$dir/settle_s.txt"
      fi
      if [ "$(date +%s)" -ge "$next" ]; then
        i=$((i + 1)) next=$((next + 60))
        sample "w$i"
      fi
    done
    [ -s "$dir/settle_s.txt" ] || echo "-" >"$dir/settle_s.txt"
    sample s0
    # deleted keys count as NotFound errors: its exit status says nothing
    "$bin/node/cassini-stress" read n="$keys" duration=60 \
      -rate threads="$threads" -col size=100 -node "$ip" \
      >"$dir/settle-read.txt" || true
    sample s1
    uptime >"$dir/uptime-settle.txt"
    # cassini-tool gives up after 10 s without an answer (compact sends
    # no progress) while the node goes on: wait for the compaction count
    # to move, then for the disk to stay put
    count() {
      curl -s "http://$ip:$mport/metrics" | awk \
        '/^cassini_table_compactions_total\{keyspace="cassini_stress"/ {print $2}'
    }
    c0=$(count)
    n=$(curl -s "http://$ip:$mport/metrics" | awk \
      '/^cassandra_table_live_sstables\{keyspace="cassini_stress"/ {print $2}')
    "$cluster" -C su node node1 tool compact cassini_stress standard1 \
      >"$dir/major.txt" 2>&1 || true
    # (fewer than 2 SSTables: nothing to compact, nothing to wait for)
    for _ in $(seq $((${n%.*} >= 2 ? 120 : 0))); do
      [ "$(count)" != "$c0" ] && break
      sleep 5
    done
    sample major
  fi
  uptime >"$dir/uptime.txt"
  "$cluster" -C su remove >/dev/null
  exit 0
fi

# Per-minute table from a strategy's samples.
report() { # dir strategy
  /usr/bin/python3 - "$1" "$2" "$ratio" <<'PYEOF'
import re, sys, os
d, strat, ratio = sys.argv[1:]
mix = dict(kv.split("=") for kv in ratio.split(","))
w, r, de = (int(mix.get(k, 0)) for k in ("write", "read", "delete"))
lab = 'keyspace="cassini_stress",table="standard1"'
def metrics(i):
    m, b = {}, {}
    p = f"{d}/m{i}.txt"
    if not os.path.exists(p):
        return None
    for line in open(p):
        mt = re.match(r'(\w+)\{([^}]*)\} (\S+)', line) or \
            re.match(r'(\w+)() (\S+)', line)
        if not mt:
            continue
        name, labels, v = mt.groups()
        if name == "cassandra_table_sstables_per_read_bucket" and \
                labels.startswith(lab):
            le = re.search(r'(?:^|,)le="([^"]+)"', labels).group(1)
            b[float("inf") if le == "+Inf" else float(le)] = float(v)
        elif labels in ("", lab):
            m[name] = float(v)
    m["buckets"] = b
    return m
def quant(b0, b1, q):
    les = sorted(b1)
    d = [b1[k] - b0.get(k, 0) for k in les]
    tot = d[-1] if d else 0
    if tot <= 0:
        return "-"
    for k, c in zip(les, d):
        if c >= q * tot:
            return "%g" % k
    return "inf"
lines = [l.split() for l in open(f"{d}/stress.txt")
         if re.match(r'\s*\d+\.\ds ', l)]
# the last line may be the drain of the requests in flight at the end
if len(lines) >= 2 and float(lines[-1][0][:-1]) - \
        float(lines[-2][0][:-1]) < 1:
    lines.pop()
ms = [metrics(i) for i in range(len(lines) + 1)]
print(f"{strat}: min  op/s   p50ms  p99ms  sst/read mean p50 p99  sstables "
      "pending  disk MB  live MB  disk/live  WA")
def mean(m0, m1):
    k = "cassandra_table_sstables_per_read_"
    n = m1.get(k + "count", 0) - m0.get(k + "count", 0)
    return (m1.get(k + "sum", 0) - m0.get(k + "sum", 0)) / n if n else 0
tot_ops = 0
for i, l in enumerate(lines, 1):
    m0, m1 = ms[i - 1], ms[i] if i < len(ms) else None
    ops = int(l[1]); rate = float(l[2]); p50, p99 = l[3], l[4]
    live = int(l[6]) if len(l) > 6 else 0
    if m1 is None:
        print(f"{strat}: {i:3d} {rate:7.0f} {p50:>6} {p99:>6}   (no sample)")
        continue
    ingest = ops * (w * 110 + de * 10) / (w + r + de)
    wr = m1.get("cassandra_table_bytes_flushed_total", 0) + \
        m1.get("cassandra_table_compaction_bytes_written_total", 0)
    disk = m1.get("cassandra_table_live_disk_space_bytes", 0) / 2**20
    livemb = live * 110 / 2**20
    print(f"{strat}: {i:3d} {rate:7.0f} {p50:>6} {p99:>6}  "
          f"{mean(m0, m1):8.2f} "
          f"{quant(m0['buckets'], m1['buckets'], .5):>7} "
          f"{quant(m0['buckets'], m1['buckets'], .99):>4} "
          f"{m1.get('cassandra_table_live_sstables', 0):8.0f} "
          f"{m1.get('cassandra_compaction_pending_tasks', 0):7.0f} "
          f"{disk:8.1f} {livemb:8.1f} "
          f"{disk / livemb if livemb else 0:9.2f} "
          f"{wr / ingest if ingest else 0:5.2f}")
if len(lines) >= 2:
    print(f"{strat}: last minute / first minute throughput "
          f"{float(lines[-1][2]) / float(lines[0][2]):.2f} (target >= 0.7)")
def tomb(m):
    return m.get("cassini_table_tombstone_compactions_total", 0)
live_end = int(lines[-1][6]) if lines and len(lines[-1]) > 6 else 0
ws = [(i, metrics(f"w{i}")) for i in range(1, 1000)
      if os.path.exists(f"{d}/mw{i}.txt")]
if ws:
    print(f"{strat}: settle min  sstables pending  compactions "
          "tombstone  disk MB  disk/live")
    livemb = live_end * 110 / 2**20
    for i, m in ws:
        disk = m.get("cassandra_table_live_disk_space_bytes", 0) / 2**20
        print(f"{strat}: {i:11d} "
              f"{m.get('cassandra_table_live_sstables', 0):9.0f} "
              f"{m.get('cassandra_compaction_pending_tasks', 0):7.0f} "
              f"{m.get('cassini_table_compactions_total', 0):12.0f} "
              f"{tomb(m):9.0f} {disk:8.1f} "
              f"{disk / livemb if livemb else 0:10.2f}")
s0, s1 = metrics("s0"), metrics("s1")
if s0 and s1 and lines:
    # live: the keys live at the end of the writes (exact when no write
    # has a TTL: TTL_SHARE=0)
    live = int(lines[-1][6]) if len(lines[-1]) > 6 else 0
    livemb = live * 110 / 2**20
    disk = s1.get("cassandra_table_live_disk_space_bytes", 0) / 2**20
    secs = open(f"{d}/settle_s.txt").read().strip()
    print(f"{strat}: pending first 0 at {secs} s after the writes; "
          f"after the settle: "
          f"{s1.get('cassandra_table_live_sstables', 0):.0f} sstables, "
          f"pending {s1.get('cassandra_compaction_pending_tasks', 0):.0f}, "
          f"disk {disk:.1f} MB / live {livemb:.1f} MB = "
          f"{disk / livemb if livemb else 0:.2f}; a minute of reads: "
          f"sst/read mean {mean(s0, s1):.2f} p50 "
          f"{quant(s0['buckets'], s1['buckets'], .5)} p99 "
          f"{quant(s0['buckets'], s1['buckets'], .99)}")
    mj = metrics("major")
    if mj and mj.get("cassini_table_compactions_total") == \
            s1.get("cassini_table_compactions_total"):
        print(f"{strat}: the major compaction did not end in time")
    elif mj:
        disk = mj.get("cassandra_table_live_disk_space_bytes", 0) / 2**20
        print(f"{strat}: after a major compaction: "
              f"{mj.get('cassandra_table_live_sstables', 0):.0f} sstables, "
              f"disk {disk:.1f} MB = {disk / livemb if livemb else 0:.2f}x "
              "the live data (the format's floor)")
for f in ("uptime-settle.txt", "uptime.txt"):
    if os.path.exists(f"{d}/{f}"):
        print(f"{strat}: {f[:-4]}: {open(f'{d}/{f}').read().strip()}")
PYEOF
}

if [ -n "${REPORT:-}" ]; then # the tables again from $OUT's samples
  for s in $strategies; do report "$out/$s" "$s"; done
  exit 0
fi
echo "== $minutes min per strategy, $keys keys, ratio($ratio), TTL ${ttl}s," \
  "memtable_heap_space $memtable, $threads in flight; samples in $out"
for s in $strategies; do
  mkdir -p "$out/$s"
  if [ "${LOCK_HELD:-0}" = 1 ]; then # the caller holds it
    STEP=run "$0" "$minutes" "$keys" "$s" "$out/$s"
  else
    STEP=run flock /tmp/cassini-tests.lock "$0" "$minutes" "$keys" "$s" "$out/$s"
  fi
  report "$out/$s" "$s" | tee "$out/$s/report.txt" || true
done

if [ -x /usr/bin/db_bench ] && [ "${DB_BENCH:-1}" = 1 ]; then
  # RocksDB: the same key space, value size and mix (reads 40%, deletes
  # 10%, the rest writes), leveled, its memtable the node's flush size
  # (memtable_heap_space x 0.33).
  mem=$(numfmt --from=iec-i "${memtable%B}")
  wb=$((mem * 33 / 100))
  rdb="$out/rocksdb"
  rm -rf "$rdb"
  echo
  echo "== RocksDB db_bench randomwithverify, $minutes min"
  /usr/bin/db_bench --benchmarks=randomwithverify,stats,levelstats \
    --db="$rdb" --num="$keys" --numdistinct="$keys" --value_size=100 \
    --key_size=10 --readwritepercent=40 --deletepercent=10 \
    --duration=$((minutes * 60)) --write_buffer_size="$wb" \
    --compression_type=lz4 --compression_ratio=1 --threads=1 --stats_interval_seconds=60 \
    --statistics=1 >"$out/rocksdb.txt" 2>&1 || true
  # its live entries, by a scan (randomwithverify writes 3 keys a put)
  /usr/bin/db_bench --benchmarks=readseq --use_existing_db=1 --db="$rdb" \
    --num=$((keys * 3)) --reads=$((keys * 3)) --key_size=10 \
    --value_size=100 >"$out/rocksdb-scan.txt" 2>&1 || true
  files=$(du -sb "$rdb" | awk '{print $1}')
  echo "rocksdb: uptime: $(uptime)"
  /usr/bin/python3 - "$out/rocksdb.txt" "$out/rocksdb-scan.txt" "$files" <<'PYEOF'
import re, sys
run, scan, files = open(sys.argv[1]).read(), open(sys.argv[2]).read(), \
    int(sys.argv[3])
def stat(name):
    m = re.search(re.escape(name) + r" COUNT : (\d+)", run)
    return int(m.group(1)) if m else 0
user = stat("rocksdb.bytes.written")
flush, comp = stat("rocksdb.flush.write.bytes"), \
    stat("rocksdb.compact.write.bytes")
m = re.search(r"randomwithverify :.*", run)
print("rocksdb:", m.group(0) if m else "no result line")
m = re.search(r"readseq\s*:.*?(\d+) operations", scan)
live = int(m.group(1)) * (10 + 1 + 100) if m else 0
print(f"rocksdb: user bytes {user}, flush {flush}, compaction {comp}: "
      f"write amplification {(flush + comp) / user if user else 0:.2f}")
print(f"rocksdb: files {files / 2**20:.1f} MB, live entries' bytes "
      f"{live / 2**20:.1f} MB: disk/live {files / live if live else 0:.2f}")
PYEOF
fi
