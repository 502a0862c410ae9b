#!/usr/bin/python3
"""(A copy of the team's ../shared/tools/oracle_placement.py, kept in the
repository so tests run from a clean clone.)

Token / replica-placement oracle built on the installed DataStax Python
driver (Debian python3-cassandra 3.25).  Run it with /usr/bin/python3: the
`python3` first on PATH on this machine is a pyenv build without the driver.

It uses the driver's OWN code paths, i.e. exactly what a token-aware client
will compute:
  * cassandra.metadata.Murmur3Token.from_key  (cmurmur3 C ext, MIN_LONG->MAX_LONG)
  * cassandra.metadata.Metadata.rebuild_token_map + TokenMap.get_replicas
  * cassandra.metadata.{SimpleStrategy,NetworkTopologyStrategy}.make_token_replica_map
  * cassandra.query.Statement._key_parts_packed (composite partition keys)

stdin (JSON):
{
  "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",   (optional, default)
  "hosts": [ {"address": "127.0.0.1", "dc": "dc1", "rack": "r1",
              "tokens": ["-9223372036854775808", "0", ...]}, ...],
  "replication": {"class": "NetworkTopologyStrategy", "dc1": "3", "dc2": "2"}
              or {"class": "SimpleStrategy", "replication_factor": "3"},
  "keys":   ["hex of partition-key bytes", ...],          (optional)
  "composite_keys": [["hex comp1", "hex comp2"], ...],    (optional, compound PK)
  "tokens": ["123", -5, ...]                              (optional, raw tokens)
}
stdout (JSON):
{
  "ring": [{"token": "...", "owner": "addr"}, ...],          sorted ring
  "results": [{"input": ..., "routing_key": "hex", "token": "...",
               "replicas": ["addr", ...],                    driver order
               "replicas_by_dc": {"dc1": [...], ...}}, ...]
}
Tokens are printed as decimal strings (64-bit values do not survive JSON
readers that use doubles).

`--vectors` prints Murmur3 test vectors instead (no stdin needed).
"""
import binascii
import json
import sys

from cassandra.metadata import (Metadata, KeyspaceMetadata, Murmur3Token,
                                MIN_LONG, MAX_LONG)
from cassandra.pool import Host
from cassandra.policies import SimpleConvictionPolicy
from cassandra.query import Statement
from cassandra import murmur3 as _m3mod

KS = "oracle_ks"


def token_of_key(key_bytes):
    return Murmur3Token.from_key(key_bytes).value


def composite_routing_key(parts):
    # identical to what BoundStatement.routing_key builds for multi-column PKs:
    # for each component: uint16 BE length, bytes, 0x00
    return b"".join(Statement._key_parts_packed(None, parts))


def build_metadata(spec):
    partitioner = spec.get("partitioner", "org.apache.cassandra.dht.Murmur3Partitioner")
    md = Metadata()
    token_map = {}
    by_addr = {}
    for h in spec["hosts"]:
        host = Host(h["address"], SimpleConvictionPolicy,
                    datacenter=h.get("dc"), rack=h.get("rack"))
        md.add_or_return_host(host)
        token_map[host] = [str(t) for t in h["tokens"]]
        by_addr[h["address"]] = host
    md.rebuild_token_map(partitioner, token_map)
    repl = dict(spec["replication"])
    cls = repl.pop("class")
    md.keyspaces[KS] = KeyspaceMetadata(KS, True, cls, repl)
    return md


def replicas_for_token(md, token_value):
    tm = md.token_map
    hosts = tm.get_replicas(KS, tm.token_class(token_value))
    return list(hosts)


def describe(hosts):
    by_dc = {}
    for h in hosts:
        by_dc.setdefault(h.datacenter, []).append(h.address)
    return [h.address for h in hosts], by_dc


def run(spec):
    md = build_metadata(spec)
    tm = md.token_map
    out = {"ring": [{"token": str(t.value), "owner": tm.token_to_host_owner[t].address}
                    for t in tm.ring],
           "results": []}
    for k in spec.get("keys", []):
        kb = binascii.unhexlify(k)
        t = token_of_key(kb)
        reps, by_dc = describe(replicas_for_token(md, t))
        out["results"].append({"input": {"key": k}, "routing_key": k, "token": str(t),
                               "replicas": reps, "replicas_by_dc": by_dc})
    for parts in spec.get("composite_keys", []):
        rk = composite_routing_key([binascii.unhexlify(p) for p in parts])
        t = token_of_key(rk)
        reps, by_dc = describe(replicas_for_token(md, t))
        out["results"].append({"input": {"composite_key": parts},
                               "routing_key": binascii.hexlify(rk).decode(),
                               "token": str(t), "replicas": reps, "replicas_by_dc": by_dc})
    for t in spec.get("tokens", []):
        t = int(t)
        reps, by_dc = describe(replicas_for_token(md, t))
        out["results"].append({"input": {"token": str(t)}, "token": str(t),
                               "replicas": reps, "replicas_by_dc": by_dc})
    return out


