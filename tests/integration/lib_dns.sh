# tests/integration/lib_dns.sh - a real DNS server for the DNS membership
# tests (issue 15), sourced after tests/lib.sh:
#
#	. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
#	. "$top_srcdir/tests/integration/lib_dns.sh"
#	dns_enter_ns "$@"	# re-run this script in private namespaces
#	dns_setup		# rlb_setup, the test resolv.conf, named running
#	dns_add_srv _http._tcp.web.rlb.test 0 0 "$PORT" s1.rlb.test
#	...
#	finish
#
# The script runs in its own network, mount and PID namespaces (unshare
# -n -m -p; root): only `lo` exists, so no query can leave the machine;
# /etc/resolv.conf (nameserver 127.0.0.53), /etc/hosts and
# /etc/nsswitch.conf are bind-mounted over inside the mount namespace
# only, never on the host, so glibc's getaddrinfo and res_query reach this
# server and nothing else; and when the script's shell (PID 1 there)
# exits, the kernel kills whatever it left running.
#
# The server is BIND 9's named, authoritative for rlb.test. on
# 127.0.0.53 port 53, UDP and TCP, no recursion, dynamic updates (RFC
# 2136, nsupdate) allowed from 127.0.0.0/8, EDNS buffer 1232 (so that a
# large answer is truncated over UDP and arrives complete over TCP), every
# record TTL $DNS_TTL (default 0, as Consul serves; the SOA minimum, the
# negative TTL, is 0 too). Zone file, journal and log live in $DNS_DIR
# ($T/dns), removed with $T. named keeps its journal across dns_stop /
# dns_start, so a restarted server serves what the updates left.
#
# DNS_HARNESS_SELFTEST=1 (or running this file itself: bash lib_dns.sh)
# makes dns_setup check only the harness (the server answers, updates,
# TCP for large answers, glibc and res_query reach only it, the malformed
# server) and exit: it needs neither the library nor a build
# (tests/integration/dns_harness.sh runs it under make check).

DNS_ADDR=127.0.0.53
DNS_ZONE=rlb.test
: "${DNS_TTL:=0}"
DNS_DIR=
DNS_RESOLV_MOUNTED=
DNS_BAD=$top_srcdir/tests/helpers/bad_dns.py

# ---------------------------------------------------------------------
# Namespaces and the resolver files

# dns_enter_ns ARGS... : unless already inside, re-run the calling script
# (with ARGS) in new network, mount and PID namespaces, with a time limit,
# and exit with its status; then check that the host's /etc/resolv.conf
# is unchanged. Inside: brings up lo with the server's address.
dns_enter_ns()
{
	local tool before after rc
	if [ -z "${RLB_IN_DNSNS:-}" ]; then
		[ "$(id -u)" = 0 ] || skip "not root: unshare -n -m -p needs root"
		for tool in unshare ip mount named nsupdate dig; do
			command -v "$tool" >/dev/null || {
				echo "FAIL - $tool not installed (scripts/deps.sh)"
				exit 1
			}
		done
		before=$(sha256sum /etc/resolv.conf 2>&1)
		# --kill-child=TERM: when timeout kills unshare, the script's
		# shell gets SIGTERM and its cleanup trap runs.
		env RLB_IN_DNSNS=1 timeout "${DNS_NS_TIMEOUT:-300}" \
			unshare -n -m -p --fork --kill-child=TERM --mount-proc \
			--propagation private bash "$0" "$@"
		rc=$?
		after=$(sha256sum /etc/resolv.conf 2>&1)
		if [ "$before" != "$after" ]; then
			echo "FAIL - the host's /etc/resolv.conf changed"
			exit 1
		fi
		exit "$rc"
	fi
	ip link set lo up || exit 1
	ip addr add "$DNS_ADDR/32" dev lo || exit 1
}

# dns_use_server ADDR : bind-mount a resolv.conf naming only ADDR over
# /etc/resolv.conf (namespace only; replaces the previous one). Programs
# started afterwards ask ADDR; glibc also rereads a changed resolv.conf.
dns_use_server()
{
	local f=$DNS_DIR/resolv-$1.conf
	# $DNS_RESOLV_SEARCH, $DNS_RESOLV_OPTIONS: a search list, more options.
	printf 'nameserver %s\n%soptions timeout:1 attempts:1 %s\n' "$1" \
		"${DNS_RESOLV_SEARCH:+search $DNS_RESOLV_SEARCH
}" "${DNS_RESOLV_OPTIONS:-}" >"$f"
	if [ -n "$DNS_RESOLV_MOUNTED" ]; then
		umount /etc/resolv.conf || return 1
	fi
	mount --bind "$f" /etc/resolv.conf || return 1
	DNS_RESOLV_MOUNTED=$1
}

