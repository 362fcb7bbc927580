# tests/lib.sh - shared helpers for the integration tests (sourced by bash).
#
# A test does:
#
#	. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
#	rlb_setup			# temp dir, cleanup trap, clean environment
#	write_config <<EOF ... EOF	# $REPLICALB_CONFIG
#	start_replica r1 127.0.0.2 "$PORT" http
#	check_eq "name" "expected" "$(preload curl ...)"
#	finish				# "N passed, M failed", exit status
#
# Environment from `make check`: top_srcdir, top_builddir, RLB_LIB. When a
# test is run by hand from a build directory they default to this source
# tree, the current directory and ./.libs/libreplicalb.so.
#
# Variables for tests: T (temp dir), PY (/usr/bin/python3), RLBCTL,
# NSS_WRAPPER_LIB, GAI (python resolver probe, see gai below).

set -u

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${RLB_LIB:=$top_builddir/.libs/libreplicalb.so}"
export top_srcdir top_builddir RLB_LIB

PY=/usr/bin/python3
RLBCTL=$top_builddir/replicalbctl
NSS_WRAPPER_LIB=/usr/lib/x86_64-linux-gnu/libnss_wrapper.so
SERVER=$top_srcdir/tests/helpers/replica_server.py

RLB_PASS=0
RLB_FAIL=0
T=

# ---------------------------------------------------------------------
# Results

pass()
{
	RLB_PASS=$((RLB_PASS + 1))
	echo "ok - $1"
}

# fail NAME [DETAIL]
fail()
{
	RLB_FAIL=$((RLB_FAIL + 1))
	echo "FAIL - $1${2:+: $2}"
}

# check NAME CMD... : passes when CMD exits 0; shows its output otherwise.
check()
{
	local name=$1 out
	shift
	out=$("$@" 2>&1)
	if [ $? -eq 0 ]; then
		pass "$name"
	else
		fail "$name" "command failed: $*"
		[ -n "$out" ] && printf '%s\n' "$out" | head -20 | sed 's/^/    | /'
	fi
	return 0
}

# check_not NAME CMD... : passes when CMD exits non-zero.
check_not()
{
	local name=$1
	shift
	if "$@" >/dev/null 2>&1; then
		fail "$name" "command succeeded: $*"
	else
		pass "$name"
	fi
}

# check_eq NAME EXPECTED ACTUAL
check_eq()
{
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1" "expected [$2], got [$3]"
	fi
}

# check_match NAME ERE ACTUAL : ACTUAL (any line) matches the extended regex.
check_match()
{
	if printf '%s\n' "$3" | grep -Eq -- "$2"; then
		pass "$1"
	else
		fail "$1" "[$3] does not match /$2/"
	fi
}

# check_ge NAME MIN ACTUAL : integer ACTUAL >= MIN.
check_ge()
{
	case $3 in
	'' | *[!0-9]*) fail "$1" "expected a number >= $2, got [$3]" ;;
	*) if [ "$3" -ge "$2" ]; then pass "$1"; else
		fail "$1" "expected >= $2, got $3"; fi ;;
	esac
}

# check_le NAME MAX ACTUAL : integer ACTUAL <= MAX (e.g. elapsed ms).
check_le()
{
	case $3 in
	'' | *[!0-9]*) fail "$1" "expected a number <= $2, got [$3]" ;;
	*) if [ "$3" -le "$2" ]; then pass "$1"; else
		fail "$1" "expected <= $2, got $3"; fi ;;
	esac
}

# check_empty NAME FILE : FILE exists and is empty (e.g. captured stderr).
check_empty()
{
	if [ -f "$2" ] && [ ! -s "$2" ]; then
		pass "$1"
	else
		fail "$1" "not empty: $(head -c 600 "$2" 2>/dev/null)"
	fi
}

# finish : the summary line; exit 1 if anything failed.
finish()
{
	echo "$RLB_PASS passed, $RLB_FAIL failed"
	[ "$RLB_FAIL" -eq 0 ] && exit 0
	exit 1
}

# skip REASON : exit 77, only when the environment truly cannot run a test.
skip()
{
	echo "SKIP: $*"
	exit 77
}

# ---------------------------------------------------------------------
# Setup and cleanup

