#!/bin/bash
# passthrough.sh - every name that is not virtual, and every call while
# unconfigured or disabled, behaves exactly as libc: same results, same
# error codes, same errno (design.md §4); a broken config never
# breaks the program and says so once, with file:line (design.md §2, §8).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup nocanary

PORT=$(free_port)
PORT2=$(free_port)
CLOSED=$(free_port)	# nothing listens here

# The probe: resolver and socket calls whose every result is printed.
# Names are bytes so that Python's IDNA codec stays out of the way.
cat >"$T/probe.py" <<'EOF'
import ctypes, errno, os, socket, sys

S, D = socket.SOCK_STREAM, socket.SOCK_DGRAM
I4, I6 = socket.AF_INET, socket.AF_INET6
P, C, N = socket.AI_PASSIVE, socket.AI_CANONNAME, socket.AI_NUMERICHOST
LONG = b"x" * 70 + b".invalid"     # fails inside libc, no DNS query
closed = int(os.environ["PROBE_CLOSED"])
if os.environ.get("PROBE_PIDFILE"):
    with open(os.environ["PROBE_PIDFILE"], "w") as f:
        f.write(str(os.getpid()))

libc = ctypes.CDLL(None, use_errno=True)

class hostent(ctypes.Structure):
    _fields_ = [("h_name", ctypes.c_char_p),
                ("h_aliases", ctypes.POINTER(ctypes.c_char_p)),
                ("h_addrtype", ctypes.c_int), ("h_length", ctypes.c_int),
                ("h_addr_list", ctypes.POINTER(ctypes.POINTER(ctypes.c_char)))]

libc.gethostbyname.restype = ctypes.POINTER(hostent)
libc.gethostbyname2.restype = ctypes.POINTER(hostent)

def fmt_hostent(h):
    aliases, addrs, i = [], [], 0
    while h.h_aliases[i]:
        aliases.append(h.h_aliases[i]); i += 1
    i = 0
    while h.h_addr_list[i]:
        addrs.append(socket.inet_ntop(h.h_addrtype,
                                      h.h_addr_list[i][:h.h_length])); i += 1
    return "%r %r %d %d %r" % (h.h_name, aliases, h.h_addrtype, h.h_length, addrs)

def gai(host, serv, fam=0, typ=0, proto=0, flags=0):
    try:
        return repr(socket.getaddrinfo(host, serv, fam, typ, proto, flags))
    except socket.gaierror as e:
        return "gaierror %d" % e.errno

def ghbn(name):
    out = []
    for f in (socket.gethostbyname, socket.gethostbyname_ex):
        try:
            out.append(repr(f(name)))
        except OSError as e:
            out.append("%s %s" % (type(e).__name__, e.errno))
    return " | ".join(out)

def c_ghbn(name, af=None):
    ctypes.set_errno(0)
    p = libc.gethostbyname(name) if af is None else libc.gethostbyname2(name, af)
    return (fmt_hostent(p.contents) if p else "NULL") + \
        " errno=%d" % ctypes.get_errno()

def c_ghbn_r(name, buflen, af=None):
    he = hostent()
    buf = ctypes.create_string_buffer(buflen)
    res = ctypes.POINTER(hostent)()
    herr = ctypes.c_int(0)
    if af is None:
        rc = libc.gethostbyname_r(name, ctypes.byref(he), buf, buflen,
                                  ctypes.byref(res), ctypes.byref(herr))
    else:
        rc = libc.gethostbyname2_r(name, af, ctypes.byref(he), buf, buflen,
                                   ctypes.byref(res), ctypes.byref(herr))
    return "rc=%d herr=%d %s" % (rc, herr.value,
                                 fmt_hostent(res.contents) if res else "NULL")

def c_gai_errno(name, serv):
    # errno after a call is part of libc's behaviour, so it is compared too.
    res = ctypes.c_void_p()
    ctypes.set_errno(4242)
    rc = libc.getaddrinfo(name, serv, None, ctypes.byref(res))
    e = ctypes.get_errno()
    if rc == 0:
        libc.freeaddrinfo(res)
    return "rc=%d errno=%d" % (rc, e)

