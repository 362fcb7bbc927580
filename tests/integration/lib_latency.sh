# tests/integration/lib_latency.sh - a latency lab for the hedged-connect
# tests (issue 22): replicas that are healthy, slow (their SYNs answered
# late) or silent (their SYNs dropped), with per-address SYN, RST and
# packet counters, on a kernel without tc qdiscs (no netem). Sourced after
# tests/lib.sh:
#
#	. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
#	. "$top_srcdir/tests/integration/lib_latency.sh"
#	lat_enter_ns "$@"	# re-run this script in private namespaces
#	lat_setup		# rlb_setup, the link, routes, nft tables
#	lat_replica r1 10.77.0.2 "$PORT" silent
#	lat_replica r2 10.77.0.3 "$PORT" slow 200
#	lat_replica r3 10.77.0.4 "$PORT" normal
#	... check_eq "no extra SYN" 1 "$(lat_syns 10.77.0.4)" ...
#	finish
#
# The layout. The script runs in its own network, mount and PID
# namespaces (unshare -n -m -p; root), the client side: lo and rlbtun0
# (10.77.1.1/24), with 10.77.0.0/24 routed through rlbtun0. The replica
# side is a second network namespace that tests/helpers/tun_link owns:
# lo and rlbtun1, which carries the replica addresses (10.77.0.N/32, added
# as lat_replica names them) and routes 10.77.1.0/24 back. tun_link
# forwards every IPv4 packet between the two devices and holds the SYNs
# of a slow address (or, in mode laggy, every packet to it) for its delay.
# Servers run on the replica side (nsenter into tun_link's namespace:
# $LAT_PID); clients, the library and the counters on the client side.
# Nothing touches the host's interfaces, nft tables or /etc, and when the
# script's shell (PID 1 there) exits, the kernel kills whatever it left.
#
# The functions:
#
#   lat_enter_ns ARGS...	unless already inside, re-run the calling
#			script (with ARGS) in new network, mount and PID
#			namespaces, time-limited ($LAT_NS_TIMEOUT, default
#			300 s); exit with its status. Then check that no
#			process of the run is left and that the host has no
#			rlbtun link and no rlb_lat nft table.
#   lat_setup [nocanary]	after lat_enter_ns: rlb_setup (its argument
#			passed on), $LAT_DIR ($T/lat), tun_link started and
#			the two sides configured, the nft tables in place,
#			the connect probe $LAT_PROBE written.
#   lat_replica NAME ADDR PORT MODE [DELAY_MS]
#			replica_server.py NAME (http, --log-accepts) on
#			ADDR:PORT on the replica side, ADDR set to MODE (see
#			lat_mode), ADDR's counters zeroed.
#   lat_redis NAME ADDR PORT MODE [DELAY_MS]
#			the same with a real redis-server (start_redis).
#   lat_addr ADDR	put ADDR on the replica side and give it counters
#			(lat_replica does this; once per address).
#   lat_mode ADDR MODE [DELAY_MS]
#			normal: packets pass at once; slow: each SYN to ADDR
#			(without ACK: a connect's SYN and its retransmissions)
#			is held DELAY_MS (default 200) before it reaches the
#			replica side, the rest passes at once; laggy: every
#			packet to ADDR is held DELAY_MS (a long path); silent:
#			SYNs to ADDR are dropped on the replica side (nft), so
#			that a connect is neither accepted nor refused, while
#			connections already made go on. Takes effect at once.
#   lat_syns ADDR	SYNs (without ACK) the client side has sent to ADDR
#			since its counters were zeroed, retransmissions
#			included (nft counter, counted as they leave, before
#			any hold or drop).
#   lat_rsts ADDR	RSTs the client side has sent to ADDR.
#   lat_packets ADDR	every packet the client side has sent to ADDR.
#   lat_reset_counts ADDR...	zero ADDR's counters.
#   lat_accepts NAME	connections replica server NAME has accepted
#			(its "accepted" lines).
#   lat_timewait ADDR	sockets in TIME_WAIT on a connection with ADDR:
#			the client side's (to ADDR) plus the replica side's
#			(from ADDR), via ss.
#   lat_exec CMD...	run CMD on the replica side (nsenter -n).
#   lat_link CMD...	a command to the running tun_link (hold, rules,
#			stats; see tests/helpers/tun_link.c).
#   lat_stop		stop every server and the link (bounded), as the
#			cleanup trap would; lat_leftovers then lists any
#			process of the run still alive besides the shell.
#
# The connect probe: $PY "$LAT_PROBE" [-t SECS] [-n COUNT] ADDR PORT
# connects COUNT times (default 1), each with a timeout of SECS (default
# none), closes, and prints one line per connect: "ok MS", "timeout MS"
# or "error ERRNO-NAME MS", MS the milliseconds connect() took in the
# process (start-up left out).

