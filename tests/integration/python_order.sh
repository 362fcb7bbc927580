#!/bin/bash
# python_order.sh - what python3 sees when it resolves a virtual name
# (design.md §2, §3, §4): the replicas' addresses in policy order, ports from the
# config or the caller, hints honoured, AI_CANONNAME and gethostbyname*
# naming the first replica, round_robin shared by separate processes.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

CPORT=$(free_port)	# a cluster's port
RPORT=$(free_port)	# a replica's own port
# A host name that libc fails to resolve without asking DNS (a label
# longer than 63 bytes): EAI_NONAME.
BADHOST=$(printf 'x%.0s' $(seq 70)).invalid

write_config <<EOF
load_balancing = "random";
distributed_replica_error_half_life = 3600;
clusters = (
  { name = "inorder.cluster";
    load_balancing = "in_order";
    replicas = ( { host = "r1.test"; address = "127.0.0.2"; },
                 "127.0.0.3",
                 { host = "r3.test"; address = [ "127.0.0.4" ]; } ); },
  { name = "first.cluster";
    load_balancing = "first_or_random";
    load_balancing_first_offset = 4;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "rr.cluster";
    load_balancing = "round_robin";
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "ports.cluster";
    load_balancing = "in_order";
    port = $CPORT;
    replicas = ( "127.0.0.2", "127.0.0.3:$RPORT",
                 { host = "r3.test"; address = "127.0.0.4"; port = $RPORT; } ); },
  { name = "mixed.cluster";
    load_balancing = "in_order";
    replicas = ( "[::1]:$RPORT", "127.0.0.2",
                 { host = "dual.test"; address = [ "2001:db8::7", "127.0.0.3" ]; } ); },
  { name = "v4only.cluster";
    load_balancing = "in_order";
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "random.cluster";
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "unres.cluster";
    load_balancing = "in_order";
    replicas = ( "$BADHOST", "127.0.0.2" ); },
  { name = "unres1.cluster";
    replicas = ( "$BADHOST" ); },
  { name = "prio.cluster";
    load_balancing = "in_order";
    replicas = ( "127.0.0.2", { host = "127.0.0.3"; priority = 2; },
                 { host = "127.0.0.4"; priority = 0; } ); },
  { name = "big.cluster";
    load_balancing = "in_order";
    replicas = ( $(for i in $(seq 100); do printf '"127.0.1.%d", ' "$i"; done | sed 's/, $//') ); }
);
EOF
BIG=$(for i in $(seq 100); do printf '127.0.1.%d ' "$i"; done | sed 's/ $//')

gai()
{
	preload $PY "$GAI" "$@" 2>>"$T/stderr"
}
: >"$T/stderr"

# ---------------------------------------------------------------------
# Policies

check_eq "in_order: config order, every time" \
	"$(printf '127.0.0.2 127.0.0.3 127.0.0.4\n%.0s' 1 2 3 4 5)" \
	"$(gai -u -n 5 inorder.cluster 80)"

# first_or_random, offset 4 mod 3 = 1: 127.0.0.3 first, then the other two
# in random order; both orders must appear in 40 selections (TV16).
out=$(gai -u -n 40 first.cluster 80)
check_eq "first_or_random offset 4: index 1 always first" "40" \
	"$(printf '%s\n' "$out" | grep -c '^127\.0\.0\.3 ')"
check_match "first_or_random: tail order random (a)" \
	'^127\.0\.0\.3 127\.0\.0\.2 127\.0\.0\.4$' "$out"
check_match "first_or_random: tail order random (b)" \
	'^127\.0\.0\.3 127\.0\.0\.4 127\.0\.0\.2$' "$out"

# round_robin across separate processes: TV18 orders [1,2,0], [2,0,1],
# [0,1,2], [1,2,0], [2,0,1].
rr=
for i in 1 2 3 4 5; do
	rr="$rr$(gai -u rr.cluster 80);"