def sock_errno(fn):
    try:
        return "ok %r" % (fn(),)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def nonblocking_refused(addr):
    s = socket.socket(I4, S)
    s.setblocking(False)
    first = s.connect_ex((addr, closed))
    import select
    select.select([], [s], [], 2)
    second = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    third = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    s.close()
    # The kernel may refuse a loopback connect before connect() returns
    # (a busy machine, seen once in a full run): the same outcome, told
    # at once instead of through SO_ERROR.
    if first == errno.ECONNREFUSED and second == 0 and third == 0:
        first, second = errno.EINPROGRESS, errno.ECONNREFUSED
    return " ".join(errno.errorcode.get(x, str(x)) for x in (first, second, third))

# Arguments NAME@FAMILIES: only the families a name has are asked for, as
# a lookup for a missing family would fall through to real DNS.
args = sys.argv[1:] or ["localhost@4", "127.0.0.1@46", "::1@46",
                        LONG.decode() + "@46"]
for arg in args:
    n, fams = arg.rsplit("@", 1)
    n = n.encode()
    print(n, "gai", gai(n, "80"))
    print(n, "gai stream http", gai(n, "http", 0, S))
    print(n, "gai dgram canon", gai(n, "53", 0, D, 0, C))
    print(n, "gai numerichost", gai(n, "80", 0, S, 0, N))
    print(n, "gai bad service", gai(n, "no-such-service", 0, S))
    print(n, "gai addrconfig", gai(n, "80", 0, S, 0, socket.AI_ADDRCONFIG))
    print(n, "gai errno", c_gai_errno(n, b"80"))
    if "4" in fams:
        print(n, "gai inet None", gai(n, None, I4))
        print(n, "ghbn", ghbn(n))
        print(n, "c gethostbyname", c_ghbn(n))
        print(n, "c gethostbyname_r", c_ghbn_r(n, 4096))
        print(n, "c gethostbyname_r small", c_ghbn_r(n, 8))
        print(n, "c gethostbyname2_r inet", c_ghbn_r(n, 4096, I4))
    if "6" in fams:
        print(n, "gai inet6 stream", gai(n, "8123", I6, S))
        print(n, "c gethostbyname2 inet6", c_ghbn(n, I6))
        print(n, "c gethostbyname2_r inet6", c_ghbn_r(n, 4096, I6))

print("NULL passive", gai(None, "8080", 0, S, 0, P))
print("NULL passive inet6", gai(None, "8080", I6, S, 0, P))
print("NULL http", gai(None, "http", 0, 0))
print("NULL NULL", gai(None, None))
print("NULL canon", gai(None, "80", 0, S, 0, C))
print("connect refused", sock_errno(lambda: socket.create_connection(("127.0.0.1", closed), 2)))
print("connect nonblocking refused", nonblocking_refused("127.0.0.1"))
u = socket.socket(socket.AF_UNIX, S)
print("connect unix missing", sock_errno(lambda: u.connect("/nonexistent/rlb.sock")))
u.close()
print("connect udp", sock_errno(lambda: socket.socket(I4, D).connect(("127.0.0.1", closed))))
print("close -1", sock_errno(lambda: os.close(-1)))
print("getsockopt bad fd", ctypes.c_int(libc.getsockopt(-1, 1, 4, None, None)).value,
      errno.errorcode.get(ctypes.get_errno()))
ctypes.set_errno(0)
print("connect bad fd", libc.connect(-1, None, 0), errno.errorcode.get(ctypes.get_errno()))

# Successful connect, getsockopt and close leave errno alone.
import struct
L = socket.socket(I4, S)
L.bind(("127.0.0.1", 0))
L.listen(4)
sa = struct.pack("<H", I4) + struct.pack(">H", L.getsockname()[1]) + \
    socket.inet_aton("127.0.0.1") + bytes(8)
s = socket.socket(I4, S)
ctypes.set_errno(4242)
rc = libc.connect(s.fileno(), sa, len(sa))
e1 = ctypes.get_errno()
v, vl = ctypes.c_int(-1), ctypes.c_uint(4)
ctypes.set_errno(4242)
rc2 = libc.getsockopt(s.fileno(), socket.SOL_SOCKET, socket.SO_ERROR,
                      ctypes.byref(v), ctypes.byref(vl))
