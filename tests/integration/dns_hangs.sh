#!/bin/bash
# dns_hangs.sh - what a DNS cluster's refresh must never do to a program
# (issue 20), in a private namespace (tests/integration/lib_dns.sh):
#
#   fork      a child forked while the refresh thread was inside libc's
#             resolver must not hang in its first lookup (glibc's
#             resolv.conf lock, held at fork(), is never reset in the
#             child): tests/helpers/forkloop forks for $RLB_FORK_SECS s
#             while 8 threads resolve DNS clusters refreshed every 10 ms
#   cancel    pthread_cancel() of a thread inside getaddrinfo of a DNS
#             cluster, the one asking for the first answer or one waiting
#             for it, must not hang later lookups or fork()
#             (tests/helpers/cancelgai; a server answering after 3 s)
#   down      a dns= cluster whose server never answers: the first lookup
#             takes no longer than glibc's of the same name (A and AAAA
#             asked at once), later ones answer at once, not one resolver
#             timeout per refresh floor; members arrive when DNS is back
#   glueless  srv= targets sent without their addresses: resolved in the
#             background refresh, in parallel, never inside the program's
#             getaddrinfo (20 targets, every answer 0.3 s late)
#   latency   fork() time with a refresh in flight (informational; a
#             generous bound)
#
# RLB_DNS_HANGS_PHASES="fork down" runs only those phases (by hand);
# RLB_FORK_SECS=240 makes the fork phase a measurement (and
# DNS_NS_TIMEOUT=400 gives the namespace the time); RLB_FORK_THREADS
# (8) resolving threads; RLB_FORK_TOUCH= (empty) leaves resolv.conf
# alone (forkloop without -r: the natural, lower hit rate).
#
#   127.0.0.53      named (fork phase)
#   127.0.0.54      bad_dns.py (every other phase; its mode changes)
#   127.0.0.71      down.rlb.test's A record, once DNS is back
#   127.0.0.72/73   sl1 (cancel), la1 (latency): nothing listens
#   127.0.0.81-88   the fork phase's clusters' addresses: nothing listens
#   127.0.0.101-120 many: t1..t20 (http), the glueless targets
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_dns.sh"
dns_enter_ns "$@"
dns_setup

Z=$DNS_ZONE
FORKLOOP=$top_builddir/tests/helpers/forkloop
CANCELGAI=$top_builddir/tests/helpers/cancelgai
PORT=$(free_port)
: "${RLB_FORK_SECS:=35}" "${RLB_FORK_THREADS:=8}" "${RLB_FORK_TOUCH=1}"
PHASES=" ${RLB_DNS_HANGS_PHASES:-fork cancel down glueless latency} "
check "forkloop is built" test -x "$FORKLOOP"
check "cancelgai is built" test -x "$CANCELGAI"

# phase NAME : whether NAME is to run.
phase()
{
	case $PHASES in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

# field NAME LINE : the value of NAME=VALUE in LINE; "hung" for a step
# of cancelgai that did not end, else "missing".
field()
{
	local v
	v=$(printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1)
	case $2 in
	*" hung") v=${v:-hung} ;;
	esac
	echo "${v:-missing}"
}

# step_line STEP OUT : the line of cancelgai's output for STEP.
step_line()
{
	printf '%s\n' "$2" | grep "^$1 " | head -n 1
}

# glibc_ms NAME : how long plain glibc's getaddrinfo (python3, no
# preload) takes for NAME, AF_UNSPEC, and what it answered.
glibc_ms()
{
	$PY - "$1" <<'EOF'
import socket, sys, time
t0 = time.monotonic()
try:
    socket.getaddrinfo(sys.argv[1], 80, 0, socket.SOCK_STREAM)
    r = "ok"
except socket.gaierror as e:
    r = {getattr(socket, k): k for k in dir(socket)
         if k.startswith("EAI_")}.get(e.errno, str(e.errno))
print("%d %s" % ((time.monotonic() - t0) * 1000, r))
EOF
}

# lines_between TAG FROM_MS TO_MS : the client's lines with a wall-clock
# time in [FROM_MS, TO_MS).
lines_between()
{
	awk -v a="$2" -v b="$3" '$1 * 1000 >= a && $1 * 1000 < b' "$T/$1.log"
}

# res_stats : "n=N max=MS sum=MS errors=E" of client lines on stdin.
res_stats()
{
	awk '{n++; s += $2; if ($2 > m) m = $2; if ($3 != "ok") e++}
		END {printf "n=%d max=%d sum=%d errors=%d\n", n, m, s, e}'
}

