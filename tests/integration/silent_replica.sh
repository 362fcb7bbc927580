#!/bin/bash
# silent_replica.sh - bounded connects (design.md §5.3, issue 7). A silent replica
# neither accepts nor refuses: its accept queue is full, so the kernel
# drops the SYNs (replica_server.py --mode blackhole). Without a bound a
# connect to it waits for the kernel's ~130 s; with the library it gives up
# after connect_timeout_ms (blocking sockets) or about 3 s for 1000 ms
# (non-blocking sockets: TCP_SYNCNT=1), counts one error, and the program's
# address walk reaches the next replica. The next run goes straight to a
# live replica. Also: an error counted after a long wait is not forgiven at
# the next selection (decay refinement), and pending connects closed by a
# raw close system call are still found: a timeout once older than
# connect_timeout_ms, nothing when abandoned early, a slowdown when
# abandoned early for another replica of the same cluster.
#
# Every program runs under `timeout 10`, so that without bounded connects
# each case fails in about 10 s, not 130 s.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HPORT=$(free_port)	# HTTP replicas (the silent one on 127.0.0.2)
RPORT=$(free_port)	# redis replicas (the silent one on 127.0.0.2)
CPORT=$(free_port)	# nothing listens: connects are refused

write_config <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "silent.cluster";
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "redis.cluster";
    port = $RPORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "decay.cluster";
    distributed_replica_error_half_life = 2;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "decay-lib.cluster";
    distributed_replica_error_half_life = 2;
    port = $CPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "ab1.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "ab2.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "ab3.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "ab4.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "ab6.cluster"; port = $HPORT;
    replicas = ( { host = "both"; address = [ "127.0.0.2", "127.0.0.3" ]; } ); },
  { name = "ab5.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); }
);
EOF

start_replica silent 127.0.0.2 "$HPORT" blackhole || fail "start silent replica"
start_replica silent-redis 127.0.0.2 "$RPORT" blackhole ||
	fail "start silent redis replica"
start_replica r3 127.0.0.3 "$HPORT" http || fail "start r3"
start_replica r4 127.0.0.4 "$HPORT" http || fail "start r4"
start_redis redis3 127.0.0.3 "$RPORT" || fail "start redis on 127.0.0.3"
start_redis redis4 127.0.0.4 "$RPORT" || fail "start redis on 127.0.0.4"
timeout 5 redis-cli -h 127.0.0.3 -p "$RPORT" set replica r3 >/dev/null 2>&1
timeout 5 redis-cli -h 127.0.0.4 -p "$RPORT" set replica r4 >/dev/null 2>&1

# check_served NAME WANT GOT BOUND_MS : GOT is WANT, and it took at most
# BOUND_MS (MS); a run that was not served fails the timing check too,
# showing how it ended (rc 124: cut by `timeout 10`).
check_served()
{
	check_eq "$1 served" "$2" "$3"
	if [ "$2" = "$3" ]; then
		check_le "$1 within $4 ms" "$4" "$MS"
	else
		fail "$1 within $4 ms" "not served: exit $RC after $MS ms"
	fi
}

# ---------------------------------------------------------------------
# 1. The silent replica, checked with plain clients (no library): a
# connect to it times out (2 s) rather than being refused or accepted.

cat >"$T/probe.py" <<'EOF'
import socket, sys

addr, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(secs)
try:
    s.connect((addr, port))
    print("connected")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print("error", e.strerror)
EOF
$PY "$T/probe.py" 127.0.0.2 "$HPORT" 2 >"$T/probe-h.out" 2>&1 &
probe_h=$!
$PY "$T/probe.py" 127.0.0.2 "$RPORT" 2 >"$T/probe-r.out" 2>&1 &
probe_r=$!
check_eq "probe: a live replica accepts" "connected" \
	"$($PY "$T/probe.py" 127.0.0.3 "$HPORT" 2)"
check_eq "probe: no listener refuses" "refused" \
	"$($PY "$T/probe.py" 127.0.0.3 "$CPORT" 2)"
check_match "silent replica: its accept queue holds idle connections" \
	'^queued=[1-9]$' "$(cat "$T/srv-silent.out")"
# (The 2 s probes of the silent replicas are read after section 2.)

# ---------------------------------------------------------------------
# 2. Real clients against silent.cluster: 127.0.0.2 (silent) first, then
# 127.0.0.3 and 127.0.0.4 (live). For each: run 1 is served by 127.0.0.3
# within the bound (blocking: 1 s + 1.5 s slack; non-blocking: 3 s + 2 s)
# and counts one error against the silent replica; run 2 is served at
# once (the silent replica is last now) and counts nothing; run 3, under
# strace, shows no connect to the silent replica at all.