VECTOR_KEYS = [
    "",                                   # empty key
    "00",                                 # 1 byte
    "61",                                 # 'a'
    "68656c6c6f",                         # 'hello' (5 bytes)
    "ff",                                 # 1 byte >= 0x80 (tail sign extension)
    "000102030405060708090a0b0c0d0e",     # 15 bytes (all tail)
    "000102030405060708090a0b0c0d0e0f",   # 16 bytes (one block, no tail)
    "000102030405060708090a0b0c0d0e0f10",  # 17 bytes (block + 1 tail byte)
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e",      # 31
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",    # 32
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",  # 33
    "80818283848586878889",               # 10 bytes, all >= 0x80 (k1 and k2 tail)
    "f0e1d2c3b4a5968778695a4b3c2d1e0fffee",  # 18 bytes: block + tail 0xff,0xee
    "00000001",                           # int 1 as a CQL int partition key
    "000000000000002a",                   # bigint 42
]


def murmur3_unsigned_reference(data):
    """Plain MurmurHash3_x64_128 (h1, seed 0) with tail bytes treated as
    UNSIGNED -- i.e. WITHOUT Cassandra's quirk.  Only used to show which
    vectors the quirk changes."""
    M = (1 << 64) - 1
    c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M

    def fmix(k):
        k ^= k >> 33; k = (k * 0xff51afd7ed558ccd) & M
        k ^= k >> 33; k = (k * 0xc4ceb9fe1a85ec53) & M
        k ^= k >> 33
        return k
    h1 = h2 = 0
    n = len(data) // 16
    for i in range(n):
        k1 = int.from_bytes(data[16 * i:16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8:16 * i + 16], "little")
        k1 = (rotl((k1 * c1) & M, 31) * c2) & M; h1 ^= k1
        h1 = rotl(h1, 27); h1 = (h1 + h2) & M; h1 = (h1 * 5 + 0x52dce729) & M
        k2 = (rotl((k2 * c2) & M, 33) * c1) & M; h2 ^= k2
        h2 = rotl(h2, 31); h2 = (h2 + h1) & M; h2 = (h2 * 5 + 0x38495ab5) & M
    tail = data[16 * n:]
    k1 = k2 = 0
    for i in range(len(tail) - 1, 7, -1):
        k2 ^= tail[i] << ((i - 8) * 8)
    if len(tail) > 8:
        k2 = (rotl((k2 * c2) & M, 33) * c1) & M; h2 ^= k2
    for i in range(min(8, len(tail)) - 1, -1, -1):
        k1 ^= tail[i] << (i * 8)
    if tail:
        k1 = (rotl((k1 * c1) & M, 31) * c2) & M; h1 ^= k1
    h1 ^= len(data); h2 ^= len(data)
    h1 = (h1 + h2) & M; h2 = (h2 + h1) & M
    h1 = fmix(h1); h2 = fmix(h2)
    h1 = (h1 + h2) & M
    v = h1 - (1 << 64) if h1 >> 63 else h1
    return MAX_LONG if v == MIN_LONG else v


def vectors():
    rows = []
    for k in VECTOR_KEYS:
        kb = binascii.unhexlify(k)
        tok_c = token_of_key(kb)                      # driver (cmurmur3 C ext)
        tok_py = _m3mod._murmur3(kb)                  # driver pure-python fallback
        tok_py = MAX_LONG if tok_py == MIN_LONG else tok_py
        plain = murmur3_unsigned_reference(kb)
        assert tok_c == tok_py, (k, tok_c, tok_py)
        rows.append({"key_hex": k, "len": len(kb), "token": str(tok_c),
                     "token_if_tail_bytes_were_unsigned": str(plain),
                     "quirk_changes_result": plain != tok_c})
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--vectors":
        json.dump(vectors(), sys.stdout, indent=1)
    else:
        json.dump(run(json.load(sys.stdin)), sys.stdout, indent=1)
    sys.stdout.write("\n")