# first_end_ms TAG SECS : when the client's first lookup returned
# (wall-clock ms: its line's start time plus its RES_MS), waiting for it
# (bounded: SECS); "none" if it did not.
first_end_ms()
{
	local i
	for i in $(seq $(($2 * 10))); do
		[ -s "$T/$1.log" ] && break
		sleep 0.1
	done
	awk 'NR == 1 {printf "%.0f\n", $1 * 1000 + $2; f = 1} END {if (!f) print "none"}' \
		"$T/$1.log"
}

# sleep_until MS : sleep until wall-clock MS (now_ms).
sleep_until()
{
	while [ "$(now_ms)" -lt "$1" ]; do
		sleep 0.1
	done
}

# The zone of bad_dns.py: every name the phases after the first ask.
{
	echo "_http._tcp.slow.$Z SRV 0 0 $PORT sl1.$Z"
	echo "sl1.$Z A 127.0.0.72"
	echo "_http._tcp.lat.$Z SRV 0 0 $PORT la1.$Z"
	echo "la1.$Z A 127.0.0.73"
	echo "down.$Z A 127.0.0.71"
	for i in $(seq 20); do
		echo "_http._tcp.many.$Z SRV 0 0 $PORT t$i.many.$Z"
		echo "t$i.many.$Z A 127.0.0.$((100 + i))"
	done
} >"$DNS_DIR/bad.zone"
bad_dns_mode good
bad_dns_start 127.0.0.54 || fail "bad_dns.py"

write_config <<EOF
load_balancing = "round_robin";
connect_timeout_ms = 1000;
clusters = (
$(for i in 1 2 3 4; do
	echo "  { name = \"f$i.cluster\"; dns = \"f$i.$Z\";"
	echo "    dns_refresh_floor_ms = 10; dns_cache_ttl = 1; },"
	echo "  { name = \"fs$i.cluster\"; srv = \"_http._tcp.fs$i.$Z\";"
	echo "    dns_refresh_floor_ms = 10; dns_cache_ttl = 1; },"
done)
  { name = "slow.cluster"; srv = "_http._tcp.slow.$Z";
    dns_refresh_floor_ms = 1000; },
  { name = "lat.cluster"; srv = "_http._tcp.lat.$Z";
    dns_refresh_floor_ms = 1000; },
  { name = "down.cluster"; dns = "down.$Z";
    dns_refresh_floor_ms = 1000; dns_cache_ttl = 3; },
  { name = "many.cluster"; srv = "_http._tcp.many.$Z";
    dns_refresh_floor_ms = 1000; dns_cache_ttl = 2; }
);
EOF

# -------------------------------------------------------------------
# fork: children forked while refreshes run all the time (floor 10 ms,
# TTL 0) must all complete a lookup of a plain name (localhost, through
# libc) and of the cluster. The resolving threads ask only for dns=
# clusters and srv= clusters whose targets come with the answer, so that
# the program itself never enters libc's resolver: a thread of the
# program's own inside res_* at fork() would hang a child too (a glibc
# limit the library cannot fix), the library's must not. -r: the mtime
# of resolv.conf changes every millisecond, so that glibc re-reads it
# under its lock at each res_ninit (a wider window: more hits per run).
# A hung child holds one of the 16 slots for its 5 s alarm, so "hung"
# can count at most 16 x 35 / 5 = 112 in the default run.
if phase fork; then
	dns_use_server "$DNS_ADDR" || fail "resolv.conf for named"
	dns_update <<EOF || fail "fork: the zone"
$(for i in 1 2 3 4; do
	dns_rr_add_a f$i.$Z 127.0.0.$((80 + i))
	dns_rr_add_a h$i.$Z 127.0.0.$((84 + i))
	dns_rr_add_srv _http._tcp.fs$i.$Z 0 0 "$PORT" h$i.$Z
done)
send
EOF
	names="f1.cluster f2.cluster f3.cluster f4.cluster fs1.cluster
		fs2.cluster fs3.cluster fs4.cluster"
	check_eq "fork: the clusters resolve" \
		"127.0.0.81 127.0.0.85" \
		"$(preload $PY "$GAI" -u -4 f1.cluster 80) $(preload $PY "$GAI" -u -4 fs1.cluster 80)"
	out=$(timeout $((RLB_FORK_SECS + 90)) env LD_PRELOAD="$RLB_LIB" \
		"$FORKLOOP" -t "$RLB_FORK_THREADS" -k 16 -w 5 \
		-d "$RLB_FORK_SECS" ${RLB_FORK_TOUCH:+-r} $names 2>&1)
	echo "# fork: $RLB_FORK_SECS s, $RLB_FORK_THREADS threads${RLB_FORK_TOUCH:+, resolv.conf touched}: $out"
	check_ge "fork: children were forked" 100 "$(field children "$out")"
	check_eq "fork: no child hung in its first lookup (alarm 5 s)" 0 \
		"$(field hung "$out")"
	check_eq "fork: no child had to be killed" 0 "$(field killed "$out")"
	check_eq "fork: no child's lookup failed" 0 "$(field failed "$out")"
	# 8 busy threads on a shared machine: fork() may wait for a CPU
	# (117 ms seen with a static cluster); the bound is for a lock.
	check_le "fork: fork() took < 1 s at most (us)" 999999 \
		"$(field fork_max_us "$out")"