LAT_CLIENT=10.77.1.1
LAT_NET=10.77.0.0/24
LAT_DEV_CLIENT=rlbtun0
LAT_DEV_REPLICA=rlbtun1
LAT_LINK=$top_builddir/tests/helpers/tun_link
LAT_DIR=
LAT_PID=
LAT_CTL=
LAT_PROBE=

# ---------------------------------------------------------------------
# Namespaces

# lat_enter_ns ARGS... : see the top of the file.
lat_enter_ns()
{
	local tool rc tag left
	[ -n "${RLB_IN_LATNS:-}" ] && return 0
	[ "$(id -u)" = 0 ] || skip "not root: unshare -n -m -p needs root"
	[ -c /dev/net/tun ] || skip "no /dev/net/tun: the lab needs TUN devices"
	for tool in unshare nsenter ip nft ss; do
		command -v "$tool" >/dev/null || {
			echo "FAIL - $tool not installed (scripts/deps.sh)"
			exit 1
		}
	done
	tag=$$-$RANDOM$RANDOM
	# --kill-child=TERM: when timeout kills unshare, the script's shell
	# gets SIGTERM and its cleanup trap runs.
	env RLB_IN_LATNS=1 RLB_LAT_TAG="$tag" timeout "${LAT_NS_TIMEOUT:-300}" \
		unshare -n -m -p --fork --kill-child=TERM --mount-proc \
		--propagation private bash "$0" "$@"
	rc=$?
	left=$(grep -lsa "RLB_LAT_TAG=$tag" /proc/[0-9]*/environ |
		cut -d/ -f3 | tr '\n' ' ')
	if [ -n "$left" ]; then
		echo "FAIL - processes of the run left on the host: $left"
		rc=1
	fi
	if ip -o link show | grep -q ' rlbtun'; then
		echo "FAIL - an rlbtun link is on the host"
		rc=1
	fi
	if nft list tables 2>/dev/null | grep -q ' rlb_lat$'; then
		echo "FAIL - an rlb_lat nft table is on the host"
		rc=1
	fi
	exit "$rc"
}

# lat_exec CMD... : CMD in the replica side's network namespace.
lat_exec()
{
	nsenter -t "$LAT_PID" -n "$@"
}

# lat_link CMD... : one command to tun_link; prints its answer.
lat_link()
{
	"$LAT_LINK" -C "$LAT_CTL" "$@"
}

# lat_setup [nocanary] : see the top of the file.
lat_setup()
{
	[ -n "${RLB_IN_LATNS:-}" ] || {
		echo "FAIL - lat_setup outside lat_enter_ns"
		exit 1
	}
	[ -x "$LAT_LINK" ] || {
		echo "FAIL - $LAT_LINK not built (make check builds it)"
		exit 1
	}
	rlb_setup "$@"
	LAT_DIR=$T/lat
	LAT_CTL=$LAT_DIR/link.sock
	mkdir -p "$LAT_DIR" || exit 1
	ip link set lo up || exit 1
	"$LAT_LINK" -a "$LAT_DEV_CLIENT" -b "$LAT_DEV_REPLICA" -c "$LAT_CTL" \
		>"$LAT_DIR/link.out" 2>&1 &
	LAT_PID=$!
	echo "$LAT_PID" >"$T/lat-link.pid"
	if ! wait_until 5 grep -q '^ready' "$LAT_DIR/link.out"; then
		echo "FAIL - tun_link did not start:"
		sed 's/^/    | /' "$LAT_DIR/link.out"
		exit 1
	fi
	lat_configure || {
		echo "FAIL - the lab's interfaces, routes or nft tables"
		exit 1
	}
	write_lat_probe
}

