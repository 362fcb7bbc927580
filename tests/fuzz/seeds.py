#!/usr/bin/env python3
# seeds.py - write the binary seed corpora of fuzz_resolve, fuzz_state and
# fuzz_dnsmsg (tests/fuzz/corpus/{resolve,state,dnsmsg}/), in the input
# formats described at the top of fuzz_resolve.c, fuzz_state.c and
# fuzz_dnsmsg.c. The config corpus is plain text and kept by hand. Run
# from anywhere: python3 tests/fuzz/seeds.py
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def u8(v):
    return struct.pack("<B", v & 0xFF)


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def string(s):
    b = s.encode()
    return u8(len(b)) + b


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- resolve
# Clusters of fuzz_resolve.c: 0 lit, 1 pinned, 2 named, 3 dead, 4 big, 5 rr.
# Table choices: family UNSPEC INET INET6 UNIX; socktype 0 STREAM DGRAM RAW
# SEQPACKET; protocol 0 TCP UDP SCTP; gethostbyname af INET INET6 UNSPEC.
AI_PASSIVE, AI_CANONNAME, AI_V4MAPPED, AI_ALL = 0x1, 0x2, 0x8, 0x10
AI_ADDRCONFIG, AI_NUMERICSERV = 0x20, 0x400


def resolve(cluster, spelling, what, flags, fam, st, pr, service, buflen,
            skew, af, tried=(), failed_fam=0, port=0):
    return (u8(cluster) + u8(spelling) + u8(what) + u16(flags) + u8(fam) +
            u8(st) + u8(pr) + string(service) + u16(buflen) + u8(skew) +
            u8(af) + u8(len(tried)) + u8(failed_fam) +
            b"".join(u8(t) for t in tried) + u16(port))


write("resolve", "lit_addrconfig",
      resolve(0, 0, 0, AI_ADDRCONFIG | AI_V4MAPPED, 0, 1, 1, "9000", 1024,
              0, 0))
write("resolve", "pinned_canon_v6_static",
      resolve(1, 1, 4, AI_CANONNAME | AI_NUMERICSERV, 2, 2, 2, "5432", 64,
              0, 1, tried=(0,), failed_fam=1, port=5432))
write("resolve", "named_passive_failover",
      resolve(2, 2, 0, AI_PASSIVE, 1, 0, 0, "http", 4096, 0, 0,
              tried=(0, 1), failed_fam=0, port=80))
write("resolve", "dead_null_service",
      resolve(3, 0, 2, 0, 0, 0, 0, "", 512, 0, 1))
write("resolve", "big_null_hints",
      resolve(4, 0, 1, 0, 0, 0, 0, "443", 8192, 0, 0))
write("resolve", "rr_numericserv",
      resolve(5, 0, 0, AI_NUMERICSERV, 0, 2, 0, "53", 256, 0, 0))
write("resolve", "lit_v4mapped_all",
      resolve(0, 1, 0, AI_V4MAPPED | AI_ALL, 2, 1, 0, "65536", 2048, 0, 1))

# ------------------------------------------------------------------ state
# fuzz_state.c: clusters 0 s.cluster, 1 zero.cluster, 2 one.cluster,
# 3 big.cluster; layout of design.md §12.2 (v2: 32-byte slots).
NSLOTS = 8192
FILE_SIZE = 64 + NSLOTS * 32
START = 1700000000


def identity(host_port):
    h = 0xCBF29CE484222325
    for b in host_port.lower().encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h + 2 if h < 2 else h


# Patches
def p_bytes(off, data):
    return u8(0) + u32(off) + u8(len(data)) + data


def key_replica(j, config_b=False):
    return u8(6 if config_b else 3) + u8(j)


def key_raw(v):
    return u8(2) + u64(v)


def p_slot(idx, key, errors, slowdowns):
    return u8(1) + u16(idx) + key + u64(errors) + u64(slowdowns)