# rlb_setup [nocanary] : temp dir $T, cleanup trap, a clean replicalb
# environment: REPLICALB_CONFIG=$T/replicalb.conf (not yet written:
# unconfigured), REPLICALB_STATE_DIR=$T/state, every other REPLICALB_*,
# NSS_WRAPPER_*, LD_PRELOAD and proxy variable unset. Then, unless
# `nocanary`, the canary check below.
rlb_setup()
{
	local v
	# Config files the tests write must pass the trust rule (design.md
	# §2.7: writable by no one else), whatever the caller's umask.
	umask 022
	T=$(mktemp -d "${TMPDIR:-/tmp}/rlbtest.XXXXXX") || exit 1
	trap rlb_cleanup EXIT
	trap 'exit 1' INT TERM HUP
	for v in $(compgen -e); do
		case $v in
		REPLICALB_* | NSS_WRAPPER_*) unset "$v" ;;
		esac
	done
	# Nothing between the programs and the loopback servers.
	unset LD_PRELOAD http_proxy https_proxy HTTP_PROXY HTTPS_PROXY \
		all_proxy ALL_PROXY
	export REPLICALB_CONFIG=$T/replicalb.conf
	export REPLICALB_STATE_DIR=$T/state
	export PYTHONDONTWRITEBYTECODE=1
	export LC_ALL=C
	write_gai_probe
	# RLB_LIB may name a runtime to preload first (ThreadSanitizer's).
	local lib
	for lib in $RLB_LIB; do
		if [ ! -f "$lib" ]; then
			echo "library not built: $lib"
			exit 1
		fi
	done
	[ "${1:-}" = nocanary ] || rlb_canary
}

# rlb_canary : the library must turn a virtual name into its replica before
# a test hands virtual names to programs without nss_wrapper: were it not
# to, those names would go to real DNS. The canary runs with nss_wrapper
# mapping the name to 127.0.0.99, so a failure never leaves the host.
rlb_canary()
{
	local d=$T/canary out
	need_nss_wrapper
	mkdir -p "$d"
	echo 'clusters = ( { name = "canary.cluster"; replicas = ( "127.0.0.2" ); } );' \
		>"$d/replicalb.conf"
	echo '127.0.0.99 canary.cluster' >"$d/hosts"
	out=$(env REPLICALB_CONFIG="$d/replicalb.conf" \
		REPLICALB_STATE_DIR="$d/state" NSS_WRAPPER_HOSTS="$d/hosts" \
		LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" \
		$PY "$GAI" -u -4 canary.cluster 80 2>&1)
	[ "$out" = 127.0.0.2 ] && return 0
	fail "canary: the library resolves a virtual name" \
		"expected [127.0.0.2], got [$out]; not running the rest"
	finish
}

rlb_cleanup()
{
	local f pid pids= i
	for f in "$T"/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null)
		[ -n "$pid" ] && pids="$pids $pid"
	done
	pids="$pids ${RLB_BG_PIDS:-}"
	for pid in $pids; do
		kill -TERM "$pid" 2>/dev/null
	done
	for i in $(seq 40); do
		pid=
		for pid in $pids; do
			kill -0 "$pid" 2>/dev/null && break
			pid=
		done
		[ -z "$pid" ] && break
		sleep 0.05
	done
	for pid in $pids; do
		kill -KILL "$pid" 2>/dev/null
	done
	[ -n "$T" ] && rm_state_segments "$T"
	# The ports this test claimed are free for others again.
	if [ -n "$T" ] && [ -f "$T/ports-claimed" ]; then
		while read -r f; do rm -f "$f"; done <"$T/ports-claimed"
	fi
	[ -n "$T" ] && [ -z "${RLB_KEEP_T:-}" ] && rm -rf "$T" && rm_gone_segments
}

# rm_state_segments DIR... : remove the SysV segments that the state name
# files under DIR name (design.md §12.1), which outlive the directory.
rm_state_segments()
{
	local id
	for id in $(find "$@" -type f -size -200c -name '*.state*' \
		-exec awk '$1 == "replicalb-state" && $3 == "shm" {print $4}' \
		{} + 2>/dev/null); do
		ipcrm -m "$id" 2>/dev/null
	done
	return 0
}

# rm_gone_segments : after a state directory is removed, the segments no
# state file named (moved away from, set aside): replicalbctl gc
# (design.md §12.11) removes every unused segment whose directory is gone.
rm_gone_segments()
{
	[ -x "$RLBCTL" ] && "$RLBCTL" gc >/dev/null 2>&1
	return 0
}