# lat_configure : the two sides' links, addresses, routes and tables.
lat_configure()
{
	# IPv4 only: no IPv6 chatter (router solicitations) on the link.
	sysctl -qw "net.ipv6.conf.$LAT_DEV_CLIENT.disable_ipv6=1" 2>/dev/null
	ip link set "$LAT_DEV_CLIENT" up &&
		ip addr add "$LAT_CLIENT/24" dev "$LAT_DEV_CLIENT" &&
		ip route add "$LAT_NET" dev "$LAT_DEV_CLIENT" src "$LAT_CLIENT" ||
		return 1
	lat_exec sysctl -qw "net.ipv6.conf.$LAT_DEV_REPLICA.disable_ipv6=1" \
		2>/dev/null
	lat_exec ip link set lo up &&
		lat_exec ip link set "$LAT_DEV_REPLICA" up &&
		lat_exec ip route add "${LAT_CLIENT%.*}.0/24" \
			dev "$LAT_DEV_REPLICA" || return 1
	# The counters where the packets leave the client; the drop where
	# they reach the replica side (a drop on output would fail the
	# client's connect with EPERM).
	nft -f - <<EOF || return 1
table inet rlb_lat {
	chain out {
		type filter hook output priority filter; policy accept;
	}
}
EOF
	lat_exec nft -f - <<EOF || return 1
table inet rlb_lat {
	set silent {
		type ipv4_addr;
	}
	chain pre {
		type filter hook prerouting priority raw; policy accept;
		ip daddr @silent tcp flags & (syn | ack) == syn drop
	}
}
EOF
}

# ---------------------------------------------------------------------
# Replicas

# lat_cname KIND ADDR : the name of ADDR's counter of KIND.
lat_cname()
{
	echo "$1_${2//./_}"
}

# lat_addr ADDR : see the top of the file.
lat_addr()
{
	local a=$1 k
	[ -f "$LAT_DIR/addr-$a" ] && return 0
	lat_exec ip addr add "$a/32" dev "$LAT_DEV_REPLICA" || return 1
	for k in syn rst pkt; do
		nft add counter inet rlb_lat "$(lat_cname "$k" "$a")" || return 1
	done
	nft add rule inet rlb_lat out ip daddr "$a" \
		tcp flags \& \(syn \| ack\) == syn \
		counter name "$(lat_cname syn "$a")" &&
		nft add rule inet rlb_lat out ip daddr "$a" \
			tcp flags \& rst == rst counter name "$(lat_cname rst "$a")" &&
		nft add rule inet rlb_lat out ip daddr "$a" \
			counter name "$(lat_cname pkt "$a")" || return 1
	echo normal >"$LAT_DIR/addr-$a"
}

# lat_mode ADDR MODE [DELAY_MS] : see the top of the file.
lat_mode()
{
	local a=$1 mode=$2 ms=${3:-200} was
	lat_addr "$a" || return 1
	was=$(cat "$LAT_DIR/addr-$a")
	if [ "$mode" = silent ] && [ "$was" != silent ]; then
		lat_exec nft add element inet rlb_lat silent "{ $a }" || return 1
	elif [ "$mode" != silent ] && [ "$was" = silent ]; then
		lat_exec nft delete element inet rlb_lat silent "{ $a }" ||
			return 1
	fi
	case $mode in
	normal | silent) lat_link hold "$a" 0 >/dev/null ;;
	slow) lat_link hold "$a" "$ms" syn >/dev/null ;;
	laggy) lat_link hold "$a" "$ms" all >/dev/null ;;
	*)
		echo "lat_mode: unknown mode $mode"
		return 1
		;;
	esac || return 1
	echo "$mode" >"$LAT_DIR/addr-$a"
}

