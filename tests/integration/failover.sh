#!/bin/bash
# failover.sh - connect_failover (design.md §5.4, §7; issue 7): programs that try
# only one address (socat; a gethostbyname client, blocking or not;
# hiredis) reach replica 2 when the first replica refuses or is silent:
# the library connects the same socket to the next replica of the
# selection, the program sees one successful connect, and each failed
# attempt counts one error. Set at the top level, per cluster, or by the
# wrapper's --failover.
#
# Every program runs under `timeout 10`.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HPORT=$(free_port)	# HTTP replicas; silent on 127.0.0.2, none on .5/.6
RPORT=$(free_port)	# redis replicas; silent on 127.0.0.2

common="
load_balancing = \"in_order\";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = \"$T/state\";"
clusters="
  { name = \"refuse.cluster\"; port = $HPORT;
    replicas = ( \"127.0.0.5\", \"127.0.0.3\", \"127.0.0.4\" ); },
  { name = \"silent.cluster\"; port = $HPORT;
    replicas = ( \"127.0.0.2\", \"127.0.0.3\", \"127.0.0.4\" ); },
  { name = \"redis.cluster\"; port = $RPORT;
    replicas = ( \"127.0.0.2\", \"127.0.0.3\", \"127.0.0.4\" ); },
  { name = \"down.cluster\"; port = $HPORT;
    replicas = ( \"127.0.0.5\", \"127.0.0.6\" ); }"

# The main config: connect_failover for every cluster.
write_config <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
$common
connect_failover = true;
clusters = ( $clusters );
EOF
# Per cluster: on.cluster fails over, off.cluster does not.
cat >"$T/percluster.conf" <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
$common
clusters = (
  { name = "on.cluster"; port = $HPORT; connect_failover = true;
    replicas = ( "127.0.0.5", "127.0.0.3", "127.0.0.4" ); },
  { name = "off.cluster"; port = $HPORT;
    replicas = ( "127.0.0.5", "127.0.0.3", "127.0.0.4" ); }
);
EOF
# No connect_failover anywhere: the wrapper's --failover turns it on.
cat >"$T/plain.conf" <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
$common
clusters = ( $clusters );
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

printf 'GET / HTTP/1.0\r\nHost: x\r\n\r\n' >"$T/get.txt"

# body NAME : the last line of $T/NAME.out (an HTTP body after headers).
body()
{
	tail -n 1 "$T/$1.out" | tr -d '\r'
}

# gh.py MODE NAME PORT: socket.gethostbyname (one address), then one
# connect to it, blocking or not (poll, then getsockopt(SO_ERROR) as
# programs do); a GET on the connection. Prints each step.
write_elapsed_py
cat >"$T/gh.py" <<'EOF'
import errno, select, socket, sys
import elapsed

mode, name, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
addr = socket.gethostbyname(name)
print("address", addr)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
if mode == "block":
    rc = s.connect_ex((addr, port))
    print("connect", errno.errorcode.get(rc, rc))
else:
    s.setblocking(False)
    rc = s.connect_ex((addr, port))
    print("connect", errno.errorcode.get(rc, rc))
    select.select([], [s], [], 10)
    e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    print("so_error", errno.errorcode.get(e, e))
    rc = e
    s.setblocking(True)
if rc == 0:
    s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    print("reply", data.decode().rsplit("\r\n\r\n", 1)[-1].strip())
EOF

# failover_case NAME CLUSTER BOUND_MS WANT CMD... : reset, run CMD
# preloaded; its output (last line) is WANT within BOUND_MS, one error for
# the cluster's first replica, none for the others.
failover_case()
{
	local name=$1 cluster=$2 bound=$3 want=$4
	shift 4
	rlbctl reset >/dev/null 2>&1
	timed "$name" env LD_PRELOAD="$RLB_LIB" "$@" <"$T/get.txt"
	check_eq "$name: served by replica 2" "$want" "$(body "$name")"
	if [ "$want" = "$(body "$name")" ]; then
		check_le "$name: within $bound ms" "$bound" "$MS"
	else
		fail "$name: within $bound ms" "not served: exit $RC after $MS ms"
	fi
	check_empty "$name: nothing on stderr" "$T/$name.err"
	check_eq "$name: one error, for the first replica" "1 0 0" \
		"$(cluster_errors "$cluster")"
}

# ---------------------------------------------------------------------
# The configs must be accepted: a rejected config leaves the library
# unconfigured, and the virtual names would go to DNS.

if rlbctl check >"$T/check.out" 2>&1; then
	pass "config: top-level connect_failover accepted"
	main_ok=1
else
	fail "config: top-level connect_failover accepted" "$(head -3 "$T/check.out")"
	main_ok=
fi
if rlbctl -c "$T/percluster.conf" check >"$T/check.out" 2>&1; then
	pass "config: per-cluster connect_failover accepted"
	per_ok=1
else
	fail "config: per-cluster connect_failover accepted" "$(head -3 "$T/check.out")"
	per_ok=
fi

# ---------------------------------------------------------------------
# Top level connect_failover = true.

if [ -n "$main_ok" ]; then
	# Refused first replica: the failover costs nothing.
	failover_case "socat, refused first" refuse.cluster 1000 \
		replica=r3 socat -t 5 - "TCP:refuse.cluster:$HPORT"
	failover_case "gethostbyname + blocking connect, refused first" \
		refuse.cluster 1000 "reply replica=r3" \
		$PY "$T/gh.py" block refuse.cluster "$HPORT"
	check_eq "gethostbyname + blocking connect: one connect, succeeded" \
		"$(printf 'address 127.0.0.5\nconnect 0\nreply replica=r3')" \
		"$(cat "$T/gethostbyname + blocking connect, refused first.out")"
	failover_case "gethostbyname + non-blocking connect, refused first" \
		refuse.cluster 1000 "reply replica=r3" \
		$PY "$T/gh.py" nonblock refuse.cluster "$HPORT"
	# With connect_failover a non-blocking connect is settled inside
	# connect(): the program gets 0, the socket connected to replica 3.
	check_eq "gethostbyname + non-blocking connect: connected inside connect()" \
		"$(printf 'address 127.0.0.5\nconnect 0\nso_error 0\nreply replica=r3')" \
		"$(cat "$T/gethostbyname + non-blocking connect, refused first.out")"

	# Silent first replica: every connect moves on after
	# connect_timeout_ms (a non-blocking one is waited for inside
	# connect(), by our own poll, not by the kernel's coarser bound).
	failover_case "socat, silent first" silent.cluster 2500 \
		replica=r3 socat -t 5 - "TCP:silent.cluster:$HPORT"
	failover_case "gethostbyname + blocking connect, silent first" \
		silent.cluster 2500 "reply replica=r3" \
		$PY "$T/gh.py" block silent.cluster "$HPORT"
	failover_case "gethostbyname + non-blocking connect, silent first" \
		silent.cluster 2500 "reply replica=r3" \
		$PY "$T/gh.py" nonblock silent.cluster "$HPORT"
	check_eq "gethostbyname + non-blocking connect, silent first: connected inside connect()" \
		"$(printf 'address 127.0.0.2\nconnect 0\nso_error 0\nreply replica=r3')" \
		"$(cat "$T/gethostbyname + non-blocking connect, silent first.out")"

	# hiredis: non-blocking connect, poll without a timeout, the outcome
	# read by a repeated connect(). Without failover redis-cli gets there
	# too, by a second connection with a new resolution; with it, its
	# first connection succeeds: the debug log has one selection (the
	# line listing all three replicas, design.md §8), not two.
	rlbctl reset >/dev/null 2>&1
	timed redis-cli env LD_PRELOAD="$RLB_LIB" REPLICALB_LOG_LEVEL=debug \
		redis-cli -h redis.cluster -p "$RPORT" get replica <"$T/get.txt"
	check_eq "redis-cli, silent first: served by replica 2" "r3" \
		"$(cat "$T/redis-cli.out")"
	check_le "redis-cli, silent first: within 5000 ms" 5000 "$MS"
	check_eq "redis-cli, silent first: one error, for the silent replica" \
		"1 0 0" "$(cluster_errors redis.cluster)"
	check_eq "redis-cli, silent first: one resolution (selection)" "1" \
		"$(grep '^replicalb\[[0-9]*\]: ' "$T/redis-cli.err" |
			grep 127.0.0.2 | grep 127.0.0.3 | grep -c 127.0.0.4)"
	check_eq "redis-cli, silent first: only debug lines on stderr" "0" \
		"$(grep -vc '^replicalb\[[0-9]*\]: ' "$T/redis-cli.err")"

	# Every replica refuses: the program sees the connect fail, and
	# each replica tried counts once.
	rlbctl reset >/dev/null 2>&1
	timed "socat, all down" env LD_PRELOAD="$RLB_LIB" \
		socat -t 5 - "TCP:down.cluster:$HPORT" <"$T/get.txt"
	check_eq "socat, all down: fails (exit 1)" "1" "$RC"
	check_match "socat, all down: connection refused" \
		'Connection refused' "$(cat "$T/socat, all down.err")"
	check_eq "socat, all down: each replica counted once" "1 1" \
		"$(errs down.cluster 127.0.0.5) $(errs down.cluster 127.0.0.6)"
else
	fail "top-level connect_failover cases" "not run: config rejected"
fi

# ---------------------------------------------------------------------
# Per cluster.

if [ -n "$per_ok" ]; then
	REPLICALB_CONFIG=$T/percluster.conf failover_case \
		"socat, per-cluster failover" on.cluster 1000 \
		replica=r3 socat -t 5 - "TCP:on.cluster:$HPORT"
	rlbctl -c "$T/percluster.conf" reset >/dev/null 2>&1
	timed "socat, failover off" env REPLICALB_CONFIG="$T/percluster.conf" \
		LD_PRELOAD="$RLB_LIB" socat -t 5 - "TCP:off.cluster:$HPORT" \
		<"$T/get.txt"
	check_eq "socat, cluster without failover: refused (exit 1)" "1" "$RC"
	check_match "socat, cluster without failover: the refusal reaches it" \
		'Connection refused' "$(cat "$T/socat, failover off.err")"
else
	fail "per-cluster connect_failover cases" "not run: config rejected"
fi

# ---------------------------------------------------------------------
# The wrapper: --failover over a config that does not set it.

export REPLICALB_CONFIG=$T/plain.conf
rlbctl reset >/dev/null 2>&1
timed "wrapper, no --failover" "$top_builddir/replicalb" \
	socat -t 5 - "TCP:refuse.cluster:$HPORT" <"$T/get.txt"
check_eq "wrapper without --failover: socat refused (exit 1)" "1" "$RC"
check_eq "wrapper without --failover: counted" "1" \
	"$(errs refuse.cluster 127.0.0.5)"
rlbctl reset >/dev/null 2>&1
timed "wrapper --failover" "$top_builddir/replicalb" --failover \
	socat -t 5 - "TCP:refuse.cluster:$HPORT" <"$T/get.txt"
check_eq "wrapper --failover: socat served by replica 2" "replica=r3" \
	"$(body "wrapper --failover")"
check_empty "wrapper --failover: nothing on stderr" "$T/wrapper --failover.err"
check_eq "wrapper --failover: one error for the refusing replica" "1 0" \
	"$(errs refuse.cluster 127.0.0.5) $(errs refuse.cluster 127.0.0.3)"

finish
