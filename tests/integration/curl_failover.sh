#!/bin/bash
# curl_failover.sh - unmodified curl, nc and socat against a virtual name
# (design.md §4, §5, §8): they reach the first replica, fail over down the list
# when it is stopped, the refused connect is counted against it, the next
# resolutions put it last, and round_robin rotates across invocations.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HPORT=$(free_port)	# HTTP replicas
TPORT=$(free_port)	# raw TCP replicas
RPORT=$(free_port)	# round_robin HTTP replicas

write_config <<EOF
load_balancing = "in_order";
distributed_replica_error_half_life = 3600;
clusters = (
  { name = "demo.cluster";
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "rr.cluster";
    load_balancing = "round_robin";
    port = $RPORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "tcp.cluster";
    port = $TPORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "decay.cluster";
    distributed_replica_error_half_life = 2;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "v6.cluster";
    replicas = ( "[::1]", "127.0.0.3" ); }
);
EOF

for i in 1 2 3; do
	start_replica "r$i" "127.0.0.$((i + 1))" "$HPORT" http ||
		fail "start r$i"
	start_replica "rr$i" "127.0.0.$((i + 1))" "$RPORT" http ||
		fail "start rr$i"
	start_replica "t$i" "127.0.0.$((i + 1))" "$TPORT" tcp ||
		fail "start t$i"
done

rcurl()	# URL [curl args] : body on stdout, curl's stderr to $T/curl.err
{
	local url=$1
	shift
	preload curl -q -sS --max-time 10 "$@" "$url" 2>"$T/curl.err"
}

# ---------------------------------------------------------------------
# HTTP with in_order

check_eq "curl: in_order reaches replica 1" "replica=r1" \
	"$(rcurl "http://demo.cluster:$HPORT/")"
check_empty "curl: silent when all is well" "$T/curl.err"
check_eq "curl: nothing counted while healthy" "0" \
	"$(replica_errors demo.cluster 127.0.0.2)"
check_eq "curl: a second request, same replica" "replica=r1" \
	"$(rcurl "http://DEMO.cluster.:$HPORT/x")"

stop_replica r1
check_eq "curl: replica 1 stopped, answer from replica 2" "replica=r2" \
	"$(rcurl "http://demo.cluster:$HPORT/")"
check_empty "curl: failover is silent" "$T/curl.err"
check_eq "curl: the refused connect counted once against replica 1" "1" \
	"$(replica_errors demo.cluster 127.0.0.2)"
check_eq "curl: replicas 2 and 3 not counted" "0 0" \
	"$(replica_errors demo.cluster 127.0.0.3) $(replica_errors demo.cluster 127.0.0.4)"
check_eq "resolve --peek: in_order puts replica 1 last" \
	"127.0.0.3 127.0.0.4 127.0.0.2" "$(peek demo.cluster)"
check_eq "curl: next request goes straight to replica 2" "replica=r2" \
	"$(rcurl "http://demo.cluster:$HPORT/")"
check_eq "curl: and replica 1 is not tried again" "1" \
	"$(replica_errors demo.cluster 127.0.0.2)"

# Debug log of one failover: one selection line, one counted-error line.
rlbctl reset demo.cluster >/dev/null 2>&1
check_eq "reset: replica 1 first again" "127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(peek demo.cluster)"
out=$(REPLICALB_LOG_LEVEL=debug rcurl "http://demo.cluster:$HPORT/")
check_eq "debug: failover still answers" "replica=r2" "$out"
check_eq "debug: every line prefixed replicalb[PID]:" \
	"$(grep -c . "$T/curl.err")" \
	"$(grep -cE '^replicalb\[[0-9]+\]: ' "$T/curl.err")"
check_eq "debug: two lines (a selection and a counted error)" "2" \
	"$(grep -c '^replicalb\[' "$T/curl.err")"
check_match "debug: the selection names the virtual name" \
	'^replicalb\[[0-9]+\]: .*demo\.cluster' "$(cat "$T/curl.err")"
check_eq "debug: one line names the failed replica" "1" \
	"$(grep '^replicalb\[' "$T/curl.err" | grep -v 'demo\.cluster.*127\.0\.0\.3' | grep -c '127\.0\.0\.2')"
check_eq "debug: the error was counted" "1" \
	"$(replica_errors demo.cluster 127.0.0.2)"

# Restarted replica: still last until its error decays (half-life 1 h).
start_replica r1 127.0.0.2 "$HPORT" http || fail "restart r1"
check_eq "curl: a restarted replica stays last while it has errors" \
	"replica=r2" "$(rcurl "http://demo.cluster:$HPORT/")"
rlbctl reset >/dev/null 2>&1
check_eq "curl: after reset, replica 1 again" "replica=r1" \
	"$(rcurl "http://demo.cluster:$HPORT/")"

# An IPv6 replica that refuses (nothing listens on [::1]): curl's happy
# eyeballs moves on to IPv4, the refusal counts against [::1].
check_eq "curl: IPv6 replica refused, answer from the IPv4 one" \
	"replica=r2" "$(rcurl "http://v6.cluster:$HPORT/")"
check_eq "curl: the IPv6 replica's refusal counted" "1 0" \
	"$(replica_errors v6.cluster ::1) $(replica_errors v6.cluster 127.0.0.3)"