# lat_place START NAME ADDR PORT MODE [DELAY_MS] : START (start_replica
# or start_redis) on the replica side, reachable while it starts; then
# ADDR in MODE and its counters zeroed.
lat_place()
{
	local start=$1 name=$2 a=$3 port=$4 mode=$5 ms=${6:-200}
	lat_addr "$a" && lat_mode "$a" normal || return 1
	if [ "$start" = start_replica ]; then
		RLB_SERVER_EXEC="nsenter -t $LAT_PID -n" \
			start_replica "$name" "$a" "$port" http --log-accepts ||
			return 1
	else
		RLB_SERVER_EXEC="nsenter -t $LAT_PID -n" \
			"$start" "$name" "$a" "$port" || return 1
	fi
	lat_mode "$a" "$mode" "$ms" && lat_reset_counts "$a"
}

# lat_replica NAME ADDR PORT MODE [DELAY_MS] : see the top of the file.
lat_replica()
{
	lat_place start_replica "$@"
}

# lat_redis NAME ADDR PORT MODE [DELAY_MS] : see the top of the file.
lat_redis()
{
	lat_place start_redis "$@"
}

# ---------------------------------------------------------------------
# Counting

# lat_count KIND ADDR : the packets ADDR's counter of KIND has counted.
lat_count()
{
	nft list counter inet rlb_lat "$(lat_cname "$1" "$2")" 2>/dev/null |
		awk '$1 == "packets" {print $2; f = 1} END {if (!f) print "nocounter"}'
}

lat_syns()
{
	lat_count syn "$1"
}

lat_rsts()
{
	lat_count rst "$1"
}

lat_packets()
{
	lat_count pkt "$1"
}

# lat_reset_counts ADDR... : see the top of the file.
lat_reset_counts()
{
	local a k
	for a in "$@"; do
		for k in syn rst pkt; do
			nft reset counter inet rlb_lat "$(lat_cname "$k" "$a")" \
				>/dev/null || return 1
		done
	done
}

# lat_accepts NAME : see the top of the file.
lat_accepts()
{
	grep -c '^accepted ' "$T/srv-$1.out" 2>/dev/null || true
}

# lat_timewait ADDR : see the top of the file.
lat_timewait()
{
	local c r
	c=$(ss -Htan state time-wait dst "$1" | wc -l)
	r=$(lat_exec ss -Htan state time-wait src "$1" | wc -l)
	echo $((c + r))
}

# ---------------------------------------------------------------------
# Stopping

# lat_stop : see the top of the file.
lat_stop()
{
	local f
	for f in "$T"/srv-*.pid; do
		[ -f "$f" ] && stop_pidfile "$f"
	done
	stop_pidfile "$T/lat-link.pid"
}

# lat_leftovers : the processes of this PID namespace other than its
# shell and this function's own, one "PID COMMAND" a line.
lat_leftovers()
{
	local me=$BASHPID
	ps -e -o pid=,ppid=,args= |
		awk -v sh=$$ -v me="$me" '$1 != sh && $1 != me && $2 != me'
}

# ---------------------------------------------------------------------
# The connect probe

write_lat_probe()
{
	LAT_PROBE=$LAT_DIR/probe.py
	cat >"$LAT_PROBE" <<'EOF'
import errno, getopt, socket, sys, time
opts, args = getopt.getopt(sys.argv[1:], "t:n:")
o = dict(opts)
addr = (args[0], int(args[1]))
tmo = float(o["-t"]) if "-t" in o else None
for _ in range(int(o.get("-n", "1"))):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(tmo)
    t0 = time.monotonic()
    try:
        s.connect(addr)
        word = "ok"
    except socket.timeout:
        word = "timeout"
    except OSError as e:
        word = "error " + errno.errorcode.get(e.errno, str(e.errno))
    line = "%s %d" % (word, (time.monotonic() - t0) * 1000)
    s.close()
    print(line, flush=True)
EOF
}