write_elapsed_py

cat >"$T/urllib_get.py" <<'EOF'
import sys, urllib.request
import elapsed

# No timeout: a blocking connect walking getaddrinfo's list.
with urllib.request.urlopen(sys.argv[1]) as r:
    print(r.read().decode().strip())
EOF

cat >"$T/asyncio_get.py" <<'EOF'
import asyncio, sys
import elapsed

async def main(host, port):
    # Non-blocking connects, one address after the other (no happy
    # eyeballs), each outcome read with getsockopt(SO_ERROR).
    r, w = await asyncio.open_connection(host, port)
    w.write(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    data = await r.read()
    w.close()
    print(data.decode().rsplit("\r\n\r\n", 1)[-1].strip())

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
EOF

printf 'GET / HTTP/1.0\r\nHost: x\r\n\r\n' >"$T/get.txt"

HAVE_STRACE=
command -v strace >/dev/null && HAVE_STRACE=1
[ -n "$HAVE_STRACE" ] || fail "strace not installed (scripts/deps.sh)"

# body NAME : the last line of $T/NAME.out (an HTTP body after headers).
body()
{
	tail -n 1 "$T/$1.out" | tr -d '\r'
}

# first_run NAME CLUSTER BOUND_MS WANT CMD... : reset, run 1.
first_run()
{
	local name=$1 cluster=$2 bound=$3 want=$4
	shift 4
	rlbctl reset >/dev/null 2>&1
	timed "$name-1" env LD_PRELOAD="$RLB_LIB" "$@" <"$T/get.txt"
	check_served "$name: run 1 (past the silent replica)" "$want" \
		"$(body "$name-1")" "$bound"
	check_eq "$name: run 1 counted one error, for the silent replica" \
		"1 0 0" "$(cluster_errors "$cluster")"
}

# next_runs NAME CLUSTER PORT WANT CMD... : run 2 (timed) and run 3
# (strace) after run 1.
next_runs()
{
	local name=$1 cluster=$2 port=$3 want=$4
	shift 4
	if [ "$(errs "$cluster" 127.0.0.2)" = 0 ]; then
		# The silent replica would be first again: another 10 s.
		fail "$name: runs 2 and 3" "not run: run 1 counted no error"
		return 0
	fi
	timed "$name-2" env LD_PRELOAD="$RLB_LIB" "$@" <"$T/get.txt"
	check_served "$name: run 2" "$want" "$(body "$name-2")" 500
	check_eq "$name: run 2 counted nothing more" "1 0 0" \
		"$(cluster_errors "$cluster")"
	[ -n "$HAVE_STRACE" ] || return 0
	timeout 10 strace -f -qq -e trace=connect -o "$T/$name.strace" \
		env LD_PRELOAD="$RLB_LIB" "$@" <"$T/get.txt" \
		>"$T/$name-3.out" 2>/dev/null
	check_eq "$name: run 3 (strace) served" "$want" "$(body "$name-3")"
	check_eq "$name: run 3 (strace) does not connect to the silent replica" \
		"0" "$(grep -c "htons($port), sin_addr=inet_addr(\"127.0.0.2\")" \
			"$T/$name.strace")"
}

URL=http://silent.cluster:$HPORT/

# curl: non-blocking connects, poll, SO_ERROR; its own per-address
# timeout with --max-time 30 is 15 s, so only the library moves it on
# before `timeout 10`.
first_run curl silent.cluster 5000 replica=r3 \
	curl -q -s --max-time 30 "$URL"
next_runs curl silent.cluster "$HPORT" replica=r3 \
	curl -q -s --max-time 30 "$URL"

# python3 urllib: blocking connects.
first_run urllib silent.cluster 2500 replica=r3 $PY "$T/urllib_get.py" "$URL"
next_runs urllib silent.cluster "$HPORT" replica=r3 \
	$PY "$T/urllib_get.py" "$URL"

# python3 asyncio: non-blocking connects.
first_run asyncio silent.cluster 5000 replica=r3 \
	$PY "$T/asyncio_get.py" silent.cluster "$HPORT"
next_runs asyncio silent.cluster "$HPORT" replica=r3 \
	$PY "$T/asyncio_get.py" silent.cluster "$HPORT"

# socat: one blocking connect to the first address only, so without
# connect_failover run 1 fails, but with ETIMEDOUT after about 1 s.
rlbctl reset >/dev/null 2>&1
timed socat-1 env LD_PRELOAD="$RLB_LIB" \
	socat -t 5 - "TCP:silent.cluster:$HPORT" <"$T/get.txt"
check_eq "socat: run 1 fails (exit 1, not cut by timeout: 124)" "1" "$RC"
check_match "socat: run 1 reports the connect timing out" \
	'Connection timed out' "$(cat "$T/socat-1.err")"
check_le "socat: run 1 gives up within 2500 ms" 2500 "$MS"
check_eq "socat: run 1 counted one error, for the silent replica" "1 0 0" \
	"$(cluster_errors silent.cluster)"
next_runs socat silent.cluster "$HPORT" replica=r3 \
	socat -t 5 - "TCP:silent.cluster:$HPORT"

# redis-cli (hiredis): a non-blocking connect, poll() without a timeout,
# the outcome read by a repeated connect(). hiredis tries only the first
# address; redis-cli then connects once more with a new resolution, which
# puts the silent replica last: one error, and the answer from 127.0.0.3.
first_run redis-cli redis.cluster 5000 r3 \
	redis-cli -h redis.cluster -p "$RPORT" get replica
check_empty "redis-cli: run 1 silent on stderr" "$T/redis-cli-1.err"
next_runs redis-cli redis.cluster "$RPORT" r3 \
	redis-cli -h redis.cluster -p "$RPORT" get replica

# The probes of 1., which ran meanwhile.
wait "$probe_h" "$probe_r"
check_eq "silent replica (HTTP port): a plain connect times out after 2 s" \
	"timeout" "$(cat "$T/probe-h.out")"
check_eq "silent replica (redis port): a plain connect times out after 2 s" \
	"timeout" "$(cat "$T/probe-r.out")"

# ---------------------------------------------------------------------
# 3. Pending connects closed with a raw close system call (the library's
# close hook never sees them): abN.cluster is 127.0.0.2 (silent), then
# 127.0.0.3. A non-blocking connect to the silent replica, then after
# WAIT seconds syscall(SYS_close, fd), then:
#   gai   getaddrinfo once more, then read the status from inside
#   exit  exit at once
#   next  connect (blocking, usually on the same fd number) to 127.0.0.3

cat >"$T/abandon.py" <<'EOF'
import ctypes, errno, json, os, platform, socket, subprocess, sys, time

SYS_CLOSE = {"x86_64": 3, "i686": 6, "aarch64": 57, "riscv64": 57,
             "ppc64le": 6, "s390x": 6}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)