done
check_eq "round_robin rotates across 5 python processes" \
	"127.0.0.3 127.0.0.4 127.0.0.2;127.0.0.4 127.0.0.2 127.0.0.3;127.0.0.2 127.0.0.3 127.0.0.4;127.0.0.3 127.0.0.4 127.0.0.2;127.0.0.4 127.0.0.2 127.0.0.3;" \
	"$rr"
check_eq "round_robin continues inside one process" \
	"$(printf '%s\n' '127.0.0.2 127.0.0.3 127.0.0.4' '127.0.0.3 127.0.0.4 127.0.0.2' '127.0.0.4 127.0.0.2 127.0.0.3')" \
	"$(gai -u -n 3 rr.cluster 80)"
check_eq "replicalbctl --peek agrees with the next round_robin pick" \
	"127.0.0.2 127.0.0.3 127.0.0.4" "$(peek rr.cluster)"

# random: all three replicas come first sometimes (60 selections).
out=$(gai -u -n 60 random.cluster 80 | cut -d' ' -f1 | sort -u | tr '\n' ' ')
check_eq "random: every replica is first sometimes" \
	"127.0.0.2 127.0.0.3 127.0.0.4 " "$out"

# The policy override from the environment applies to every cluster.
check_eq "REPLICALB_LOAD_BALANCING=in_order overrides random" \
	"$(printf '127.0.0.2 127.0.0.3 127.0.0.4\n%.0s' 1 2 3 4 5 6)" \
	"$(REPLICALB_LOAD_BALANCING=in_order gai -u -n 6 random.cluster 80)"

# ---------------------------------------------------------------------
# Ports: replica's, else cluster's, else the caller's service.

check_eq "ports: cluster port, replica ports" \
	"127.0.0.2:$CPORT 127.0.0.3:$RPORT 127.0.0.4:$RPORT" \
	"$(gai ports.cluster 9999)"
check_eq "ports: caller's numeric service" \
	"127.0.0.2:8123 127.0.0.3:8123 127.0.0.4:8123" \
	"$(gai inorder.cluster 8123)"
check_eq "ports: caller's service name" \
	"127.0.0.2:80 127.0.0.3:80 127.0.0.4:80" \
	"$(gai inorder.cluster http)"
check_eq "ports: no service gives port 0" \
	"127.0.0.2:0 127.0.0.3:0 127.0.0.4:0" \
	"$(gai inorder.cluster)"

# ---------------------------------------------------------------------
# Hints: the virtual list is, replica by replica, what libc gives for the
# replica's addresses with the same hints.

cat >"$T/same.py" <<'EOF'
import socket, sys
name, port, replicas = sys.argv[1], sys.argv[2], sys.argv[3:]
ok = True
S = socket
FLAGS = (0, S.AI_NUMERICSERV, S.AI_ADDRCONFIG, S.AI_V4MAPPED,
         S.AI_V4MAPPED | S.AI_ALL, S.AI_PASSIVE, S.AI_CANONNAME)
for fam in (0, S.AF_INET, S.AF_INET6):
  for typ in (0, S.SOCK_STREAM, S.SOCK_DGRAM):
    for serv in (port, "http", "domain", "no-such-service", None):
      for flags in FLAGS:
        want, err = [], None
        for r in replicas:
            # HOST@PORT: a replica with its own port, which wins
            host, _, rport = r.partition("@")
            try:
                want += [x[:3] + (x[4],) for x in
                         S.getaddrinfo(host, rport or serv, fam, typ, 0,
                                       flags)]
            except S.gaierror as e:
                err = "gaierror %d" % e.errno
        # nothing fits: libc's error for the last failure
        want = want or err
        try:
            got = [x[:3] + (x[4],) for x in
                   S.getaddrinfo(name, serv, fam, typ, 0, flags)]
        except S.gaierror as e:
            got = "gaierror %d" % e.errno
        if want != got:
            print("family %d type %d service %s flags %#x: want %r got %r"
                  % (fam, typ, serv, flags, want, got))
            ok = False
sys.exit(0 if ok else 1)
EOF
check "hints: family x socktype x service x flags match libc's per replica" \
	preload $PY "$T/same.py" inorder.cluster 8123 127.0.0.2 127.0.0.3 127.0.0.4