def p_fill(first, count, key, errors):
    return u8(2) + u16(first) + u16(count) + key + u64(errors)


def p_header(t, rr):
    return u8(3) + u64(t) + u64(rr)


# Kinds: 0 none, 1 regular, 2 group-writable, 3 symlink, 4 dir, 5 fifo,
# 6 raw text, 7 a sealed memfd, 8 an unsealed one, 9 a holder gone.
# Bases: 0 raw (u16 length, bytes), 1 zeros, 2 valid header.
# Sizes: 0 exact, 1 cut to u24 % size, 2 grown by u8 + 1.
def state(cluster, kind, base, size, patches=(), flags=0, ops=b"",
          raw=b"", size_arg=b""):
    head = u8(cluster) + u8(kind) + u8(base) + u8(size)
    if base == 0:
        head += u16(len(raw)) + raw
    else:
        head += size_arg
    return (head + u8(len(patches)) + b"".join(patches) + u8(flags) + ops)


# Operations: op, cluster (bit 7: config B), replica, time, arguments.
# Time: 0 same, 1 +u8 s, 2 +u16 min, 3 raw u64, 4 T + i8, 5 odd value.
def op(code, cl, rep, time=b"\x00", args=b""):
    return u8(code) + u8(cl) + u8(rep) + time + args


SELECT, PEEK, ERRORS, SLOWDOWNS, DECAY, RESET, QUERY = range(7)
POKE, TOGGLE_B, ASIDE, REATTACH, SORT = 7, 8, 9, 10, 11
LATER = u8(2) + u16(1)  # a minute later

# What the library writes for s.cluster after some failures: its header,
# T, the counter, and r1/r2/r3:9000 in their home slots.
lib_slots = [
    p_slot(identity("r1:0") % NSLOTS, key_replica(0), 3, 0),
    p_slot(identity("r2:0") % NSLOTS, key_replica(1), 1, 2),
    p_slot(identity("r3:9000") % NSLOTS, key_replica(2), 0, 5),
]
everyday = (op(SELECT, 0, 0) + op(ERRORS, 0, 1, args=u8(0)) +
            op(SELECT, 0, 0, LATER) + op(SLOWDOWNS, 0, 2, args=u8(0)) +
            op(PEEK, 0, 0, LATER) + op(QUERY, 0, 1) +
            op(DECAY, 0, 0, u8(2) + u16(10)) + op(RESET, 0, 0) +
            op(SELECT, 3, 0) + op(SELECT, 1, 0) + op(SELECT, 2, 0))
write("state", "valid_library_file",
      state(0, 1, 2, 0, [p_header(START - 100, 7)] + lib_slots,
            ops=everyday))
write("state", "fresh", state(0, 0, 1, 0, ops=everyday))
write("state", "all_zero", state(1, 1, 1, 0, ops=op(SELECT, 1, 0)))
write("state", "truncated",
      state(0, 1, 2, 1, [p_header(START, 1)], size_arg=u32(4096),
            ops=op(SELECT, 0, 0)))
write("state", "grown",
      state(2, 1, 2, 2, size_arg=u8(7), ops=op(SELECT, 2, 0)))
write("state", "foreign_version",
      state(0, 1, 2, 0, [p_bytes(8, u32(1))] + lib_slots,
            ops=op(SELECT, 0, 0)))
write("state", "bad_slot_count",
      state(0, 1, 2, 0, [p_bytes(12, u32(4096))], ops=op(SELECT, 0, 0)))
write("state", "bad_checksum",
      state(0, 1, 2, 0, [p_bytes(32, u64(12345))], ops=op(SELECT, 0, 0)))
# The state directory: 1 missing, 2 group-writable, 3 symlink, 4 a file.
for how, name in ((1, "missing"), (2, "group_writable"), (3, "symlink"),
                  (4, "file")):
    write("state", "dir_" + name,
          state(0, 0, 1, 0, flags=1 | how << 1, ops=everyday))