# dns_setup : what a DNS test needs after dns_enter_ns: rlb_setup (temp
# dir $T, cleanup trap, clean environment; the canary too), $DNS_DIR, the
# test resolver files bind-mounted, named started. With
# DNS_HARNESS_SELFTEST=1: the harness self-check, then exit.
dns_setup()
{
	[ -n "${RLB_IN_DNSNS:-}" ] || {
		echo "FAIL - dns_setup outside dns_enter_ns"
		exit 1
	}
	if [ "${DNS_HARNESS_SELFTEST:-0}" = 1 ]; then
		umask 022
		T=$(mktemp -d "${TMPDIR:-/tmp}/rlbtest.XXXXXX") || exit 1
		trap rlb_cleanup EXIT
		trap 'exit 1' INT TERM HUP
		export LC_ALL=C PYTHONDONTWRITEBYTECODE=1
	else
		rlb_setup
		write_dns_client
	fi
	DNS_DIR=$T/dns
	mkdir -p "$DNS_DIR" || exit 1
	printf '127.0.0.1 localhost\n::1 localhost\n' >"$DNS_DIR/hosts"
	printf 'hosts: files dns\n' >"$DNS_DIR/nsswitch.conf"
	mount --bind "$DNS_DIR/hosts" /etc/hosts || exit 1
	mount --bind "$DNS_DIR/nsswitch.conf" /etc/nsswitch.conf || exit 1
	if ! dns_use_server "$DNS_ADDR"; then
		echo "FAIL - cannot bind-mount a test /etc/resolv.conf"
		exit 1
	fi
	dns_start || {
		fail "named starts and answers"
		finish
	}
	if [ "${DNS_HARNESS_SELFTEST:-0}" = 1 ]; then
		dns_selftest
		finish
	fi
}

# ---------------------------------------------------------------------
# The server

dns_write_conf()
{
	cat >"$DNS_DIR/named.conf" <<EOF
options {
	directory "$DNS_DIR";
	pid-file none;
	lock-file none;
	session-keyfile none;
	listen-on port 53 { $DNS_ADDR; };
	listen-on-v6 { none; };
	recursion no;
	allow-query { any; };
	dnssec-validation no;
	notify no;
	edns-udp-size 1232;
	max-udp-size 1232;
	minimal-responses no;
	querylog yes; # to named.log: -g logs everything to stderr
};
controls { };
zone "$DNS_ZONE" {
	type primary;
	file "$DNS_DIR/$DNS_ZONE.db";
	journal "$DNS_DIR/$DNS_ZONE.db.jnl";
	allow-update { 127.0.0.0/8; };
	check-names ignore;
	max-records-per-type 0;
	max-types-per-name 0;
};
EOF
	cat >"$DNS_DIR/$DNS_ZONE.db" <<EOF
\$TTL $DNS_TTL
@	IN SOA ns.$DNS_ZONE. hostmaster.$DNS_ZONE. 1 3600 600 86400 0
@	IN NS ns
ns	IN A $DNS_ADDR
EOF
}

# dns_start : start named (first call: write its config and zone) in the
# foreground, in the background of this shell, and wait until it answers
# for the zone (bounded: 10 s). $DNS_START_MS: how long that took.
dns_start()
{
	local t0 i pid
	[ -f "$DNS_DIR/named.conf" ] || dns_write_conf
	t0=$(now_ms)
	named -g -4 -n 1 -c "$DNS_DIR/named.conf" >>"$DNS_DIR/named.log" 2>&1 &
	pid=$!
	echo "$pid" >"$T/dns-named.pid"
	for i in $(seq 100); do
		[ "$(dns_rcode SOA "$DNS_ZONE")" = NOERROR ] && {
			DNS_START_MS=$(($(now_ms) - t0))
			return 0
		}
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "named did not answer:"
	tail -n 20 "$DNS_DIR/named.log" | sed 's/^/    | /'
	return 1
}