check "hints: mixed IPv4/IPv6 replicas, all families" \
	preload $PY "$T/same.py" mixed.cluster "$RPORT" "::1@$RPORT" 127.0.0.2 \
	2001:db8::7 127.0.0.3
check "hints: replicas with cluster and own ports" \
	preload $PY "$T/same.py" ports.cluster 9999 "127.0.0.2@$CPORT" \
	"127.0.0.3@$RPORT" "127.0.0.4@$RPORT"

# hints == NULL, through libc directly; and freeaddrinfo() of lists from
# both sources, many times over, under glibc's malloc checking (the debug
# malloc, when installed, aborts on a bad free).
MDEBUG=/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0
[ -f "$MDEBUG" ] || MDEBUG=
cat >"$T/nullhints.py" <<'EOF'
import ctypes, sys
libc = ctypes.CDLL(None)
class addrinfo(ctypes.Structure):
    pass
addrinfo._fields_ = [("ai_flags", ctypes.c_int), ("ai_family", ctypes.c_int),
                     ("ai_socktype", ctypes.c_int), ("ai_protocol", ctypes.c_int),
                     ("ai_addrlen", ctypes.c_uint), ("ai_addr", ctypes.c_void_p),
                     ("ai_canonname", ctypes.c_char_p),
                     ("ai_next", ctypes.POINTER(addrinfo))]
def gai(node, serv):
    res = ctypes.POINTER(addrinfo)()
    rc = libc.getaddrinfo(node.encode(), serv.encode(), None, ctypes.byref(res))
    if rc:
        return "error %d" % rc
    out, p = [], res
    while p:
        a = p.contents
        out.append((a.ai_family, a.ai_socktype, a.ai_protocol,
                    ctypes.string_at(a.ai_addr, a.ai_addrlen)))
        p = a.ai_next
    libc.freeaddrinfo(res)
    return out
name, serv, replicas = sys.argv[1], sys.argv[2], sys.argv[3:]
want = sum((gai(r, serv) for r in replicas), [])
got = gai(name, serv)
for i in range(2000):
    gai(name, serv)
    gai(replicas[0], serv)
print("same" if got == want else "want %r got %r" % (want, got))
EOF
check_eq "hints NULL: libc's defaults per replica; freeaddrinfo x 4000" "same" \
	"$(env GLIBC_TUNABLES=glibc.malloc.check=3 \
		LD_PRELOAD="$RLB_LIB${MDEBUG:+ $MDEBUG}" $PY "$T/nullhints.py" \
		inorder.cluster 8123 127.0.0.2 127.0.0.3 127.0.0.4 2>&1)"

check_eq "AF_INET keeps only IPv4 replicas, in order" \
	"127.0.0.2:$RPORT 127.0.0.3:$RPORT" "$(gai -4 mixed.cluster "$RPORT")"
check_eq "AF_INET6 keeps only IPv6 addresses, in order" \
	"[::1]:$RPORT [2001:db8::7]:$RPORT" "$(gai -6 mixed.cluster "$RPORT")"
check_eq "AF_UNSPEC keeps every address, in order" \
	"[::1]:$RPORT 127.0.0.2:$RPORT [2001:db8::7]:$RPORT 127.0.0.3:$RPORT" \
	"$(gai mixed.cluster "$RPORT")"
# Leaving out a replica that has no address of the asked family is not a
# failure to resolve it: nothing is counted.
check_eq "family filters count no errors" "0 0 0" \
	"$(replica_errors mixed.cluster ::1) $(replica_errors mixed.cluster 127.0.0.2) $(replica_errors mixed.cluster dual.test)"

# No replica fits the hints: libc's error for the last failure.
want=$($PY "$GAI" -6 127.0.0.3 80)
check_eq "AF_INET6 on IPv4-only replicas: libc's error code" \
	"$want" "$(gai -6 v4only.cluster 80)"
check_eq "AI_NUMERICHOST with a virtual name: EAI_NONAME like libc" \
	"$($PY "$GAI" -N not-a-number.test 80)" "$(gai -N inorder.cluster 80)"