write("state", "raw_garbage",
      state(3, 1, 0, 0, raw=b"RLBSTATE\x02\x00\x00\x00\x00\x20\x00\x00",
            ops=op(SELECT, 3, 0)))
write("state", "full_table_foreign",
      state(0, 1, 2, 0, [p_fill(0, NSLOTS, key_raw(0x1000), 9)],
            ops=op(SELECT, 0, 0) + op(ERRORS, 0, 3, args=u8(0))))
write("state", "duplicate_keys_huge_counts",
      state(3, 1, 2, 0,
            [p_fill(identity("b0.example:0") % NSLOTS, 40, key_replica(0),
                    (1 << 64) - 1),
             p_header((1 << 63) - 1, (1 << 64) - 1)],
            ops=op(SELECT, 3, 0, u8(5) + u8(3)) +
            op(QUERY, 3, 0, u8(5) + u8(4)) + op(PEEK, 3, 0)))
# Memfds named by lines of version 3 (design.md §12.12): 7 sealed, 8 not
# sealed against shrinking, 9 a holder that is gone.
write("state", "memfd_sealed",
      state(0, 7, 2, 0, lib_slots,
            ops=everyday + op(POKE, 0, 0, args=u32(128 + 8) + u8(8) +
                              u64(2)) + op(SELECT, 0, 0)))
write("state", "memfd_unsealed", state(0, 8, 2, 0, ops=op(SELECT, 0, 0)))
write("state", "memfd_holder_gone",
      state(0, 9, 2, 0, ops=op(SELECT, 0, 0) + op(ERRORS, 0, 1, args=u8(0))))
write("state", "symlink", state(0, 3, 2, 0, ops=op(SELECT, 0, 0)))
write("state", "fifo", state(1, 5, 1, 0, ops=op(SELECT, 1, 0)))
write("state", "other_process",
      state(0, 1, 2, 0, [p_header(START, 0)] + lib_slots,
            ops=op(SELECT, 0, 0) + op(TOGGLE_B, 1, 0) +
            op(SELECT, 0x80, 0) + op(ERRORS, 0, 0, args=u8(0)) +
            op(POKE, 0, 0, args=u32(64 + 8) + u8(8) + u64(2)) +
            op(SELECT, 0, 1) + op(ASIDE, 0, 0) + op(ERRORS, 0, 2,
                                                   args=u8(0)) +
            op(REATTACH, 1, 0) + op(SELECT, 0, 0) + op(TOGGLE_B, 0, 0)))

# Sorting keys: 100 with few distinct values, 70 raw ones.
compact = b"".join(u8(i * 37) + u8(i * 11) for i in range(100))
raw_keys = b"".join(u64(i * 0x9E3779B97F4A7C15) + u64(i % 3) +
                    u64(-i if i % 2 else i) + u64(1 << 63 | i) + u32(i * 7) +
                    u32(70 - i) for i in range(70))
write("state", "sort_keys",
      state(0, 0, 1, 0, ops=op(SORT, 0, 0, args=u16(100) + u8(0) + compact) +
            op(SORT, 0, 0, args=u16(70) + u8(1) + raw_keys)))

# ----------------------------------------------------------------- dnsmsg
# DNS messages (fuzz_dnsmsg.c): built here, compressed as servers do, and
# the real answers of dnsmasq in tests/data/dns/ (test_dnsmsg.c says how
# they were made).
QR_RD_RA, TC = 0x8180, 0x0200
T_A, T_CNAME, T_SOA, T_SRV, T_AAAA, T_OPT = 1, 5, 6, 33, 28, 41


def be16(v):
    return struct.pack(">H", v & 0xFFFF)


def be32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def dname(dotted, ptr=None):
    """The labels of dotted, then a pointer to ptr or the root."""
    b = b"".join(u8(len(x)) + x.encode() for x in dotted.split(".") if x)
    return b + (be16(0xC000 | ptr) if ptr is not None else b"\0")


