#!/usr/bin/python3
"""bad_dns.py - a tiny UDP DNS server that can answer with broken messages.

Stdlib only, for the malformed-record tests of DNS membership (issue 15).
BIND never serves malformed data; this does, on purpose:

  bad_dns.py --host 127.0.0.54 --zone ZONEFILE --mode-file MODEFILE

ZONEFILE lines are "NAME TYPE DATA" (TYPE A: an IPv4 address; SRV:
"PRIO WEIGHT PORT TARGET"), names without a trailing dot, read again for
every query. MODEFILE holds words, read again for every query. One of these
breaks the answers to SRV queries only (A queries are always answered well,
so that targets stay resolvable):

  good      well-formed answers (SRV answers carry the targets' A records
            in the additional section); unknown names get NXDOMAIN
  badptr    the first answer's owner is a compression pointer past the end
  loop      the first answer's owner is a compression pointer to itself
  short     every answer record's RDLENGTH is 3 (too short for A and SRV)
  overrun   the first answer's RDLENGTH runs past the end of the message
  count     ANCOUNT claims 5 more records than the message holds
  garbage   the header and question, then 40 random bytes

and these change every answer, whatever its type (issue 20: a slow, a
silent or a glueless server):

  delay=SECS  answer each query SECS seconds after it arrived, without
              holding up the others (a timer thread per query): N queries
              asked at once are all answered SECS later
  drop        read every query and answer none (no ICMP either: the
              socket is bound), a server that never answers
  noglue      SRV answers without the additional section: the targets'
              addresses must be asked for
  ttl=N       every record's TTL is N seconds (default 0)

e.g. "good", "garbage", "good delay=0.3 noglue ttl=1", "drop".
Every reply keeps the query's ID and question, so that a stub resolver
takes it as the answer. Prints "ready" once bound; exits on SIGTERM.
"""

import argparse
import os
import signal
import socket
import struct
import sys
import threading


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--zone", required=True)
    p.add_argument("--mode-file", required=True)
    return p.parse_args()


def read_zone(path):
    zone = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) < 3:
                continue
            zone.setdefault((w[0].lower(), w[1].upper()), []).append(w[2:])
    return zone


BREAKS = ("good", "badptr", "loop", "short", "overrun", "count", "garbage")


class Mode:
    """The mode file's words: a break (SRV only) and the modifiers."""

    def __init__(self, text):
        self.brk = "good"
        self.delay = 0.0
        self.drop = False
        self.glue = True
        self.ttl = 0
        for w in text.split():
            if w in BREAKS:
                self.brk = w
            elif w.startswith("delay="):
                self.delay = float(w[6:])
            elif w == "drop":
                self.drop = True
            elif w == "noglue":
                self.glue = False
            elif w.startswith("ttl="):
                self.ttl = int(w[4:])
            else:
                raise ValueError("unknown mode word %r" % w)


def read_mode(path):
    try:
        with open(path) as f:
            return Mode(f.read())
    except OSError:
        return Mode("")


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def question(msg):
    """(end offset of the question, qname lowercase, qtype) or None."""
    if len(msg) < 12:
        return None
    i, labels = 12, []
    while i < len(msg) and msg[i]:
        n = msg[i]
        if n > 63:
            return None
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    if i + 5 > len(msg):
        return None
    qtype = struct.unpack("!H", msg[i + 1:i + 3])[0]
    return i + 5, ".".join(labels).lower(), qtype


def rdata(rtype, data):
    if rtype == "A":
        return socket.inet_aton(data[0])
    prio, weight, port, target = data
    return struct.pack("!HHH", int(prio), int(weight), int(port)) + \
        encode_name(target)


def record(owner, rtype, data, short=False, ttl=0):
    """One resource record; short: RDATA cut to 3 bytes."""
    rd = rdata(rtype, data)
    if short:
        rd = rd[:3]
    code = {"A": 1, "SRV": 33}[rtype]
    return owner + struct.pack("!HHIH", code, 1, ttl, len(rd)) + rd


def answer(msg, zone, how):
    q = question(msg)
    if q is None:
        return None
    qend, qname, qtype = q
    rtype = {1: "A", 33: "SRV"}.get(qtype)
    recs = zone.get((qname, rtype), []) if rtype else []
    known = any(k[0] == qname for k in zone)
    rcode = 0 if known else 3
    qid = msg[:2]
    mode = how.brk if rtype == "SRV" else "good"
    ans = [record(b"\xc0\x0c", rtype, d, mode == "short", how.ttl)
           for d in recs]
    add = []
    if rtype == "SRV" and how.glue:
        for d in recs:
            for a in zone.get((d[3].lower(), "A"), []):
                add.append(record(encode_name(d[3]), "A", a, ttl=how.ttl))
    ancount = len(ans)
    if mode == "garbage":
        body = os.urandom(40)
    else:
        if ans and mode == "badptr":
            ans[0] = b"\xc3\xff" + ans[0][2:]
        elif ans and mode == "loop":
            # The pointer names its own offset: the first answer's owner.
            ans[0] = struct.pack("!H", 0xC000 | qend) + ans[0][2:]
        elif ans and mode == "overrun":
            # Owner (2), TYPE, CLASS, TTL (8), then RDLENGTH: 16384.
            ans[0] = ans[0][:10] + b"\x40\x00" + ans[0][12:]
        elif mode == "count":
            ancount += 5
        body = b"".join(ans) + b"".join(add)
    flags = 0x8400 | rcode  # QR, AA
    head = qid + struct.pack("!HHHHH", flags, 1, ancount, 0,
                             0 if mode == "garbage" else len(add))
    return head + msg[12:qend] + body


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((args.host, args.port))
    print("ready", flush=True)
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            how = read_mode(args.mode_file)
            reply = None if how.drop else \
                answer(msg, read_zone(args.zone), how)
        except (OSError, ValueError, IndexError, KeyError) as e:
            print("error: %s" % e, flush=True)
            continue
        if reply is None:
            continue
        if how.delay > 0:
            t = threading.Timer(how.delay, s.sendto, (reply, peer))
            t.daemon = True
            t.start()
        else:
            s.sendto(reply, peer)


if __name__ == "__main__":
    main()
