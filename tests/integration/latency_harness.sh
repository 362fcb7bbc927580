#!/bin/bash
# latency_harness.sh - the latency lab alone (tests/integration/
# lib_latency.sh), no library preloaded: through the TUN link a connect to
# a normal replica is fast, to a slow one it takes the configured delay
# (200 ms, 100 ms), to a silent one it times out; the nft counters count
# exactly one SYN per connect, a client's RST, every packet; the replica
# servers count their accepts; TIME_WAIT is seen on either side; HTTP
# works behind a slow address; modes change at once; tun_link ends on
# SIGTERM and when its parent dies; nothing is left running. It proves the
# ground the hedged-connect tests (issue 22) and bench/hedge_clients.sh
# stand on.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_latency.sh"
lat_enter_ns "$@"
lat_setup nocanary

N=10.77.0.2
S=10.77.0.3
Q=10.77.0.4

# median WORDS... : the median of integers.
median()
{
	printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

# probe_ms ADDR [PROBE OPTIONS...] : the connect times of the probe's
# "ok" lines, on one line; "failed: LINES" when any connect failed.
probe_ms()
{
	local a=$1 out
	shift
	out=$($PY "$LAT_PROBE" "$@" "$a" "$PORT")
	if printf '%s\n' "$out" | grep -qv '^ok '; then
		echo "failed: $out"
	else
		printf '%s\n' "$out" | awk '{print $2}' | tr '\n' ' '
	fi
}

check_eq "client side: lo and $LAT_DEV_CLIENT only" "lo $LAT_DEV_CLIENT" \
	"$(ip -o link | awk -F': ' '{print $2}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "replica side: lo and $LAT_DEV_REPLICA only" "lo $LAT_DEV_REPLICA" \
	"$(lat_exec ip -o link | awk -F': ' '{print $2}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "the replica side is another network namespace" different \
	"$([ "$(readlink /proc/$$/ns/net)" != "$(readlink /proc/$LAT_PID/ns/net)" ] &&
		echo different)"

PORT=$(free_port)
check "a normal replica starts" lat_replica norm "$N" "$PORT" normal
check "a slow replica starts" lat_replica slow "$S" "$PORT" slow 200
check "a silent replica starts" lat_replica mute "$Q" "$PORT" silent
check_eq "the link holds SYNs to the slow address only" "ok $S 200 syn" \
	"$(lat_link rules)"
check_eq "replica setup leaves the counters at zero" "0 0 0 0 0 0" \
	"$(lat_syns "$N") $(lat_syns "$S") $(lat_syns "$Q") $(lat_rsts "$N") \
$(lat_packets "$N") $(lat_packets "$Q")"
check_eq "an address without counters says so" nocounter \
	"$(lat_syns 10.77.0.99)"

# Normal: fast, one SYN per connect, each one accepted.
ms=$(probe_ms "$N" -n 5)
echo "# normal replica, 5 connects (ms): $ms"
check_le "normal replica: median connect < 20 ms" 19 "$(median $ms)"
check_eq "normal replica: exactly one SYN per connect" 5 "$(lat_syns "$N")"
check_eq "normal replica: no RST from the client" 0 "$(lat_rsts "$N")"
check_ge "normal replica: data packets are counted too" 15 \
	"$(lat_packets "$N")"
wait_until 2 [ "$(lat_accepts norm)" -ge 5 ]
check_eq "normal replica: its server accepted each connect" 5 \
	"$(lat_accepts norm)"
check_ge "TIME_WAIT is seen (the client closed first)" 1 \
	"$(lat_timewait "$N")"
check_eq "no SYN reached the other addresses" "0 0" \
	"$(lat_syns "$S") $(lat_syns "$Q")"

# A slow replica given up while its SYN is held: the SYN-ACK that follows
# meets no socket; the client's kernel answers it with one RST, and the
# server accepts nothing.
a0=$(lat_accepts slow)
check_match "slow replica: a 50 ms timeout gives up" '^timeout' \
	"$($PY "$LAT_PROBE" -t 0.05 "$S" "$PORT")"
wait_until 2 [ "$(lat_rsts "$S")" -ge 1 ]
sleep 0.2
check_eq "slow loser: one SYN, one RST" "1 1" \
	"$(lat_syns "$S") $(lat_rsts "$S")"
check_eq "slow loser: its server accepted nothing" "$a0" "$(lat_accepts slow)"
check_eq "slow loser: no TIME_WAIT" 0 "$(lat_timewait "$S")"

# Slow: the SYN held 200 ms, then 100 ms.
lat_reset_counts "$S"
ms=$(probe_ms "$S" -n 3)
echo "# slow replica (200 ms), 3 connects (ms): $ms"
check_ge "slow replica: no connect before 200 ms" 199 \
	"$(printf '%s\n' $ms | sort -n | head -1)"
check_le "slow replica: median connect <= 240 ms" 240 "$(median $ms)"
check_eq "slow replica: exactly one SYN per connect" "3 0" \
	"$(lat_syns "$S") $(lat_rsts "$S")"
check "the delay changes at once" lat_mode "$S" slow 100
ms=$(probe_ms "$S" -n 3)
echo "# slow replica (100 ms), 3 connects (ms): $ms"
check_ge "slow replica at 100 ms: no connect before 100 ms" 99 \
	"$(printf '%s\n' $ms | sort -n | head -1)"
check_le "slow replica at 100 ms: median connect <= 140 ms" 140 \
	"$(median $ms)"
lat_mode "$S" slow 200
out=$(curl -s -m 5 -w ' connect=%{time_connect}' "http://$S:$PORT/")
check_match "curl gets the HTTP server behind the slow address" \
	'^replica=slow' "$out"
check_match "curl: its connect took the delay" ' connect=0\.(19[5-9]|2[0-9])' \
	"$out"

# Silent: a timeout, one SYN, nothing accepted, nothing left.
t0=$(now_ms)
out=$($PY "$LAT_PROBE" -t 0.5 "$Q" "$PORT")
echo "# silent replica, 0.5 s timeout: $out"
check_match "silent replica: the connect times out" '^timeout' "$out"
check_ge "silent replica: after the 0.5 s timeout (ms)" 490 \
	"$(echo "$out" | awk '{print $2}')"
check_le "silent replica: the run took about that long (ms)" 2000 \
	"$(($(now_ms) - t0))"
check_eq "silent replica: one SYN (no retransmission in 0.5 s)" 1 \
	"$(lat_syns "$Q")"
sleep 1.2
check_eq "silent replica, given up: nothing more sent" "1 1" \
	"$(lat_syns "$Q") $(lat_packets "$Q")"
check_eq "silent replica: its server accepted nothing" 0 "$(lat_accepts mute)"
check_eq "silent replica: no TIME_WAIT" 0 "$(lat_timewait "$Q")"
check_match "silent replica: a blocking connect retransmits its SYN" \
	'^timeout' "$($PY "$LAT_PROBE" -t 1.5 "$Q" "$PORT")"
check_ge "silent replica: the retransmission is counted" 3 "$(lat_syns "$Q")"

# Modes change at once: silent, back to normal; every packet held.
lat_mode "$N" silent
check_match "normal replica made silent: a connect times out" '^timeout' \
	"$($PY "$LAT_PROBE" -t 0.3 "$N" "$PORT")"
lat_mode "$N" normal
check_eq "and made normal again: served at once" replica=norm \
	"$(curl -s -m 0.3 "http://$N:$PORT/")"
lat_mode "$N" laggy 100
out=$(curl -s -m 5 -w ' connect=%{time_connect} total=%{time_total}' \
	"http://$N:$PORT/")
echo "# laggy 100 ms: $out"
check_match "laggy: the SYN is held" ' connect=0\.(09[5-9]|1[0-4])' "$out"
check_match "laggy: the request is held too" ' total=0\.(19[5-9]|2[0-9])' \
	"$out"
lat_mode "$N" normal
check_eq "the link counted no packet dropped" 0 \
	"$(lat_link stats | sed 's/.* dropped //')"

# tun_link ends on SIGTERM, and when its parent dies.
pid=$(cat "$T/lat-link.pid")
kill -TERM "$pid"
wait "$pid"
check_eq "tun_link: SIGTERM ends it with status 0" 0 "$?"
rm -f "$T/lat-link.pid"
bash -c '"$1" -a rlbtun8 -b rlbtun9 -c "$2" >"$3" 2>&1 & echo $! >"$4"; wait' \
	- "$LAT_LINK" "$LAT_DIR/link2.sock" "$LAT_DIR/link2.out" \
	"$LAT_DIR/link2.pid" &
parent=$!
wait_until 5 grep -q '^ready' "$LAT_DIR/link2.out"
child=$(cat "$LAT_DIR/link2.pid")
check "a second tun_link runs" kill -0 "$child"
kill -KILL "$parent"
wait "$parent" 2>/dev/null
check "tun_link: its parent killed, it ends" \
	wait_until 2 eval "! kill -0 $child"

lat_stop
check_eq "nothing left running" "" "$(lat_leftovers)"
finish