class Msg:
    def __init__(self, qname, qtype, flags=QR_RD_RA):
        self.flags, self.counts, self.body = flags, [0, 0, 0], b""
        self.question = dname(qname) + be16(qtype) + be16(1)

    def at(self):
        """Offset of the next byte."""
        return 12 + len(self.question) + len(self.body)

    def rr(self, sec, owner, rtype, ttl, rdata, rclass=1):
        self.counts[sec] += 1
        self.body += owner + be16(rtype) + be16(rclass) + be32(ttl)
        self.body += be16(len(rdata)) + rdata

    def bytes(self):
        return (be16(0x1234) + be16(self.flags) + be16(1) +
                b"".join(be16(c) for c in self.counts) + self.question +
                self.body)


Q = 12  # the question's name
srv = Msg("_db._tcp.example.com", T_SRV)
targets = []
for i, (prio, weight, port) in enumerate(((10, 60, 9000), (10, 40, 9001),
                                          (20, 0, 9002))):
    targets.append(srv.at() + 12 + 6)
    srv.rr(0, dname("", Q), T_SRV, 300 - i,
           be16(prio) + be16(weight) + be16(port) +
           dname("db%d" % (i + 1), Q + 9))
srv.rr(2, dname("", targets[0]), T_A, 60, bytes([192, 0, 2, 1]))
srv.rr(2, dname("", targets[1]), T_A, 60, bytes([192, 0, 2, 2]))
srv.rr(2, dname("", targets[2]), T_AAAA, 60,
       bytes.fromhex("20010db8000000000000000000000003"))
srv.rr(2, b"\0", T_OPT, 0, b"", rclass=1232)
write("dnsmsg", "srv_additional", srv.bytes())

a = Msg("db.example.com", T_A)
for i in range(3):
    a.rr(0, dname("", Q), T_A, 30, bytes([198, 51, 100, i + 1]))
write("dnsmsg", "a", a.bytes())

aaaa = Msg("DB.Example.COM", T_AAAA)
aaaa.rr(0, dname("db.EXAMPLE.com"), T_AAAA, 30,
        bytes.fromhex("20010db8000000000000000000000001"))
write("dnsmsg", "aaaa_mixed_case", aaaa.bytes())

chain = Msg("www.example.com", T_A)
edge = chain.at() + 12
chain.rr(0, dname("", Q), T_CNAME, 300, dname("edge", Q + 4))
origin = chain.at() + 12
chain.rr(0, dname("", edge), T_CNAME, 100, dname("origin.cdn.example.net"))
chain.rr(0, dname("", origin), T_A, 200, bytes([203, 0, 113, 5]))
write("dnsmsg", "cname_chain", chain.bytes())

loop = Msg("a.example.com", T_A)
b_at = loop.at() + 12
loop.rr(0, dname("", Q), T_CNAME, 10, dname("b", Q + 2))
loop.rr(0, dname("", b_at), T_CNAME, 20, dname("", Q))
write("dnsmsg", "cname_loop", loop.bytes())

nx = Msg("gone.example.com", T_SRV, QR_RD_RA | 3)
nx.rr(1, dname("", Q + 5), T_SOA, 900,
      dname("ns1", Q + 5) + dname("hostmaster", Q + 5) + be32(1) * 5)
write("dnsmsg", "nxdomain_soa", nx.bytes())

cut = Msg("db.example.com", T_A, QR_RD_RA | TC)
for i in range(3):
    cut.rr(0, dname("", Q), T_A, 30, bytes([192, 0, 2, i + 1]))
write("dnsmsg", "truncated_partial", cut.bytes()[:-2])

for f in sorted(os.listdir(os.path.join(HERE, "..", "data", "dns"))):
    with open(os.path.join(HERE, "..", "data", "dns", f), "rb") as src:
        write("dnsmsg", "dnsmasq_" + f[:-len(".bin")], src.read())