# Half-life 2 s: the error of a replica that came back decays and it is
# first again. (Checks right after the failover happen within a second of
# the cluster's first selection, before any halving is due.)
stop_replica r1
check_eq "decay: replica 1 stopped, answer from replica 2" "replica=r2" \
	"$(rcurl "http://decay.cluster:$HPORT/")"
check_eq "decay: replica 1 last for now" "127.0.0.3 127.0.0.4 127.0.0.2" \
	"$(peek decay.cluster)"
start_replica r1 127.0.0.2 "$HPORT" http || fail "restart r1"
sleep 3.1
check_eq "decay: after the half-life, replica 1 first again" "replica=r1" \
	"$(rcurl "http://decay.cluster:$HPORT/")"
check_eq "decay: its count halved to 0" "0" \
	"$(replica_errors decay.cluster 127.0.0.2)"

# The shared state: directory 0700, files 0600 (design.md §5).
check_eq "state dir created 0700" "700" "$(stat -c %a "$REPLICALB_STATE_DIR")"
check_eq "state files are 0600" "" \
	"$(find "$REPLICALB_STATE_DIR" -type f ! -perm 0600)"
check "state files exist" test -n "$(find "$REPLICALB_STATE_DIR" -type f)"

# A state directory writable by others is not used: the program works on
# private state and says so once.
mkdir -p "$T/open-state"
chmod 0777 "$T/open-state"
out=$(REPLICALB_STATE_DIR=$T/open-state rcurl "http://demo.cluster:$HPORT/")
check_eq "state dir 0777: curl still works" "replica=r1" "$out"
check_eq "state dir 0777: one warning line" "1" \
	"$(grep -c '^replicalb\[[0-9]*\]: ' "$T/curl.err")"
check_eq "state dir 0777: nothing else on stderr" "1" "$(grep -c . "$T/curl.err")"
check_eq "state dir 0777: no file created in it" "" "$(ls -A "$T/open-state")"

# A corrupt state file is set aside and recreated; counting goes on.
for f in "$REPLICALB_STATE_DIR"/*; do
	[ -f "$f" ] && head -c 100 /dev/urandom >"$f"
done
stop_replica r1
check_eq "corrupt state file: curl still fails over" "replica=r2" \
	"$(rcurl "http://demo.cluster:$HPORT/")"
check_eq "corrupt state file: the new count is 1" "1" \
	"$(replica_errors demo.cluster 127.0.0.2)"
# The segment the corrupted file named is nobody's now: remove-state
# finds it (by the directory its header names) and removes it.
check_match "remove-state removes the segment no file names" \
	"named by no state file" "$(rlbctl remove-state 2>&1)"
start_replica r1 127.0.0.2 "$HPORT" http || fail "restart r1"
rlbctl reset >/dev/null 2>&1

# Every replica down: curl fails; each one is counted once.
for i in 1 2 3; do stop_replica "r$i"; done
rcurl "http://demo.cluster:$HPORT/" >/dev/null
check_eq "curl: all replicas down, curl fails to connect (exit 7)" "7" "$?"
check_eq "curl: each replica counted once" "1 1 1" \
	"$(replica_errors demo.cluster 127.0.0.2) $(replica_errors demo.cluster 127.0.0.3) $(replica_errors demo.cluster 127.0.0.4)"

# ---------------------------------------------------------------------
# round_robin across separate curl processes (cluster port wins over the
# URL's port): replicas 2, 3, 1, 2, 3, 1.

seq=
for i in 1 2 3 4 5 6; do
	seq="$seq $(rcurl "http://rr.cluster:1/")"
done
check_eq "curl: round_robin rotates across invocations" \
	" replica=rr2 replica=rr3 replica=rr1 replica=rr2 replica=rr3 replica=rr1" \
	"$seq"

# ---------------------------------------------------------------------
# Raw TCP: socat and nc (netcat-openbsd walks ai_next too). socat 1.7
# resolves with a NULL service and sets the port itself, so it is given
# the replicas' real port; nc gets a wrong one that the cluster's
# port overrides.

tcp_socat()
{
	timeout 10 env LD_PRELOAD="$RLB_LIB" socat -u "TCP:$1" - \
		2>"$T/socat.err"
}
tcp_nc()
{
	timeout 10 env LD_PRELOAD="$RLB_LIB" nc -d "$1" "$2" </dev/null \
		2>"$T/nc.err"
}

check_eq "socat: in_order reaches replica 1" "replica=t1" \
	"$(tcp_socat "tcp.cluster:$TPORT")"
check_empty "socat: silent" "$T/socat.err"
check_eq "nc: in_order reaches replica 1" "replica=t1" \
	"$(tcp_nc tcp.cluster 9)"
check_empty "nc: silent" "$T/nc.err"

stop_replica t1
check_eq "nc: replica 1 stopped, answer from replica 2" "replica=t2" \
	"$(tcp_nc tcp.cluster 9)"
check_eq "nc: refused connect counted against replica 1" "1" \
	"$(replica_errors tcp.cluster 127.0.0.2)"
check_eq "socat: next connection goes to replica 2 first" "replica=t2" \
	"$(tcp_socat "tcp.cluster:$TPORT")"
check_eq "socat: replica 1 not tried again" "1" \
	"$(replica_errors tcp.cluster 127.0.0.2)"
check_empty "socat: silent after failover" "$T/socat.err"

finish