e2 = ctypes.get_errno()
ctypes.set_errno(4242)
rc3 = libc.close(s.detach())
e3 = ctypes.get_errno()
print("errno kept: connect %d %d, getsockopt %d %d %d, close %d %d" %
      (rc, e1, rc2, v.value, e2, rc3, e3))
EOF

export PROBE_CLOSED=$CLOSED
PROBE="$PY $T/probe.py"

cat >"$T/good.conf" <<EOF
load_balancing = "in_order";
log_level = "warning";
clusters = (
  { name = "demo.cluster";
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "other.cluster";
    port = $PORT;
    replicas = ( { host = "r1.test"; address = "127.0.0.2"; } ); }
);
EOF

# ---------------------------------------------------------------------
# 1. Plain libc names, without nss_wrapper.

$PROBE >"$T/base.out" 2>"$T/base.err"
check "baseline probe runs" test -s "$T/base.out"
check_match "baseline has a libc error code for the unknown name" \
	'invalid.* gai gaierror -2$' "$(cat "$T/base.out")"

rm -f "$REPLICALB_CONFIG"
preload $PROBE >"$T/unconf.out" 2>"$T/unconf.err"
check "unconfigured: identical output" diff "$T/base.out" "$T/unconf.out"
check_empty "unconfigured: silent" "$T/unconf.err"

cp "$T/good.conf" "$REPLICALB_CONFIG"
preload $PROBE >"$T/conf.out" 2>"$T/conf.err"
check "configured: identical output for other names" \
	diff "$T/base.out" "$T/conf.out"
check_empty "configured: silent" "$T/conf.err"

REPLICALB_DISABLE=1 preload $PROBE >"$T/dis.out" 2>"$T/dis.err"
check "REPLICALB_DISABLE=1: identical output" diff "$T/base.out" "$T/dis.out"
check_empty "REPLICALB_DISABLE=1: silent" "$T/dis.err"

REPLICALB_LOG_LEVEL=debug preload $PROBE >"$T/debug.out" 2>"$T/debug.err"
check "log_level debug: identical output for other names" \
	diff "$T/base.out" "$T/debug.out"

# ---------------------------------------------------------------------
# 2. Fake names through nss_wrapper, with the library stacked on top.

need_nss_wrapper
export NSS_WRAPPER_HOSTS=$T/hosts
cat >"$NSS_WRAPPER_HOSTS" <<EOF
127.0.0.20 fake.passthrough.test fakealias
::1 fake6.passthrough.test
127.0.0.99 demo.cluster
127.0.0.2 r1.test
EOF
NAMES="fake.passthrough.test@4 fakealias@4 fake6.passthrough.test@6 localhost@4 127.0.0.1@46"

nss_only $PROBE $NAMES >"$T/nbase.out" 2>"$T/nbase.err"
check_match "nss_wrapper baseline resolves the fake name" \
	"fake.passthrough.test' gai stream http .*127.0.0.20" "$(cat "$T/nbase.out")"

rm -f "$REPLICALB_CONFIG"
preload_nss $PROBE $NAMES >"$T/nunconf.out" 2>"$T/nunconf.err"
check "nss_wrapper, unconfigured: identical output" \
	diff "$T/nbase.out" "$T/nunconf.out"
check_empty "nss_wrapper, unconfigured: silent" "$T/nunconf.err"

cp "$T/good.conf" "$REPLICALB_CONFIG"
preload_nss $PROBE $NAMES >"$T/nconf.out" 2>"$T/nconf.err"
check "nss_wrapper, configured: identical output for other names" \
	diff "$T/nbase.out" "$T/nconf.out"
check_empty "nss_wrapper, configured: silent" "$T/nconf.err"

# The virtual name itself: libc's (nss_wrapper's) answer unless configured.
vorder()
{
	"$@" $PY "$GAI" -u demo.cluster 80 2>&1
}
check_eq "nss_wrapper alone: demo.cluster is the fake host" \
	"127.0.0.99" "$(vorder nss_only env)"