fi

dns_use_server 127.0.0.54 || fail "resolv.conf for bad_dns.py"

# -------------------------------------------------------------------
# cancel: the server answers after 3 s (timeout:5, so that the answer
# counts); a thread is cancelled 0.5 s into its lookup of the cluster. Every step of cancelgai is bounded by
# 6 s: a step that does not end in time is "hung". Bounds: the delay
# + 1.5 s.
if phase cancel; then
	bad_dns_mode good delay=3
	DNS_RESOLV_OPTIONS="timeout:5" dns_use_server 127.0.0.54 ||
		fail "resolv.conf with timeout:5"
	echo "# cancel: plain glibc, sl1.$Z. (A, AAAA): $(glibc_ms sl1.$Z.)"
	out=$(timeout 60 env LD_PRELOAD="$RLB_LIB" "$CANCELGAI" -c 500 \
		-w 6000 asking slow.cluster 2>&1)
	echo "# cancel (asking):" $out
	l=$(step_line cancelled "$out")
	check_le "cancel, asking thread: its pthread_join returns (ms from its lookup's start)" \
		4500 "$(field start_ms "$l")"
	l=$(step_line later "$out")
	check_le "cancel, asking thread: a later lookup returns (ms)" 4500 \
		"$(field ms "$l")"
	check_eq "cancel, asking thread: the later lookup has members" 0 \
		"$(field rc "$l")"

	out=$(timeout 60 env LD_PRELOAD="$RLB_LIB" "$CANCELGAI" -c 500 \
		-w 6000 waiting slow.cluster 2>&1)
	echo "# cancel (waiting):" $out
	l=$(step_line cancelled "$out")
	check_le "cancel, waiting thread: its pthread_join returns (ms from its lookup's start)" \
		4500 "$(field start_ms "$l")"
	l=$(step_line asker "$out")
	check_le "cancel, waiting thread: the asking thread's lookup returns (ms)" \
		4500 "$(field ms "$l")"
	check_eq "cancel, waiting thread: the asking thread has members" 0 \
		"$(field rc "$l")"
	l=$(step_line later "$out")
	check_le "cancel, waiting thread: a later lookup returns (ms)" 4500 \
		"$(field ms "$l")"
	check_eq "cancel, waiting thread: the later lookup has members" 0 \
		"$(field rc "$l")"
	l=$(step_line fork "$out")
	check_le "cancel, waiting thread: fork() then returns (ms)" 1000 \
		"$(field ms "$l")"
	check_eq "cancel, waiting thread: the child's lookup returns" ok \
		"$(field child "$l")"
	dns_use_server 127.0.0.54 || fail "resolv.conf for bad_dns.py"
fi

# -------------------------------------------------------------------
# down: a server that reads every query and answers none (bad_dns.py
# "drop": no ICMP refusal), timeout:1 attempts:2. glibc asks A and AAAA
# at once: one 2 s wait. The library's first lookup may wait as long,
# no longer; while DNS stays down the next lookups answer (EAI_AGAIN)
# at once, none waiting a resolver timeout again a refresh floor later.
# When the server answers again, the members arrive within
# dns_cache_ttl (3 s, the longest back-off) + one resolver timeout (2 s:
# a retry that failed just as the server came back) + 0.5 s.
if phase down; then
	bad_dns_mode drop
	DNS_RESOLV_OPTIONS="attempts:2" dns_use_server 127.0.0.54 ||
		fail "resolv.conf with attempts:2"
	g=$(glibc_ms down.$Z.)
	echo "# down: plain glibc, down.$Z.: $g"
	gms=${g%% *}
	dns_client down down.cluster 80 -m none -i 0.05
	t1=$(first_end_ms down 20)
	first=$(awk 'NR == 1' "$T/down.log")
	echo "# down: first lookup: $first"
	check_le "down: the first lookup waits no longer than glibc's + 0.5 s (ms)" \
		$((gms + 500)) "$(printf '%s\n' "$first" | awk '{print $2}')"
	if [ "$t1" != none ]; then
		sleep_until $((t1 + 10000))
		st=$(lines_between down "$t1" $((t1 + 10000)) | res_stats)
		echo "# down: the next 10 s, DNS still down: $st;" \
			"slow: $(lines_between down "$t1" $((t1 + 10000)) |
				awk '$2 > 200 {printf "%s ", $2}' | head -c 300)"
		check_ge "down: lookups went on every 50 ms (count)" 50 \
			"$(field n "$st")"
		check_le "down: no later lookup blocks more than 0.2 s (ms)" 200 \
			"$(field max "$st")"
		check_le "down: the 10 s of lookups blocked 0.5 s in all (ms)" 500 \
			"$(field sum "$st")"
	fi
	bad_dns_mode good
	back=$(now_ms)
	wait_until 10 grep -q '127\.0\.0\.71:80' "$T/down.log"
	# The first lookup that returned (start + RES_MS) with the member,
	# after DNS came back; then 2 s more of lookups.
	got=$(awk -v t="$back" '$1 * 1000 + $2 >= t && $4 ~ /127\.0\.0\.71/ {printf "%.0f\n", $1 * 1000 + $2 - t; exit}' \
		"$T/down.log")
	echo "# down: members ${got:-never} ms after DNS came back"
	check_le "down: members within dns_cache_ttl + 2.5 s of DNS back (ms)" \
		5500 "${got:-never}"
	sleep 2
	st=$(lines_between down "$back" "$(now_ms)" | res_stats)
	echo "# down: after DNS came back: $st"
	check_le "down: no lookup blocks more than 0.2 s once back (ms)" 200 \
		"$(field max "$st")"
	dns_client_stop down
	check_eq "down: the client exits 0" 0 "$?"
	dns_use_server 127.0.0.54 || fail "resolv.conf for bad_dns.py"