# need_nss_wrapper : skip (77) when libnss_wrapper is not installed; the
# tests never resolve fake names without it.
need_nss_wrapper()
{
	[ -f "$NSS_WRAPPER_LIB" ] || skip "$NSS_WRAPPER_LIB not installed"
}

# bg_track PID : have the cleanup trap kill a background process.
bg_track()
{
	RLB_BG_PIDS="${RLB_BG_PIDS:-} $1"
}

# write_config : stdin -> $REPLICALB_CONFIG, replaced atomically (rename),
# so that a process that is reloading never reads half a file.
write_config()
{
	cat >"$REPLICALB_CONFIG.tmp.$$" && mv -f "$REPLICALB_CONFIG.tmp.$$" "$REPLICALB_CONFIG"
}

# ---------------------------------------------------------------------
# Ports and replica servers

# free_port : a TCP port that is free on every loopback address (checked
# by binding the wildcard address), drawn below the kernel's ephemeral
# range: a port the kernel hands out as a connect's source port could
# meet a test's "nothing listens here" port, and a connect to it from
# that same port is a TCP self-connect that succeeds (a full run once
# saw a refused-connect probe come out connected). A port is also claimed
# host-wide for the test's life (a file in $RLB_PORTS_DIR, removed by the
# cleanup): two tests running at once (make check -j2) once drew the same
# port, one's "nothing listens here" meeting the other's silent listener.
RLB_PORTS_DIR=${TMPDIR:-/tmp}/rlbtest-ports
free_port()
{
	mkdir -p "$RLB_PORTS_DIR" 2>/dev/null
	RLB_PORTS_DIR=$RLB_PORTS_DIR RLB_T=${T:-} $PY - <<'EOF'
import os, random, socket, sys
claims, t = os.environ["RLB_PORTS_DIR"], os.environ["RLB_T"]
def claim(port):
    """Claim port host-wide; False when another test holds it."""
    if not t or not os.path.isdir(claims):
        return True
    path = os.path.join(claims, str(port))
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    except OSError:
        return True
    with open(os.path.join(t, "ports-claimed"), "a") as f:
        f.write(path + "\n")
    return True
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
top = low - 1 if low > 12000 else 60000
for _ in range(200):
    port = random.randint(10000, top)
    ok = True
    for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        s = socket.socket(fam, socket.SOCK_STREAM)
        try:
            s.bind((addr, port))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok and claim(port):
        print(port)
        sys.exit(0)
sys.exit("no free port")
EOF
}

# PY_ADDRS: a python3 program that prints, as a list, the IPv4 addresses
# getaddrinfo(argv[1]) gives a stream socket, in order:
#   $PY -c "$PY_ADDRS" NAME
PY_ADDRS='import socket, sys
print([a[4][0] for a in socket.getaddrinfo(sys.argv[1], 80, socket.AF_INET, socket.SOCK_STREAM)])'