check_eq "configured: demo.cluster is virtual" \
	"127.0.0.2 127.0.0.3 127.0.0.4" "$(vorder preload_nss env)"
check_eq "REPLICALB_DISABLE=1: demo.cluster passes through" \
	"127.0.0.99" "$(vorder preload_nss env REPLICALB_DISABLE=1)"
check_eq "config missing: demo.cluster passes through" "127.0.0.99" \
	"$(vorder preload_nss env REPLICALB_CONFIG="$T/missing.conf")"

# ---------------------------------------------------------------------
# 3. Real programs to non-virtual servers, under the preload.

start_replica plain 127.0.0.2 "$PORT" http || fail "start http server"
start_replica plaintcp 127.0.0.3 "$PORT2" tcp || fail "start tcp server"

out=$(preload curl -q -sS --max-time 5 "http://127.0.0.2:$PORT/" 2>"$T/curl.err")
check_eq "curl to an address literal" "replica=plain" "$out"
check_empty "curl: silent" "$T/curl.err"

out=$(preload_nss curl -q -sS --max-time 5 "http://r1.test:$PORT/" 2>"$T/curl2.err")
check_eq "curl to an nss_wrapper name" "replica=plain" "$out"
check_empty "curl to an nss_wrapper name: silent" "$T/curl2.err"

out=$(timeout 10 env LD_PRELOAD="$RLB_LIB" nc -d 127.0.0.3 "$PORT2" \
	</dev/null 2>"$T/nc.err")
check_eq "nc to an address literal" "replica=plaintcp" "$out"
check_empty "nc: silent" "$T/nc.err"

out=$(timeout 10 env LD_PRELOAD="$RLB_LIB" socat -u "TCP:127.0.0.3:$PORT2" \
	- 2>"$T/socat.err")
check_eq "socat to an address literal" "replica=plaintcp" "$out"
check_empty "socat: silent" "$T/socat.err"

# ---------------------------------------------------------------------
# 4. A broken config: the program works; one error line with file:line.

broken_run()	# CONFIG-TEXT-ON-STDIN -> runs the probe, sets out/err files
{
	write_config
	PROBE_PIDFILE=$T/probe.pidno preload $PROBE >"$T/broken.out" \
		2>"$T/broken.err"
	echo $? >"$T/broken.rc"
}

broken_checks()	# LABEL LINE
{
	local pid
	pid=$(cat "$T/probe.pidno" 2>/dev/null)
	check_eq "$1: program exits 0" "0" "$(cat "$T/broken.rc")"
	check "$1: identical output" diff "$T/base.out" "$T/broken.out"
	check_eq "$1: exactly one line on stderr" "1" \
		"$(wc -l <"$T/broken.err" | tr -d ' ')"
	check_match "$1: prefixed replicalb[PID]" "^replicalb\\[$pid\\]: " \
		"$(cat "$T/broken.err")"
	check_match "$1: names file:line" "replicalb\\.conf:$2([^0-9]|$)" \
		"$(cat "$T/broken.err")"
}

broken_run <<'EOF'
load_balancing = "in_order";
clusters = ( { name = "demo.cluster";
  load_balancing = "nearest";
  replicas = ( "127.0.0.2" ); } );
EOF
broken_checks "unknown policy" 3

broken_run <<'EOF'
load_balancing = "in_order";
clusters = ( { name = "demo.cluster";
  replicas = ( "127.0.0.2" ] ); } );
EOF
broken_checks "syntax error" 3

# log_level none: not even that message.
REPLICALB_LOG_LEVEL=none preload $PROBE >"$T/none.out" 2>"$T/none.err"
check "broken config, REPLICALB_LOG_LEVEL=none: identical output" \
	diff "$T/base.out" "$T/none.out"
check_empty "broken config, REPLICALB_LOG_LEVEL=none: silent" "$T/none.err"

# The virtual name is not virtual while the config is broken.
out=$(vorder preload_nss env)
check_eq "broken config: demo.cluster passes through" "127.0.0.99" \
	"$(printf '%s\n' "$out" | grep -v '^replicalb\[')"

finish