# dns_stop : stop named (DNS down: UDP queries are refused at once).
dns_stop()
{
	stop_pidfile "$T/dns-named.pid"
}

# dns_freeze / dns_thaw : SIGSTOP / SIGCONT named: queries time out
# (resolv.conf: timeout:1 attempts:1) instead of being refused.
dns_freeze()
{
	kill -STOP "$(cat "$T/dns-named.pid")"
}

dns_thaw()
{
	kill -CONT "$(cat "$T/dns-named.pid")"
}

# ---------------------------------------------------------------------
# Queries (dig, straight to the server)

# dns_dig ARGS... : dig at the server, 1 s timeout, one try.
dns_dig()
{
	dig @"$DNS_ADDR" +time=1 +tries=1 "$@"
}

# dns_query TYPE NAME : the answer's data, one record a line, sorted.
dns_query()
{
	dns_dig +short +tcp "$2" "$1" | sort
}

# dns_rcode TYPE NAME : NOERROR, NXDOMAIN, ... or "noanswer".
dns_rcode()
{
	local s
	s=$(dns_dig +norec "$2" "$1" 2>/dev/null |
		sed -n 's/.*status: \([A-Z]*\),.*/\1/p')
	echo "${s:-noanswer}"
}

# dns_serial : the zone's SOA serial (each update increments it).
dns_serial()
{
	dns_dig +short SOA "$DNS_ZONE" | awk '{print $3}'
}

# ---------------------------------------------------------------------
# Dynamic updates (nsupdate)
#
# dns_rr_* print one nsupdate command; dns_update sends commands read
# from stdin in one nsupdate session, so that many changes cost one
# process: each `send` line is one update message (one zone change). The
# dns_add_* / dns_del_* helpers are one command and its send.

dns_fqdn()
{
	case $1 in
	*.) printf '%s' "$1" ;;
	*) printf '%s.' "$1" ;;
	esac
}

# dns_rr_add_srv NAME PRIO WEIGHT PORT TARGET
dns_rr_add_srv()
{
	echo "update add $(dns_fqdn "$1") $DNS_TTL SRV $2 $3 $4 $(dns_fqdn "$5")"
}

