#!/bin/bash
# syslog.sh - log_target = "syslog" (design.md §8) against a real /dev/log
# listener: /dev is a tmpfs of the test's in a private mount namespace
# (the machine's own entries linked into it), where a python3 listener
# binds /dev/log and writes down every datagram it gets. What an operator
# filters on is checked: the ident "replicalb" whatever the program, the
# facility and priority of the level, the program named, its PID; the
# program's own openlog() is left alone; the level filters; with nothing
# listening, the program goes on and stderr stays clean.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

[ "$(id -u)" = 0 ] || skip "needs root for a private mount namespace"
need_nss_wrapper

# Replica names nss_wrapper does not know: no replica resolves, which the
# library warns about (and never asks real DNS: nss_wrapper answers).
echo "127.0.0.99 placeholder.test" >"$T/hosts"
export NSS_WRAPPER_HOSTS=$T/hosts
conf()	# LEVEL
{
	write_config <<CONF
log_target = "syslog";
log_level = "$1";
clusters = ( { name = "x.cluster";
  replicas = ( "gone-1.test", "gone-2.test" ); } );
CONF
}

# The program: opens its own syslog (ident myapp, LOCAL0, with its PID),
# logs one line itself, prints its PID, then resolves x.cluster.
cat >"$T/prog.py" <<'PYEOF'
import os, socket, syslog
syslog.openlog("myapp", syslog.LOG_PID, syslog.LOG_LOCAL0)
syslog.syslog(syslog.LOG_INFO, "the program's own line")
print(os.getpid(), flush=True)
try:
    socket.getaddrinfo("x.cluster", 80)
    print("resolved")
except socket.gaierror as e:
    print("gaierror", e.errno)
PYEOF

# The listener: every datagram on /dev/log, one line each, to $1.
cat >"$T/listen.py" <<'PYEOF'
import os, signal, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
os.chmod("/dev/log", 0o666)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
with open(sys.argv[1], "ab", buffering=0) as out:
    out.write(b"ready\n")
    s.settimeout(30)                     # bounded: the test ends well before
    while True:
        try:
            d = s.recv(4096)
        except socket.timeout:
            break
        out.write(d.rstrip(b"\0").replace(b"\n", b" ") + b"\n")
PYEOF

# in_ns LISTEN : run the rest of this script's cases in a mount namespace
# whose /dev is the test's; LISTEN=1 starts the listener first.
cat >"$T/ns.sh" <<'SHEOF'
set -e
T=$1 LISTEN=$2 PY=$3
shift 3
mkdir -p "$T/dev.orig"
mount --rbind /dev "$T/dev.orig"
mount -t tmpfs -o mode=0755 tmpfs /dev
for e in "$T"/dev.orig/*; do ln -s "$e" "/dev/${e##*/}"; done
rm -f /dev/log
if [ "$LISTEN" = 1 ]; then
	: >"$T/log.txt"
	"$PY" "$T/listen.py" "$T/log.txt" &
	lp=$!
	for i in $(seq 100); do
		grep -q '^ready$' "$T/log.txt" && break
		sleep 0.05
	done
fi
set +e
"$@"
rc=$?
if [ "$LISTEN" = 1 ]; then
	sleep 0.2		# the last datagrams read
	kill "$lp"; wait "$lp"
fi
exit $rc
SHEOF
in_ns()
{
	local listen=$1
	shift
	unshare -m --propagation private bash "$T/ns.sh" "$T" "$listen" "$PY" "$@"
}

# 1. A warning, from a program that has its own syslog.
conf warning
in_ns 1 env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" "$PY" "$T/prog.py" \
	>"$T/out" 2>"$T/err"
pid=$(head -n1 "$T/out")
check_match "the program ran: no replica resolved" "^gaierror" "$(sed -n 2p "$T/out")"
check_eq "the listener got the datagrams" 1 "$(grep -c '^ready$' "$T/log.txt")"
ours=$(grep 'x.cluster' "$T/log.txt")
check_match "ident replicalb with the program's PID, user.warning (<12>), the program named" \
	"^<12>replicalb\\[$pid\\]: python3: x.cluster: no replica could be resolved" "$ours"
check_eq "one warning" 1 "$(grep -c 'x.cluster' "$T/log.txt")"
check_match "the program's own line keeps its ident, facility and PID (local0.info, <134>)" \
	"^<134>.*myapp\\[$pid\\]: the program's own line" "$(grep myapp "$T/log.txt")"
check_empty "nothing on the program's stderr" "$T/err"

# 2. The level filters: at "error", the warning is not sent.
conf error
in_ns 1 env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" "$PY" "$T/prog.py" \
	>"$T/out" 2>"$T/err"
check_eq "log_level error: no warning sent" 0 "$(grep -c 'replicalb\[' "$T/log.txt")"
check_eq "... the program's own line still is" 1 "$(grep -c myapp "$T/log.txt")"

# 3. A C program (curl): the same ident, the program named.
conf warning
in_ns 1 env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" \
	curl -s --max-time 5 -o /dev/null "http://x.cluster:1/" 2>"$T/err"
check_match "curl: ident replicalb, the program named curl" \
	"^<12>replicalb\\[[0-9]+\\]: curl: x.cluster: no replica could be resolved" \
	"$(grep 'x.cluster' "$T/log.txt")"
check_empty "nothing on curl's stderr" "$T/err"

# 4. Nothing listening on /dev/log: the program goes on, at once, and
# nothing reaches stderr.
t0=$(now_ms)
in_ns 0 env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" "$PY" "$T/prog.py" \
	>"$T/out" 2>"$T/err"
check_match "no /dev/log: the program ran" "^gaierror" "$(sed -n 2p "$T/out")"
check_le "... without waiting (ms)" 3000 $(($(now_ms) - t0))
check_empty "... and stderr is clean" "$T/err"

finish
