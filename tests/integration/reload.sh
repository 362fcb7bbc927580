#!/bin/bash
# reload.sh - a running program picks up config changes without restarting
# (design.md §2, §5): edited in place or replaced by rename, new orders show up
# within ~2.5 s; a config that breaks leaves the last good one in force
# with exactly one error message; health of replicas that stay survives
# every reload, and state of a removed replica is dropped.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

PORT=$(free_port)	# nothing listens: every connect is refused
A=127.0.0.2 B=127.0.0.3 C=127.0.0.4 D=127.0.0.5

config()	# REPLICA... : an in_order cluster with these replicas
{
	local r list=
	for r in "$@"; do list="$list${list:+, }\"$r\""; done
	cat <<EOF
load_balancing = "in_order";
distributed_replica_error_half_life = 3600;
clusters = (
  { name = "reload.cluster";
    port = $PORT;
    replicas = ( $list ); }
);
EOF
}

now()
{
	$PY -c 'import time; print("%.3f" % time.monotonic())'
}

# fail_connect ADDR : one process resolves the virtual name and connects to
# ADDR from the list it got; the refusal counts against that replica.
fail_connect()
{
	preload $PY -c '
import socket, sys
for f, t, p, c, sa in socket.getaddrinfo("reload.cluster", 1,
                                         socket.AF_INET, socket.SOCK_STREAM):
    if sa[0] == sys.argv[1]:
        s = socket.socket()
        print(s.connect_ex(sa))
        s.close()
' "$1"
}

# wait_order SINCE ORDER : wait (at most 4 s) for the running resolver to
# print ORDER at or after monotonic time SINCE; prints the delay or "never".
wait_order()
{
	local since=$1 order=$2 i t
	for i in $(seq 40); do
		t=$(awk -v s="$since" -v o="$order" '
			{ t = $1; $1 = ""; sub(/^ /, "") }
			t >= s && $0 == o { print t; exit }' "$T/orders")
		if [ -n "$t" ]; then
			awk -v a="$t" -v b="$since" 'BEGIN { printf "%.1f\n", a - b }'
			return 0
		fi
		sleep 0.1
	done
	echo never
}

within()	# LIMIT DELAY : DELAY is a number <= LIMIT
{
	[ "$2" != never ] && awk -v l="$1" -v d="$2" 'BEGIN { exit !(d <= l) }'
}

config $A $B $C | write_config
check_eq "refused connect to B" "111" "$(fail_connect $B)"
check_eq "B has one error" "1" "$(replica_errors reload.cluster $B)"

# The long-running resolver: every 0.2 s, at most 150 times (30 s).
# (env execs python: $! is the resolver's own pid.)
t=$(now)
env LD_PRELOAD="$RLB_LIB" $PY "$GAI" -u -T -n 150 -s 0.2 reload.cluster 80 \
	>"$T/orders" 2>"$T/resolver.err" &
RESOLVER=$!
bg_track $RESOLVER
d=$(wait_order "$t" "$A $C $B")
check "resolver starts with A C B (B has an error)" within 4 "$d"

# 1. Edit in place (same inode): add D in front.
t=$(now)
config $D $A $B $C >"$REPLICALB_CONFIG"
d=$(wait_order "$t" "$D $A $C $B")
check "edited in place: new replica seen within 2.5 s (took $d s)" \
	within 2.5 "$d"

check_eq "refused connect to D" "111" "$(fail_connect $D)"
d=$(wait_order "$(now)" "$A $C $D $B")
check "errors of D seen by the running process" within 1 "$d"

# 2. Replace by rename: reorder, drop D.
t=$(now)
config $C $B $A | write_config
d=$(wait_order "$t" "$C $A $B")
check "replaced by rename: new order within 2.5 s (took $d s)" \
	within 2.5 "$d"
check_eq "B's error survived two reloads" "1" \
	"$(replica_errors reload.cluster $B)"

# 3. Break it: the last good config stays, one error message.
t=$(now)
printf 'load_balancing = "in_order";\nclusters = ( { name = "reload.cluster";\n  replicas = ( "%s" ] ); } );\n' \
	$A | write_config
sleep 3
check_eq "broken config: last good order kept for 3 s" "$C $A $B" \
	"$(awk -v s="$t" '$1 >= s { $1 = ""; sub(/^ /, ""); print }' \
		"$T/orders" | sort -u)"
check "resolver still running" kill -0 "$RESOLVER"
check_eq "broken config: exactly one message" "1" \
	"$(grep -c . "$T/resolver.err")"
check_match "broken config: prefixed replicalb[$RESOLVER]:" \
	"^replicalb\\[$RESOLVER\\]: " "$(cat "$T/resolver.err")"
check_match "broken config: names replicalb.conf:3" \
	'replicalb\.conf:3([^0-9]|$)' "$(cat "$T/resolver.err")"

# 4. Fixed again, D back: its old error was dropped with it.
t=$(now)
config $D $C $B $A | write_config
d=$(wait_order "$t" "$D $C $A $B")
check "fixed config picked up within 2.5 s (took $d s), D has no errors" \
	within 2.5 "$d"
check_eq "after all reloads: errors of A B C D" "0 1 0 0" \
	"$(replica_errors reload.cluster $A) $(replica_errors reload.cluster $B) $(replica_errors reload.cluster $C) $(replica_errors reload.cluster $D)"
check_eq "no further messages" "1" "$(grep -c . "$T/resolver.err")"

kill "$RESOLVER" 2>/dev/null
wait "$RESOLVER" 2>/dev/null
finish