# dns_rr_del_srv NAME [PRIO WEIGHT PORT TARGET] : one record, or all SRV.
dns_rr_del_srv()
{
	if [ $# -ge 5 ]; then
		echo "update delete $(dns_fqdn "$1") SRV $2 $3 $4 $(dns_fqdn "$5")"
	else
		echo "update delete $(dns_fqdn "$1") SRV"
	fi
}

# dns_rr_add_a NAME ADDR
dns_rr_add_a()
{
	echo "update add $(dns_fqdn "$1") $DNS_TTL A $2"
}

# dns_rr_del_a NAME [ADDR]
dns_rr_del_a()
{
	echo "update delete $(dns_fqdn "$1") A${2:+ $2}"
}

# dns_rr_add_txt NAME TEXT
dns_rr_add_txt()
{
	echo "update add $(dns_fqdn "$1") $DNS_TTL TXT \"$2\""
}

# dns_rr_del_name NAME : every record of NAME (NXDOMAIN if it has no
# names below it).
dns_rr_del_name()
{
	echo "update delete $(dns_fqdn "$1")"
}

# dns_update : nsupdate commands on stdin (update add/delete lines and
# `send` lines) sent to the server for the zone in one session; fails
# when nsupdate does (e.g. the server is down). -t 5: give up on a dead
# server after 5 s, not nsupdate's 300.
dns_update()
{
	{
		echo "server $DNS_ADDR 53"
		echo "zone $DNS_ZONE"
		cat
	} >"$DNS_DIR/nsupdate.in"
	nsupdate -t 5 -u 1 -r 2 "$DNS_DIR/nsupdate.in" >"$DNS_DIR/nsupdate.out" 2>&1 && return 0
	echo "nsupdate failed:"
	sed 's/^/    | /' "$DNS_DIR/nsupdate.out" | head -n 10
	return 1
}

# dns_add_srv NAME PRIO WEIGHT PORT TARGET
dns_add_srv()
{
	{ dns_rr_add_srv "$@"; echo send; } | dns_update
}

# dns_del_srv NAME [PRIO WEIGHT PORT TARGET]
dns_del_srv()
{
	{ dns_rr_del_srv "$@"; echo send; } | dns_update
}

# dns_add_a NAME ADDR... : one A record per ADDR, one update.
dns_add_a()
{
	local name=$1 a
	shift
	{ for a in "$@"; do dns_rr_add_a "$name" "$a"; done; echo send; } |
		dns_update
}

# dns_del_a NAME [ADDR]
dns_del_a()
{
	{ dns_rr_del_a "$@"; echo send; } | dns_update
}

# dns_add_txt NAME TEXT : e.g. to keep a name whose SRV records are
# deleted (NODATA rather than NXDOMAIN).
dns_add_txt()
{
	{ dns_rr_add_txt "$@"; echo send; } | dns_update
}

# dns_set_nxdomain NAME : delete every record of NAME.
dns_set_nxdomain()
{
	{ dns_rr_del_name "$1"; echo send; } | dns_update
}

# ---------------------------------------------------------------------
# The malformed server (tests/helpers/bad_dns.py)

# bad_dns_start ADDR : start it on ADDR port 53 with zone file
# $DNS_DIR/bad.zone (write it first) and mode file $DNS_DIR/bad.mode
# ("good"); wait until it is bound.
bad_dns_start()
{
	[ -f "$DNS_DIR/bad.mode" ] || echo good >"$DNS_DIR/bad.mode"
	touch "$DNS_DIR/bad.zone"
	$PY "$DNS_BAD" --host "$1" --zone "$DNS_DIR/bad.zone" \
		--mode-file "$DNS_DIR/bad.mode" >"$DNS_DIR/bad.out" 2>&1 &
	echo $! >"$T/dns-bad.pid"
	wait_until 5 grep -q '^ready$' "$DNS_DIR/bad.out" && return 0
	echo "bad_dns.py did not start:"
	sed 's/^/    | /' "$DNS_DIR/bad.out"
	return 1
}

# bad_dns_mode WORD... : the mode file's words (tests/helpers/bad_dns.py):
# one break of SRV answers - good, badptr, loop, short, overrun, count,
# garbage - and modifiers of every answer: delay=SECS (each query answered
# SECS later, queries not serialised), drop (no answer at all), noglue (SRV
# answers without the targets' addresses), ttl=N (records' TTL, default 0).
# E.g. bad_dns_mode good delay=0.3 noglue ttl=1.
bad_dns_mode()
{
	echo "$*" >"$DNS_DIR/bad.mode.tmp" && mv -f "$DNS_DIR/bad.mode.tmp" "$DNS_DIR/bad.mode"
}

# ---------------------------------------------------------------------
# A long-running client: $PY "$DNSCLIENT" [options] NAME PORT
#
# Resolves NAME (getaddrinfo, AF_INET, stream) in a loop and connects;
# one line per resolution on stdout, flushed:
#   TIME RES_MS ok ADDR,ADDR,... served=NAME|- refused=ADDR,...|-
#   TIME RES_MS error EAI_NAME
# TIME is wall-clock seconds (compare with now_ms / 1000), RES_MS how long
# getaddrinfo took. Options:
#   -m http   (default) try the addresses in order, count each refused
#             one, GET / from the first that accepts: served=NAME is
#             the server's replica name
#   -m all    connect to every address of the answer, count the refused
#   -m none   resolve only
#   -i SECS   pause between resolutions (default 0.05)
#   -n COUNT  stop after COUNT resolutions (default: until -s)
#   -s FILE   stop once FILE exists
#   -r K      K more resolutions per round, answers dropped (to hand out
#             many addresses: a long-lived process)
#   -o FILE   at exit, "refused ADDR N" and "ok ADDR N" lines (the
#             connects this process saw fail or succeed per address) and
#             "handed N" (addresses getaddrinfo returned in all)
write_dns_client()
{
	DNSCLIENT=$T/dnsclient.py
	cat >"$DNSCLIENT" <<'PYEOF'
import errno, getopt, os, socket, sys, time
opts, args = getopt.gnu_getopt(sys.argv[1:], "m:i:n:s:o:r:")
o = dict(opts)
name, port = args[0], int(args[1])
mode = o.get("-m", "http")
pause = float(o.get("-i", "0.05"))
count = int(o.get("-n", "0"))
extra = int(o.get("-r", "0"))
handed = 0
stop = o.get("-s")
eai = {getattr(socket, k): k for k in dir(socket) if k.startswith("EAI_")}
refused, ok = {}, {}


def attempt(addr):
    # Blocking: the library bounds the connect (connect_timeout_ms).
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.connect(addr)
    except ConnectionRefusedError:
        s.close()
        refused[addr[0]] = refused.get(addr[0], 0) + 1
        return None
    except OSError:
        s.close()
        return None
    ok[addr[0]] = ok.get(addr[0], 0) + 1
    s.settimeout(3)
    return s


def fetch(s):
    try:
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        for line in data.decode("ascii", "replace").splitlines():
            if line.startswith("replica="):
                return line[8:]
        return "?"
    except OSError:
        return "?"
    finally:
        s.close()


i = 0
while True:
    if stop and os.path.exists(stop):
        break
    if count and i >= count:
        break
    if i:
        time.sleep(pause)
    i += 1
    t = time.time()
    t0 = time.monotonic()
    try:
        res = socket.getaddrinfo(name, port, socket.AF_INET,
                                 socket.SOCK_STREAM)
    except socket.gaierror as e:
        print("%.3f %d error %s" % (t, (time.monotonic() - t0) * 1000,
                                    eai.get(e.errno, str(e.errno))),
              flush=True)
        continue
    ms = (time.monotonic() - t0) * 1000
    addrs = [r[4] for r in res]
    handed += len(addrs)
    for _ in range(extra):
        try:
            handed += len(socket.getaddrinfo(name, port, socket.AF_INET,
                                             socket.SOCK_STREAM))
        except socket.gaierror:
            pass
    served, bad = "-", []
    if mode == "http":
        for a in addrs:
            s = attempt(a)
            if s is None:
                bad.append(a[0])
                continue
            served = fetch(s)
            break
    elif mode == "all":
        for a in addrs:
            s = attempt(a)
            if s is None:
                bad.append(a[0])
            else:
                s.close()
    print("%.3f %d ok %s served=%s refused=%s" % (
        t, ms, ",".join("%s:%d" % a for a in addrs), served,
        ",".join(bad) or "-"), flush=True)

if "-o" in o:
    with open(o["-o"], "w") as f:
        for a, n in sorted(refused.items()):
            f.write("refused %s %d\n" % (a, n))
        for a, n in sorted(ok.items()):
            f.write("ok %s %d\n" % (a, n))
        f.write("handed %d\n" % handed)
PYEOF
}

# dns_client TAG NAME PORT [OPTIONS...] : start the client preloaded in
# the background: stdout $T/TAG.log, stderr $T/TAG.err, summary
# $T/TAG.sum; stop file $T/TAG.stop (dns_client_stop TAG).
dns_client()
{
	local tag=$1
	shift
	rm -f "$T/$tag.stop" "$T/$tag.sum"
	preload $PY "$DNSCLIENT" -s "$T/$tag.stop" -o "$T/$tag.sum" "$@" \
		>"$T/$tag.log" 2>"$T/$tag.err" &
	echo $! >"$T/$tag.pid"
}

# dns_client_stop TAG : ask it to stop, wait (bounded: 10 s); returns its
# exit status (137 etc. if it had to be killed or crashed).
dns_client_stop()
{
	local pid rc i
	pid=$(cat "$T/$1.pid")
	touch "$T/$1.stop"
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	rm -f "$T/$1.pid"
	return "$rc"
}

# client_lines TAG : the number of lines the client has printed.
client_lines()
{
	wc -l <"$T/$1.log" 2>/dev/null || echo 0
}

# client_wait_lines TAG N : wait (bounded: 10 s) until the client has
# printed N lines.
client_wait_lines()
{
	local i
	for i in $(seq 100); do
		[ "$(client_lines "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# client_served_after TAG NAME MS : whether NAME served a request the
# client made at or after wall-clock MS (now_ms).
client_served_after()
{
	awk -v n="served=$2" -v t="$3" '$1 * 1000 >= t && $5 == n {f = 1} END {exit !f}' \
		"$T/$1.log"
}

# client_warnings TAG : the number of "replicalb[PID]: " lines on its stderr.
client_warnings()
{
	grep -cE '^replicalb\[[0-9]+\]: ' "$T/$1.err" 2>/dev/null
}

# ---------------------------------------------------------------------
# Self-check: the harness alone

# res_query_count TYPE NAME : glibc's res_query (ctypes, 64 KiB buffer):
# "ret=OK|-1 rcode=N ancount=N tc=N" of the reply it leaves in the
# buffer (it returns -1 for NODATA and NXDOMAIN, reply still there), or
# "failed" (no reply).
res_query_count()
{
	$PY - "$1" "$2" <<'EOF'
import ctypes, ctypes.util, struct, sys
types = {"A": 1, "SRV": 33, "TXT": 16, "SOA": 6}
lib = ctypes.CDLL(ctypes.util.find_library("resolv") or "libresolv.so.2")
buf = ctypes.create_string_buffer(65536)
n = lib.res_query(sys.argv[2].encode(), 1, types[sys.argv[1]], buf, 65536)
flags, qd, an = struct.unpack("!HHH", buf.raw[2:8])
if n < 0 and flags == 0:
    print("failed")
    sys.exit(0)
print("ret=%s rcode=%d ancount=%d tc=%d" %
      ("OK" if n >= 12 else n, flags & 15, an, (flags >> 9) & 1))
EOF
}

dns_selftest()
{
	local t0 ms out i m serial
	echo "# named answered $DNS_START_MS ms after start"
	check_eq "only lo in the network namespace" "lo:" \
		"$(ip -o link | awk '{print $2}' | tr '\n' ' ' | sed 's/ $//')"
	check_eq "resolv.conf in the namespace names only the test server" \
		"nameserver $DNS_ADDR" "$(grep nameserver /etc/resolv.conf)"
	check_eq "the SOA is served" NOERROR "$(dns_rcode SOA "$DNS_ZONE")"
	check_eq "no recursion: another zone is refused" REFUSED \
		"$(dns_rcode A example.com)"

	t0=$(now_ms)
	check "nsupdate adds an SRV record and its target" \
		dns_update <<EOF
$(dns_rr_add_srv _http._tcp.web.$DNS_ZONE 0 5 8080 S1.$DNS_ZONE)
$(dns_rr_add_a s1.$DNS_ZONE 127.0.0.21)
send
EOF
	ms=$(($(now_ms) - t0))
	echo "# one nsupdate session, one update: $ms ms"
	check_eq "the update is served at once" "0 5 8080 S1.$DNS_ZONE." \
		"$(dns_query SRV _http._tcp.web.$DNS_ZONE)"
	check_match "the target's A record comes as additional data" \
		"^s1\.$DNS_ZONE\..*A.*127\.0\.0\.21" \
		"$(dns_dig +norec SRV _http._tcp.web.$DNS_ZONE |
			sed -n '/ADDITIONAL SECTION/,/^$/p')"
	check_match "records are served with TTL $DNS_TTL" \
		"^_http\._tcp\.web\.$DNS_ZONE\.[[:space:]]+$DNS_TTL[[:space:]]" \
		"$(dns_dig +noall +answer SRV _http._tcp.web.$DNS_ZONE)"
	check_eq "glibc getaddrinfo reaches the server" 127.0.0.21 \
		"$(getent ahostsv4 s1.$DNS_ZONE | awk 'NR == 1 {print $1}')"
	check_eq "res_query reaches the server" "ret=OK rcode=0 ancount=1 tc=0" \
		"$(res_query_count SRV _http._tcp.web.$DNS_ZONE)"
	check_not "nothing else is reachable: getent of a real name fails" \
		getent ahostsv4 debian.org
	check_not "nothing else is reachable: the host's own resolver" \
		dig @9.9.9.9 +time=1 +tries=1 debian.org

	check "NODATA: SRV deleted, TXT kept" dns_update <<EOF
$(dns_rr_add_txt _http._tcp.web.$DNS_ZONE keep)
$(dns_rr_del_srv _http._tcp.web.$DNS_ZONE)
send
EOF
	check_eq "NODATA is NOERROR with no SRV" "NOERROR:" \
		"NOERROR:$(dns_query SRV _http._tcp.web.$DNS_ZONE)"
	check_eq "res_query sees NODATA (and returns -1)" "ret=-1 rcode=0 ancount=0 tc=0" \
		"$(res_query_count SRV _http._tcp.web.$DNS_ZONE)"
	check "NXDOMAIN: the name deleted" dns_set_nxdomain _http._tcp.web.$DNS_ZONE
	check_eq "the deleted name is NXDOMAIN" NXDOMAIN \
		"$(dns_rcode SRV _http._tcp.web.$DNS_ZONE)"

	# 300 targets: one update message (nsupdate goes to TCP for it).
	t0=$(now_ms)
	check "one update adds 300 SRV targets and 300 A records" dns_update <<EOF
$(for i in $(seq -w 1 300); do
	dns_rr_add_srv _http._tcp.big.$DNS_ZONE 0 0 9000 t$i.big.$DNS_ZONE
	dns_rr_add_a t$i.big.$DNS_ZONE 127.0.2.$((10#$i % 250 + 1))
done)
send
EOF
	echo "# one update of 600 records: $(($(now_ms) - t0)) ms"
	check_eq "300 SRV records over TCP" 300 \
		"$(dns_query SRV _http._tcp.big.$DNS_ZONE | wc -l)"
	out=$(dns_dig +notcp +ignore +bufsize=1232 SRV _http._tcp.big.$DNS_ZONE)
	check_match "over UDP the answer is truncated (TC set)" \
		'flags: qr aa tc' "$out"
	echo "# UDP, EDNS 1232: $(printf '%s\n' "$out" | grep -o 'ANSWER: [0-9]*') before TC"
	check_eq "res_query gets all 300 (glibc retries over TCP)" \
		"ret=OK rcode=0 ancount=300 tc=0" \
		"$(res_query_count SRV _http._tcp.big.$DNS_ZONE)"
	dns_add_a bigpool.$DNS_ZONE $(for i in $(seq 300); do
		echo 127.0.$((i / 200 + 3)).$((i % 200 + 1)); done) >/dev/null
	check_eq "getaddrinfo gets all 300 A records of a name" 300 \
		"$($PY -c 'import socket; print(len({a[4][0] for a in socket.getaddrinfo("bigpool.rlb.test", 1, socket.AF_INET, socket.SOCK_STREAM)}))')"

	# Many updates in one session, as dns_churn.sh sends its 1,000.
	serial=$(dns_serial)
	t0=$(now_ms)
	check "one nsupdate session sends 200 updates" dns_update <<EOF
$(for i in $(seq 100); do
	dns_rr_add_srv _http._tcp.churn.$DNS_ZONE 0 0 9000 c$((i % 20)).$DNS_ZONE
	echo send
	dns_rr_del_srv _http._tcp.churn.$DNS_ZONE 0 0 9000 c$((i % 20)).$DNS_ZONE
	echo send
done)
EOF
	ms=$(($(now_ms) - t0))
	echo "# 200 updates in one session: $ms ms"
	check_eq "each of the 200 updates moved the serial" \
		"$((serial + 200))" "$(dns_serial)"

	# Down, frozen, restarted.
	dns_stop
	t0=$(now_ms)
	check_eq "named stopped: queries get no answer" noanswer \
		"$(dns_rcode SOA "$DNS_ZONE")"
	echo "# a query to the stopped server fails after $(($(now_ms) - t0)) ms"
	check "named restarts" dns_start
	echo "# named answered $DNS_START_MS ms after restart"
	check_eq "the updates survive a restart (journal)" 300 \
		"$(dns_query SRV _http._tcp.big.$DNS_ZONE | wc -l)"
	dns_freeze
	t0=$(now_ms)
	check_eq "named frozen: queries time out" noanswer \
		"$(dns_rcode SOA "$DNS_ZONE")"
	ms=$(($(now_ms) - t0))
	check_ge "a query to a frozen server takes the 1 s timeout" 900 "$ms"
	dns_thaw
	check_eq "named thawed: it answers again" NOERROR \
		"$(dns_rcode SOA "$DNS_ZONE")"

	# The malformed server, its modes as dig sees them.
	cat >"$DNS_DIR/bad.zone" <<EOF
_http._tcp.mal.$DNS_ZONE SRV 0 0 9000 m1.mal.$DNS_ZONE
_http._tcp.mal.$DNS_ZONE SRV 0 0 9000 m2.mal.$DNS_ZONE
m1.mal.$DNS_ZONE A 127.0.0.61
m2.mal.$DNS_ZONE A 127.0.0.62
EOF
	check "bad_dns.py starts" bad_dns_start 127.0.0.54
	check_eq "bad_dns.py good: two SRV records" \
		"0 0 9000 m1.mal.$DNS_ZONE. 0 0 9000 m2.mal.$DNS_ZONE." \
		"$(dig @127.0.0.54 +time=1 +tries=1 +short SRV _http._tcp.mal.$DNS_ZONE | sort | tr '\n' ' ' | sed 's/ $//')"
	check_eq "bad_dns.py good: an A record" 127.0.0.61 \
		"$(dig @127.0.0.54 +time=1 +tries=1 +short A m1.mal.$DNS_ZONE)"
	check_eq "bad_dns.py: an unknown name is NXDOMAIN" NXDOMAIN \
		"$(dig @127.0.0.54 +time=1 +tries=1 SRV nope.$DNS_ZONE | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')"
	for m in badptr loop short overrun count garbage; do
		bad_dns_mode "$m"
		out=$(dig @127.0.0.54 +time=1 +tries=1 +norec SRV _http._tcp.mal.$DNS_ZONE 2>&1)
		if printf '%s\n' "$out" | grep -q 'ANSWER SECTION' &&
			! printf '%s\n' "$out" | grep -qiE 'malformed|bad packet'; then
			fail "bad_dns.py $m: dig rejects the message" "$(printf '%s\n' "$out" | head -5)"
		else
			pass "bad_dns.py $m: dig rejects the message"
		fi
		echo "# $m: $(printf '%s\n' "$out" | grep -m1 -iE 'malformed|bad|error|unexpected|timed out|FORMERR|warning' )"
	done
	# The modifiers of every answer (issue 20's slow, silent and
	# glueless servers).
	bad_dns_mode good noglue ttl=7
	out=$(dig @127.0.0.54 +time=1 +tries=1 +norec SRV _http._tcp.mal.$DNS_ZONE 2>&1)
	check_match "bad_dns.py noglue: no additional section" 'ADDITIONAL: 0' "$out"
	check_match "bad_dns.py ttl=7: the records' TTL" \
		"^_http\._tcp\.mal\.$DNS_ZONE\.[[:space:]]+7[[:space:]]" "$out"
	bad_dns_mode good drop
	check_match "bad_dns.py drop: no answer" 'timed out|no servers' \
		"$(dig @127.0.0.54 +time=1 +tries=1 A m1.mal.$DNS_ZONE 2>&1)"
	# Two questions at once, each answered 1 s late: both in ~1 s, not 2.
	bad_dns_mode good delay=1
	t0=$(now_ms)
	dig @127.0.0.54 +time=3 +tries=1 +short A m1.mal.$DNS_ZONE >"$DNS_DIR/d1.out" &
	dig @127.0.0.54 +time=3 +tries=1 +short A m2.mal.$DNS_ZONE >"$DNS_DIR/d2.out"
	wait
	ms=$(($(now_ms) - t0))
	check_eq "bad_dns.py delay=1: both answered" "127.0.0.61 127.0.0.62" \
		"$(cat "$DNS_DIR/d1.out" "$DNS_DIR/d2.out" | tr '\n' ' ' | sed 's/ $//')"
	check_ge "bad_dns.py delay=1: not before the delay (ms)" 950 "$ms"
	check_le "bad_dns.py delay=1: questions not serialised (ms)" 1800 "$ms"
	bad_dns_mode good
	dns_use_server 127.0.0.54
	check_eq "resolv.conf switched: res_query asks bad_dns.py" \
		"ret=OK rcode=0 ancount=2 tc=0" \
		"$(res_query_count SRV _http._tcp.mal.$DNS_ZONE)"
	dns_use_server "$DNS_ADDR"
	check_eq "resolv.conf switched back to named" 300 \
		"$(res_query_count SRV _http._tcp.big.$DNS_ZONE | sed 's/.*ancount=\([0-9]*\).*/\1/')"
}

# Run as a script: the self-check.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
	DNS_BAD=$top_srcdir/tests/helpers/bad_dns.py
	export DNS_HARNESS_SELFTEST=1
	dns_enter_ns "$@"
	dns_setup
fi