# RLB_SERVER_EXEC: a command prefix for the servers that start_replica
# and start_redis start, empty by default (lib_latency.sh sets it to
# enter its replica namespace; the prefix must exec the server, so that
# the pid recorded is the server's).
#
# start_replica NAME ADDR PORT [http|tcp|blackhole [ARGS...]] : start
# replica_server.py (ARGS: more of its options, --delay-ms N) in the
# background (not preloaded) and wait until it listens.
start_replica()
{
	local name=$1 addr=$2 port=$3 mode=${4:-http} i pid
	shift $(($# < 4 ? $# : 4))
	rm -f "$T/srv-$name.out"
	${RLB_SERVER_EXEC:-} $PY "$SERVER" --name "$name" --host "$addr" \
		--port "$port" --mode "$mode" "$@" >"$T/srv-$name.out" 2>&1 &
	pid=$!
	echo "$pid" >"$T/srv-$name.pid"
	for i in $(seq 100); do
		grep -q '^ready$' "$T/srv-$name.out" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	grep -q '^ready$' "$T/srv-$name.out" 2>/dev/null && return 0
	echo "replica $name ($addr:$port $mode) did not start:"
	sed 's/^/    | /' "$T/srv-$name.out"
	return 1
}

# stop_replica NAME : SIGTERM and wait (bounded) until it has exited.
stop_replica()
{
	stop_pidfile "$T/srv-$1.pid"
}

# stop_pidfile FILE : stop the process FILE names - SIGCONT (it may be
# stopped), SIGTERM, SIGKILL after 5 s - wait for it, remove FILE.
stop_pidfile()
{
	local f=$1 pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill -CONT "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -f "$f"
	return 0
}

# start_redis NAME ADDR PORT : a real redis-server on ADDR:PORT, no
# persistence, in the background (pidfile $T/srv-NAME.pid, so that
# stop_replica and the cleanup trap stop it); waits until it answers PING.
start_redis()
{
	local name=$1 addr=$2 port=$3 i pid
	if ! command -v redis-server >/dev/null ||
		! command -v redis-cli >/dev/null; then
		echo "redis-server/redis-cli not installed (scripts/deps.sh)"
		return 1
	fi
	${RLB_SERVER_EXEC:-} redis-server --bind "$addr" --port "$port" \
		--save '' --appendonly no --protected-mode no --daemonize no \
		--dir "$T" --logfile "$T/srv-$name.out" >/dev/null 2>&1 &
	pid=$!
	echo "$pid" >"$T/srv-$name.pid"
	for i in $(seq 100); do
		[ "$(timeout 2 redis-cli -h "$addr" -p "$port" ping 2>/dev/null)" = PONG ] &&
			return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "redis $name ($addr:$port) did not start:"
	sed 's/^/    | /' "$T/srv-$name.out" 2>/dev/null
	return 1
}

# ---------------------------------------------------------------------
# Running things

# preload CMD... : run CMD with the library preloaded.
preload()
{
	env LD_PRELOAD="$RLB_LIB" "$@"
}

# preload_nss CMD... : the library stacked over nss_wrapper (set
# NSS_WRAPPER_HOSTS / NSS_WRAPPER_HOSTNAME first).
preload_nss()
{
	env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" "$@"
}

# nss_only CMD... : nss_wrapper alone, the baseline for preload_nss.
nss_only()
{
	env LD_PRELOAD="$NSS_WRAPPER_LIB" "$@"
}

# rlbctl ARGS... : the build tree's replicalbctl, same environment.
rlbctl()
{
	"$RLBCTL" "$@"
}

# peek NAME : the order a resolution of NAME would give now, unchanged.
peek()
{
	rlbctl resolve --peek "$1"
}

# replica_stat CLUSTER HOST[:PORT] KEY : one key of the replica's object in
# `replicalbctl status --json` (errors, slowdowns, ...), or "missing" (no
# such replica or key) / "bad-json".
replica_stat()
{
	rlbctl status --json 2>/dev/null | $PY -c '
import json, sys
cluster, host, key = sys.argv[1], sys.argv[2], sys.argv[3]
port = None
if host.count(":") == 1:
    host, port = host.split(":")
    port = int(port)
try:
    doc = json.load(sys.stdin)
except ValueError:
    print("bad-json")
    sys.exit(0)
for c in doc.get("clusters", []):
    if c.get("name", "").lower() != cluster.lower():
        continue
    for r in c.get("replicas", []):
        if r.get("host") == host and (port is None or r.get("port") == port):
            print(r.get(key, "missing"))
            sys.exit(0)
print("missing")
' "$1" "$2" "$3"
}

# replica_errors CLUSTER HOST[:PORT] : the replica's error count from
# `replicalbctl status --json`, or "missing" / "bad-json".
replica_errors()
{
	replica_stat "$1" "$2" errors
}

# errs CLUSTER HOST[:PORT] : replica_errors, short enough to put several
# replicas' counts on one line: "$(errs c a) $(errs c b)".
errs()
{
	replica_errors "$1" "$2"
}

# cluster_errors CLUSTER : the error counts of all the cluster's replicas,
# in config order, on one line ("1 0 0"); one status call for them all.
cluster_errors()
{
	rlbctl status --json 2>/dev/null | $PY -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    print("bad-json")
    sys.exit(0)
for c in doc.get("clusters", []):
    if c.get("name", "").lower() == sys.argv[1].lower():
        print(" ".join(str(r.get("errors")) for r in c.get("replicas", [])))
        sys.exit(0)
print("missing")
' "$1"
}

# now_ms : wall-clock milliseconds, for timing a command:
#	t0=$(now_ms); out=$(timeout 10 cmd); ms=$(($(now_ms) - t0))
now_ms()
{
	local t=${EPOCHREALTIME/./}
	echo $((t / 1000))
}

# write_elapsed_py : $T/elapsed.py, for python clients whose time a test
# bounds: `import elapsed` (after the other imports) writes, at exit, the
# milliseconds since then to $ELAPSED_MS_FILE if set. Interpreter start-up
# on a loaded machine can take half a second; this leaves it out.
write_elapsed_py()
{
	cat >"$T/elapsed.py" <<'EOF'
import atexit, os, time

_t0 = time.monotonic()


def _write():
    path = os.environ.get("ELAPSED_MS_FILE")
    if path:
        with open(path, "w") as f:
            f.write("%d\n" % ((time.monotonic() - _t0) * 1000))


atexit.register(_write)
EOF
}

# timed NAME CMD... : run CMD under `timeout 10` with ELAPSED_MS_FILE set
# to $T/NAME.ms; stdout to $T/NAME.out, stderr to $T/NAME.err, stdin the
# caller's (redirect the call: `timed NAME CMD... <"$T/get.txt"`). Not
# preloaded: pass `env LD_PRELOAD="$RLB_LIB" CMD...` for that. Sets RC
# (CMD's exit status; 124: cut by the timeout) and MS (milliseconds taken;
# for a python client that imports elapsed.py, from after its imports to
# its exit, see write_elapsed_py). Returns 0.
timed()
{
	local name=$1 t0
	shift
	rm -f "$T/$name.ms"
	t0=$(now_ms)
	ELAPSED_MS_FILE="$T/$name.ms" timeout 10 "$@" \
		>"$T/$name.out" 2>"$T/$name.err"
	RC=$?
	MS=$(($(now_ms) - t0))
	[ -s "$T/$name.ms" ] && MS=$(cat "$T/$name.ms")
	return 0
}

# wait_until SECONDS CMD... : poll CMD every 0.1 s until it succeeds.
wait_until()
{
	local n=$(($1 * 10)) i
	shift
	for i in $(seq "$n"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# ---------------------------------------------------------------------
# The resolver probe: $PY "$GAI" [options] NAME [SERVICE]
#
# Prints one line per resolution (-n COUNT, default 1) with the results
# of getaddrinfo in list order, as "ADDR:PORT" words (-f full adds
# family/socktype/proto), or "error NAME" with the EAI_* name. Options:
#   -n COUNT   resolutions in one process
#   -4 / -6    AF_INET / AF_INET6 hints (default AF_UNSPEC)
#   -t TYPE    socktype: stream (default), dgram, any (0)
#   -c         AI_CANONNAME; the line starts with "canon=NAME"
#   -N         AI_NUMERICHOST
#   -u         unique addresses only (drop the port), for order checks
#   -s SECS    sleep between resolutions
#   -T         prefix each line with the monotonic time
write_gai_probe()
{
	GAI=$T/gai.py
	cat >"$GAI" <<'EOF'
import getopt, socket, sys, time
opts, args = getopt.getopt(sys.argv[1:], "n:46t:cNus:Tf")
o = dict(opts)
name = args[0]
if name == "NULL":
    name = None
service = args[1] if len(args) > 1 else None
fam = socket.AF_INET if "-4" in o else socket.AF_INET6 if "-6" in o else 0
typ = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM,
       "any": 0}[o.get("-t", "stream")]
flags = (socket.AI_CANONNAME if "-c" in o else 0) | \
        (socket.AI_NUMERICHOST if "-N" in o else 0)
eai = {getattr(socket, k): k for k in dir(socket) if k.startswith("EAI_")}
for i in range(int(o.get("-n", "1"))):
    if i and "-s" in o:
        time.sleep(float(o["-s"]))
    words = []
    try:
        res = socket.getaddrinfo(name, service, fam, typ, 0, flags)
        if "-c" in o:
            words.append("canon=" + res[0][3])
        seen = []
        for f, t, p, canon, sa in res:
            if "-u" in o:
                if sa[0] not in seen:
                    seen.append(sa[0])
                continue
            w = "%s:%d" % (("[%s]" % sa[0]) if f == socket.AF_INET6
                           else sa[0], sa[1])
            if "-f" in o:
                w += "/%d/%d/%d" % (f, t, p)
            words.append(w)
        words += seen
    except socket.gaierror as e:
        words = ["error", eai.get(e.errno, str(e.errno))]
    line = " ".join(words)
    if "-T" in o:
        line = "%.3f %s" % (time.monotonic(), line)
    print(line, flush=True)
EOF
}