def status(name, host):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([os.environ["RLBCTL"], "status", "--json"],
                         env=env, capture_output=True, text=True).stdout
    for c in json.loads(out)["clusters"]:
        if c["name"] == name:
            for r in c["replicas"]:
                if r["host"] == host:
                    return "errors=%s slowdowns=%s" % (
                        r.get("errors"), r.get("slowdowns", "missing"))
    return "missing"

mode, wait, name, port = sys.argv[1], float(sys.argv[2]), sys.argv[3], \
    int(sys.argv[4])
addrs = [a[4] for a in socket.getaddrinfo(name, port, socket.AF_INET,
                                          socket.SOCK_STREAM)]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setblocking(False)
rc = s.connect_ex(addrs[0])
print("connect", addrs[0][0], errno.errorcode.get(rc, str(rc)))
time.sleep(wait)
fd = s.detach()
if libc.syscall(SYS_CLOSE, fd) != 0:
    print("raw close failed", os.strerror(ctypes.get_errno()))
if mode == "gai":
    socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)
    print("after getaddrinfo", status(name, addrs[0][0]))
elif mode == "next":
    s2 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s2.connect(addrs[1])
    s2.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = s2.recv(4096)
        if not chunk:
            break
        data += chunk
    s2.close()
    print("next", addrs[1][0],
          data.decode().rsplit("\r\n\r\n", 1)[-1].strip())
EOF

abandon()	# N MODE WAIT : case N on abN.cluster, in the background
{
	RLBCTL=$RLBCTL timeout 10 env LD_PRELOAD="$RLB_LIB" \
		$PY "$T/abandon.py" "$2" "$3" "ab$1.cluster" "$HPORT" \
		>"$T/ab$1.out" 2>"$T/ab$1.err" &
	ab_pids="$ab_pids $!"
}
slowdowns()
{
	replica_stat "$1" "$2" slowdowns
}

# These run while the decay cases below wait.
ab_pids=
abandon 1 gai 1.2
abandon 2 exit 1.2
abandon 3 exit 0.1
abandon 4 next 0.1
abandon 5 next 1.2
abandon 6 next 0.1

# ---------------------------------------------------------------------
# 4. Decay refinement: with half-life 2 s, an error counted 5 s (2.5
# half-lives) after the last selection is not halved away by the decay
# owed for those 5 s (before the fix the status shows 0 and the replica
# stays first). The error is counted 50 ms past a whole wall-clock second
# so that the status read after it has almost 2 s (one half-life) before
# any decay is owed again, even on a loaded machine.