check_eq "AI_CANONNAME: the first replica's host string" \
	"canon=r1.test 127.0.0.2:80 127.0.0.3:80 127.0.0.4:80" \
	"$(gai -c inorder.cluster 80)"

# A replica whose host cannot be resolved is left out and counts one error.
check_eq "unresolvable replica left out" "127.0.0.2" "$(gai -u unres.cluster 80)"
check_eq "unresolvable replica: one error counted" "1" \
	"$(replica_errors unres.cluster "$BADHOST")"
# Something is wrong then: one warning says so (not part of the silence
# checked below).
check_eq "no replica resolvable: libc's error (EAI_NONAME)" "error EAI_NONAME" \
	"$(preload $PY "$GAI" unres1.cluster 80 2>"$T/unres1.err")"
check_match "no replica resolvable: one warning naming the cluster" \
	'^replicalb\[[0-9]+\]: unres1\.cluster: no replica could be resolved' \
	"$(cat "$T/unres1.err")"
check_eq "no replica resolvable: exactly one line" "1" \
	"$(wc -l <"$T/unres1.err")"

check_eq "service name unknown: EAI_SERVICE like libc" \
	"$($PY "$GAI" 127.0.0.2 no-such-service)" \
	"$(gai inorder.cluster no-such-service)"

# Config priority comes before the policy (lower first).
check_eq "priority 0, 1, 2 before in_order's index" \
	"127.0.0.4 127.0.0.2 127.0.0.3" "$(gai -u prio.cluster 80)"

# 100 replicas (more than fit the library's on-stack selection).
check_eq "100 replicas, in_order" "$BIG" "$(gai -u big.cluster 80)"
check_eq "100 replicas, round_robin (env): index 1 first, index 0 last" \
	"$(echo "$BIG" | cut -d' ' -f2-) 127.0.1.1" \
	"$(REPLICALB_LOAD_BALANCING=round_robin gai -u big.cluster 80)"
check_eq "100 replicas, gethostbyname_ex" \
	"127.0.1.1 big.cluster $BIG" \
	"$(preload $PY -c 'import socket; h, a, l = socket.gethostbyname_ex("big.cluster"); print(h, *a, *l)' 2>>"$T/stderr")"

# ---------------------------------------------------------------------
# Name matching: case-insensitive, one trailing dot.

check_eq "virtual name is case-insensitive with a trailing dot" \
	"127.0.0.2 127.0.0.3 127.0.0.4" "$(gai -u InOrder.CLUSTER. 80)"

# ---------------------------------------------------------------------
# gethostbyname and friends.

cat >"$T/ghbn.py" <<'EOF'
import ctypes, socket, sys
name = sys.argv[1]
print("gethostbyname", socket.gethostbyname(name))
h, aliases, addrs = socket.gethostbyname_ex(name)
print("ex", h, ",".join(a.lower() for a in aliases), " ".join(addrs))

libc = ctypes.CDLL(None, use_errno=True)
class hostent(ctypes.Structure):
    _fields_ = [("h_name", ctypes.c_char_p),
                ("h_aliases", ctypes.POINTER(ctypes.c_char_p)),
                ("h_addrtype", ctypes.c_int), ("h_length", ctypes.c_int),
                ("h_addr_list", ctypes.POINTER(ctypes.POINTER(ctypes.c_char)))]
def show(tag, h):
    if not h:
        print(tag, "NULL")
        return
    h = h.contents
    addrs, i = [], 0
    while h.h_addr_list[i]:
        addrs.append(socket.inet_ntop(h.h_addrtype, h.h_addr_list[i][:h.h_length]))
        i += 1
    al, i = [], 0
    while h.h_aliases[i]:
        al.append(h.h_aliases[i].decode().lower()); i += 1
    print(tag, h.h_name.decode(), ",".join(al), h.h_addrtype, " ".join(addrs))