fi

# -------------------------------------------------------------------
# glueless: 20 SRV targets, sent without the additional section, every
# answer 0.3 s late, TTL 1 s, dns_cache_ttl 2 s. The first lookup asks
# the SRV, then all the targets at once: <= 1.5 s. Over the next 15 s of
# lookups every 50 ms none takes more than 0.1 s, while the program
# connects to the targets (an HTTP request each round).
if phase glueless; then
	for i in $(seq 20); do
		start_replica t$i 127.0.0.$((100 + i)) "$PORT" http ||
			fail "replica t$i"
	done
	bad_dns_mode good delay=0.3 noglue ttl=1
	dns_client many many.cluster 80 -m http -i 0.05
	t1=$(first_end_ms many 20)
	first=$(awk 'NR == 1' "$T/many.log")
	echo "# glueless: first lookup: $(printf '%s\n' "$first" | cut -c1-120)"
	check_le "glueless: the first lookup <= 1.5 s (ms)" 1500 \
		"$(printf '%s\n' "$first" | awk '{print $2}')"
	if [ "$t1" != none ]; then
		sleep_until $((t1 + 15000))
		lines_between many "$t1" $((t1 + 15000)) >"$T/many.window"
		st=$(res_stats <"$T/many.window")
		echo "# glueless: the next 15 s: $st;" \
			"slow: $(awk '$2 > 100 {printf "%s ", $2}' "$T/many.window" | head -c 300)"
		check_ge "glueless: lookups went on (count)" 50 "$(field n "$st")"
		check_le "glueless: no later lookup takes more than 0.1 s (ms)" 100 \
			"$(field max "$st")"
		check_eq "glueless: every lookup answered" 0 "$(field errors "$st")"
		served=$(awk '{sub("served=", "", $5); print $5}' "$T/many.window" |
			grep -c '^t[0-9]*$')
		check_eq "glueless: every round was served by a target" \
			"$(field n "$st")" "$served"
		check_ge "glueless: round robin over the targets (distinct)" 10 \
			"$(awk '{sub("served=", "", $5); print $5}' "$T/many.window" |
				grep '^t[0-9]*$' | sort -u | wc -l)"
	fi
	dns_client_stop many
	check_eq "glueless: the client exits 0" 0 "$?"
	for i in $(seq 20); do
		stop_replica t$i
	done
fi

# -------------------------------------------------------------------
# latency: fork() time while nothing is asked, while the first answer is
# awaited, and while a background refresh waits on the server (answers
# 2 s late; timeout:5). Informational, with a generous bound.
if phase latency; then
	bad_dns_mode good delay=2
	DNS_RESOLV_OPTIONS="timeout:5" dns_use_server 127.0.0.54 ||
		fail "resolv.conf with timeout:5"
	out=$(timeout 60 env LD_PRELOAD="$RLB_LIB" "$FORKLOOP" -L -n 100 \
		-s 1200 lat.cluster 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed 's/^/# latency: /'
	check_eq "latency: every fork() returned" 0 "$rc"
	for s in idle first refresh; do
		l=$(step_line "$s" "$out")
		check_le "latency: fork() max < 100 ms, $s (us)" 99999 \
			"$(field max_us "$l")"
	done
	bad_dns_mode good
fi

finish