cat >"$T/late_error.py" <<'EOF'
import errno, math, socket, sys, time

def sleep_past(secs):
    # at least secs, then up to 50 ms past a whole wall-clock second
    t = time.time() + secs
    time.sleep(math.ceil(t) + 0.05 - time.time())

if sys.argv[1] == "sleep":
    sleep_past(float(sys.argv[2]))
    sys.exit(0)
name, port = sys.argv[2], int(sys.argv[3])
addr = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
sleep_past(5.0)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
rc = s.connect_ex(addr)
print(addr[0], errno.errorcode.get(rc, str(rc)))
EOF

# The library's path: getaddrinfo, 2.5 s later a refused connect.
timeout 10 env LD_PRELOAD="$RLB_LIB" $PY "$T/late_error.py" connect \
	decay-lib.cluster "$CPORT" >"$T/late.out" 2>&1 &
late=$!
# replicalbctl's path, meanwhile.
rlbctl resolve decay.cluster >/dev/null
$PY "$T/late_error.py" sleep 5.0
rlbctl record-error decay.cluster 127.0.0.2 1
check_eq "decay: record-error 2.5 half-lives after the last selection counts 1" \
	"1" "$(errs decay.cluster 127.0.0.2)"
check_eq "decay: the next selection sees it (replica last)" \
	"127.0.0.3 127.0.0.2" "$(rlbctl resolve decay.cluster)"
wait "$late"
check_eq "decay (library): refused connect 5 s (2.5 half-lives) after getaddrinfo" \
	"127.0.0.2 ECONNREFUSED" "$(cat "$T/late.out")"
check_eq "decay (library): that error counts 1" "1" \
	"$(errs decay-lib.cluster 127.0.0.2)"
check_eq "decay (library): the next selection puts the replica last" \
	"127.0.0.3 127.0.0.2" "$(peek decay-lib.cluster)"


# The raw close cases (3.), started before the decay cases.
wait $ab_pids
check_eq "raw close after 1.2 s, then getaddrinfo: found there" \
	"$(printf 'connect 127.0.0.2 EINPROGRESS\nafter getaddrinfo errors=1 slowdowns=0')" \
	"$(cat "$T/ab1.out")"
check_eq "raw close after 1.2 s, then getaddrinfo: one error in the end" "1" \
	"$(errs ab1.cluster 127.0.0.2)"

check_eq "raw close after 1.2 s, then exit" "connect 127.0.0.2 EINPROGRESS" \
	"$(cat "$T/ab2.out")"
check_eq "raw close after 1.2 s, then exit: found at exit, one error" "1" \
	"$(errs ab2.cluster 127.0.0.2)"

check_eq "raw close after 0.1 s, then exit" "connect 127.0.0.2 EINPROGRESS" \
	"$(cat "$T/ab3.out")"
check_eq "raw close after 0.1 s, then exit: no error" "0" \
	"$(errs ab3.cluster 127.0.0.2)"
check_eq "raw close after 0.1 s, then exit: no slowdown either" "0" \
	"$(slowdowns ab3.cluster 127.0.0.2)"

check_eq "raw close after 0.1 s, then the next replica" \
	"$(printf 'connect 127.0.0.2 EINPROGRESS\nnext 127.0.0.3 replica=r3')" \
	"$(cat "$T/ab4.out")"
check_eq "raw close after 0.1 s, then the next replica: no error" "0 0" \
	"$(cluster_errors ab4.cluster)"
check_eq "raw close after 0.1 s, then the next replica: one slowdown" "1" \
	"$(slowdowns ab4.cluster 127.0.0.2)"

check_eq "raw close after 1.2 s, then the next replica" \
	"$(printf 'connect 127.0.0.2 EINPROGRESS\nnext 127.0.0.3 replica=r3')" \
	"$(cat "$T/ab5.out")"
check_eq "raw close after 1.2 s, then the next replica: one error, found at connect" \
	"1 0" "$(cluster_errors ab5.cluster)"

# A happy-eyeballs race between two addresses of one replica: the
# address given up for the other is not a slowdown, nor an error.
check_eq "raw close after 0.1 s, then the same replica's other address" \
	"$(printf 'connect 127.0.0.2 EINPROGRESS\nnext 127.0.0.3 replica=r3')" \
	"$(cat "$T/ab6.out")"
check_eq "one replica's two addresses: no error" "0" "$(errs ab6.cluster both)"
check_eq "one replica's two addresses: no slowdown" "0" \
	"$(slowdowns ab6.cluster both)"

check_eq "raw close cases: nothing on stderr" "" "$(cat "$T"/ab?.err)"

finish