libc.gethostbyname.restype = ctypes.POINTER(hostent)
libc.gethostbyname2.restype = ctypes.POINTER(hostent)
show("c gethostbyname", libc.gethostbyname(name.encode()))
show("c gethostbyname2 inet", libc.gethostbyname2(name.encode(), socket.AF_INET))
show("c gethostbyname2 inet6", libc.gethostbyname2(name.encode(), socket.AF_INET6))
for size in (8, 64, 8192):
    he, res, herr = hostent(), ctypes.POINTER(hostent)(), ctypes.c_int(0)
    buf = ctypes.create_string_buffer(size)
    rc = libc.gethostbyname_r(name.encode(), ctypes.byref(he), buf, size,
                              ctypes.byref(res), ctypes.byref(herr))
    print("r", size, "rc=%d" % rc, end=" ")
    show("", res if rc == 0 else None)
he, res, herr = hostent(), ctypes.POINTER(hostent)(), ctypes.c_int(0)
buf = ctypes.create_string_buffer(8192)
rc = libc.gethostbyname2_r(name.encode(), socket.AF_INET6, ctypes.byref(he),
                           buf, 8192, ctypes.byref(res), ctypes.byref(herr))
print("r2 inet6 rc=%d" % rc, end=" ")
show("", res if rc == 0 else None)

# Every buffer size 0..1023: ERANGE (result NULL, h_errno NETDB_INTERNAL)
# until it fits, then success with every pointer inside the caller's
# buffer; nothing written past buflen.
class hostent_raw(ctypes.Structure):
    _fields_ = [("h_name", ctypes.c_void_p), ("h_aliases", ctypes.c_void_p),
                ("h_addrtype", ctypes.c_int), ("h_length", ctypes.c_int),
                ("h_addr_list", ctypes.c_void_p)]
def ptrs(arr):
    out, i = [], 0
    a = ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p))
    while a[i]:
        out.append(a[i]); i += 1
    return out
bad, fits = [], None
for size in range(1024):
    raw = ctypes.create_string_buffer(b"\xa5" * (size + 64), size + 64)
    he, res, herr = hostent_raw(), ctypes.c_void_p(), ctypes.c_int(0)
    rc = libc.gethostbyname_r(name.encode(), ctypes.byref(he), raw, size,
                              ctypes.byref(res), ctypes.byref(herr))
    if raw.raw[size:] != b"\xa5" * 64:
        bad.append("size %d: written past the buffer" % size)
    lo, hi = ctypes.addressof(raw), ctypes.addressof(raw) + size
    if rc == 0:
        fits = size if fits is None else fits
        inside = [he.h_name, he.h_aliases, he.h_addr_list]
        inside += ptrs(he.h_aliases) + ptrs(he.h_addr_list)
        if res.value != ctypes.addressof(he):
            bad.append("size %d: result is not the caller's hostent" % size)
        if any(p is None or not lo <= p < hi for p in inside):
            bad.append("size %d: pointer outside the buffer" % size)
    elif rc != 34 or res.value or herr.value != -1:
        bad.append("size %d: rc %d result %r h_errno %d" % (size, rc, res.value, herr.value))
    elif fits is not None:
        bad.append("size %d: ERANGE after size %d fitted" % (size, fits))
    if len(bad) > 3:
        break
print("sweep", "fits" if fits is not None and not bad else "bad", *bad)
EOF
preload $PY "$T/ghbn.py" inorder.cluster >"$T/ghbn.out" 2>>"$T/stderr"
ghbn=$(cat "$T/ghbn.out")
line() { printf '%s\n' "$ghbn" | grep "^$1" | head -1; }
check_eq "socket.gethostbyname: first replica" \
	"gethostbyname 127.0.0.2" "$(line 'gethostbyname ')"
check_eq "gethostbyname_ex: h_name, aliases, addresses in order" \
	"ex r1.test inorder.cluster 127.0.0.2 127.0.0.3 127.0.0.4" "$(line 'ex ')"
check_eq "gethostbyname(): same order" \
	"c gethostbyname r1.test inorder.cluster 2 127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(line 'c gethostbyname ')"
check_eq "gethostbyname2(AF_INET): same order" \
	"c gethostbyname2 inet r1.test inorder.cluster 2 127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(line 'c gethostbyname2 inet ')"
check_eq "gethostbyname_r, 8-byte buffer: ERANGE" "r 8 rc=34  NULL" "$(line 'r 8 ')"
check_eq "gethostbyname_r, 64-byte buffer: ERANGE" "r 64 rc=34  NULL" \
	"$(line 'r 64 ')"
check_eq "gethostbyname_r, sizes 0..1023: ERANGE, then only the caller's buffer" \
	"sweep fits" "$(line 'sweep')"
check_eq "gethostbyname_r, big buffer: same order" \
	"r 8192 rc=0  r1.test inorder.cluster 2 127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(line 'r 8192 ')"

preload $PY "$T/ghbn.py" mixed.cluster >"$T/ghbn6.out" 2>>"$T/stderr"
ghbn=$(cat "$T/ghbn6.out")
check_eq "gethostbyname2(AF_INET6): IPv6 addresses in order" \
	"c gethostbyname2 inet6 ::1 mixed.cluster 10 ::1 2001:db8::7" \
	"$(line 'c gethostbyname2 inet6 ')"
check_eq "gethostbyname2_r(AF_INET6): IPv6 addresses in order" \
	"r2 inet6 rc=0  ::1 mixed.cluster 10 ::1 2001:db8::7" "$(line 'r2 inet6 ')"
check_eq "gethostbyname_ex on mixed: IPv4 replicas, h_name of the first" \
	"ex 127.0.0.2 mixed.cluster 127.0.0.2 127.0.0.3" "$(line 'ex ')"

check_empty "all of the above: stderr silent" "$T/stderr"

# ---------------------------------------------------------------------
# Per-application files: apps.d/APP.conf beside the main file, APP from
# REPLICALB_APP or the program's name; clusters replace same-named ones,
# top-level settings override the main file's.

mkdir -p "$T/apps.d"
cat >"$T/apps.d/special.conf" <<EOF
clusters = ( { name = "inorder.cluster"; load_balancing = "in_order";
               replicas = ( "127.0.0.4", "127.0.0.3" ); } );
EOF
check_eq "REPLICALB_APP=special: its cluster replaces the main file's" \
	"127.0.0.4 127.0.0.3" "$(REPLICALB_APP=special gai -u inorder.cluster 80)"
check_eq "without REPLICALB_APP: python3 has no app file" \
	"127.0.0.2 127.0.0.3 127.0.0.4" "$(gai -u inorder.cluster 80)"
echo 'load_balancing = "in_order";' >"$T/apps.d/python3.conf"
check_eq "apps.d/python3.conf: top-level policy overrides the main file's" \
	"$(printf '127.0.0.2 127.0.0.3 127.0.0.4\n%.0s' 1 2 3 4 5 6)" \
	"$(gai -u -n 6 random.cluster 80)"
check_eq "apps.d/python3.conf: other clusters unchanged" \
	"127.0.0.4 127.0.0.2 127.0.0.3" "$(gai -u prio.cluster 80)"
rm -rf "$T/apps.d"

# ---------------------------------------------------------------------
# Debug log: one line per selection, prefixed replicalb[PID]:.

REPLICALB_LOG_LEVEL=debug preload $PY -c '
import os, socket, sys
print(os.getpid())
for i in range(3):
    socket.getaddrinfo("inorder.cluster", 80, type=socket.SOCK_STREAM)
socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)
' >"$T/dbg.out" 2>"$T/dbg.err"
pid=$(cat "$T/dbg.out")
check_eq "debug: one line per selection naming the virtual name" "3" \
	"$(grep -c 'inorder\.cluster' "$T/dbg.err")"
check_eq "debug: every line prefixed replicalb[$pid]:" \
	"$(grep -c . "$T/dbg.err")" "$(grep -c "^replicalb\[$pid\]: " "$T/dbg.err")"
check_eq "debug: nothing about a name that is not virtual" "0" \
	"$(grep -c localhost "$T/dbg.err")"

finish
