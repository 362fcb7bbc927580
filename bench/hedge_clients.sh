#!/bin/bash
# hedge_clients.sh - the figures of issue 22 (hedged connects): real
# clients, each with the library preloaded, against a cluster whose first
# replica is silent (its SYNs dropped) and against one whose first replica
# is slow (its SYNs answered after $SLOW_MS ms, default 200), in the
# latency lab (tests/integration/lib_latency.sh: private namespaces, a TUN
# link, nft counters). Policy in_order, every other key at its default,
# plus the lines of $HEDGE_CONFIG, e.g.
#
#   HEDGE_CONFIG='use_hedged_requests = true; hedged_connection_timeout_ms = 50;'
#
# For each client, one row: the seconds to a served request against a
# healthy cluster (the client's own start-up and request: the floor), then
# on its first and its second run against the bad cluster (each a fresh
# process; the health state is reset before the first only), and after
# each run the SYNs it sent to each replica of the cluster, first/second/
# third, and the errors/slowdowns counted against the first. A run is cut
# at $LIMIT seconds (default 20): ">20".
#
#   bash bench/hedge_clients.sh [BUILDDIR]   (default: build/check; root)
#
# Needs the test dependencies (scripts/deps.sh) and a built tree, with
# tests/helpers/tun_link (make check builds it; or make
# tests/helpers/tun_link). node, psql and the PostgreSQL server are used
# when installed.
top=$(cd "$(dirname "$0")/.." && pwd)
export top_srcdir=$top
export top_builddir=${1:-$top/build/check}
export RLB_LIB=$top_builddir/.libs/libreplicalb.so
. "$top/tests/lib.sh"
. "$top/tests/integration/lib_latency.sh"
export LAT_NS_TIMEOUT=${LAT_NS_TIMEOUT:-3600}
lat_enter_ns "$@"
lat_setup
LIMIT=${LIMIT:-20}
SLOW_MS=${SLOW_MS:-200}

# The replicas: a silent first, a slow first, two healthy behind both.
BAD_SILENT=10.77.0.2
BAD_SLOW=10.77.0.5
GOOD="10.77.0.3 10.77.0.4"
HP=$(free_port)
RP=$(free_port)
PP=$(free_port)
for a in $GOOD; do
	lat_replica "http-$a" "$a" "$HP" normal || exit 1
	lat_redis "redis-$a" "$a" "$RP" normal || exit 1
done
lat_replica http-silent "$BAD_SILENT" "$HP" silent || exit 1
lat_replica http-slow "$BAD_SLOW" "$HP" slow "$SLOW_MS" || exit 1
lat_redis redis-slow "$BAD_SLOW" "$RP" slow "$SLOW_MS" || exit 1

# PostgreSQL, one server on the healthy and the slow addresses.
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PGDIR=
if [ -x "$PG_BIN/postgres" ] && command -v psql >/dev/null &&
	id postgres >/dev/null 2>&1; then
	PGDIR=$(mktemp -d /tmp/rlbpg.XXXXXX)
	trap 'rlb_cleanup; rm -rf "$PGDIR"' EXIT
	chown postgres: "$PGDIR"
	lat_exec setpriv --reuid=postgres --regid=postgres --init-groups \
		"$PG_BIN/initdb" -A trust -U postgres -D "$PGDIR/data" \
		>"$T/pg-initdb.out" 2>&1 || {
		echo "initdb failed:"
		sed 's/^/    | /' "$T/pg-initdb.out"
		exit 1
	}
	echo "host all all ${LAT_CLIENT%.*}.0/24 trust" >>"$PGDIR/data/pg_hba.conf"
	lat_exec setpriv --reuid=postgres --regid=postgres --init-groups \
		"$PG_BIN/postgres" -D "$PGDIR/data" -p "$PP" \
		-c listen_addresses="${GOOD// /,},$BAD_SLOW" \
		-c unix_socket_directories="$PGDIR" -c fsync=off \
		>"$T/srv-pg.out" 2>&1 &
	echo $! >"$T/srv-pg.pid"
	wait_until 10 psql "host=10.77.0.3 port=$PP user=postgres sslmode=disable" \
		-Atc 'select 1' || {
		echo "postgres did not start:"
		tail -n 20 "$T/srv-pg.out" | sed 's/^/    | /'
		exit 1
	}
fi
lat_reset_counts $BAD_SILENT $BAD_SLOW $GOOD

GOOD_LIST=$(printf '"%s", ' $GOOD)
GOOD_LIST=${GOOD_LIST%, }
write_config <<EOF
load_balancing = "in_order";
state_dir = "$T/state";
${HEDGE_CONFIG:-}
clusters = (
  { name = "healthy.cluster"; replicas = ( $GOOD_LIST ); },
  { name = "silent.cluster"; replicas = ( "$BAD_SILENT", $GOOD_LIST ); },
  { name = "slow.cluster"; replicas = ( "$BAD_SLOW", $GOOD_LIST ); }
);
EOF
if ! rlbctl check >"$T/check.out" 2>&1; then
	echo "the config is rejected (HEDGE_CONFIG='${HEDGE_CONFIG:-}'):"
	sed 's/^/    | /' "$T/check.out"
	exit 1
fi

# The clients, each given a cluster name; @C@ in a command is replaced
# by it.
cat >"$T/aio.py" <<EOF
import asyncio, sys
async def main():
    r, w = await asyncio.open_connection(sys.argv[1], $HP)
    w.write(b"GET / HTTP/1.0\r\n\r\n")
    line = (await r.readline()).decode().strip()
    if not line.endswith("200 OK"):
        sys.exit(line)
asyncio.run(main())
EOF
mkdir -p "$T/java"
cat >"$T/java/Get.java" <<'EOF'
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Get {
	public static void main(String[] args) throws Exception {
		HttpClient c = HttpClient.newHttpClient();
		HttpResponse<String> r = c.send(
			HttpRequest.newBuilder(URI.create(args[0])).build(),
			HttpResponse.BodyHandlers.ofString());
		if (r.statusCode() != 200)
			System.exit(1);
	}
}
EOF
JAVA=
command -v javac >/dev/null && javac -d "$T/java" "$T/java/Get.java" &&
	JAVA=yes

# bench_row NAME -- CMD... : the row of one client (see the top).
bench_row()
{
	local name=$1 i c t0 rc secs row a syns
	shift 2
	row=$(printf '%-28s' "$name")
	for i in 0 1 2; do
		c=$BAD_CLUSTER
		[ "$i" = 0 ] && c=healthy
		[ "$i" = 2 ] || rlbctl reset >/dev/null 2>&1
		lat_reset_counts $BAD_ADDR $GOOD
		t0=$(now_ms)
		timeout "$LIMIT" env LD_PRELOAD="$RLB_LIB" \
			"${@//@C@/$c.cluster}" >"$T/run.out" 2>&1
		rc=$?
		secs=$(awk -v ms=$(($(now_ms) - t0)) \
			'BEGIN { printf "%.2f", ms / 1000 }')
		if [ $rc -eq 124 ]; then
			secs=">$LIMIT"
		elif [ $rc -ne 0 ]; then
			secs="$secs!$rc"
			BENCH_NOTES="$BENCH_NOTES#   $name, $c run $i: exit $rc: $(
				grep -m1 -E 'Exception|[Ee]rror|timed out' "$T/run.out" ||
					tail -n 1 "$T/run.out")
"
		fi
		if [ "$i" = 0 ]; then
			row="$row $(printf '%8s' "$secs")"
			continue
		fi
		syns=
		for a in $BAD_ADDR $GOOD; do
			syns="$syns${syns:+/}$(lat_syns "$a")"
		done
		row="$row $(printf '%8s %8s %5s' "$secs" "$syns" \
			"$(replica_errors "$c.cluster" "$BAD_ADDR")/$(replica_stat \
				"$c.cluster" "$BAD_ADDR" slowdowns)")"
	done
	echo "$row"
}

bench_table()
{
	printf '%-28s %8s %8s %8s %5s %8s %8s %5s\n' client "healthy" \
		"run1 s" SYNs e/s "run2 s" SYNs e/s
	URL="http://@C@:$HP/"
	bench_row "curl" -- curl -sf -o /dev/null "$URL"
	bench_row "wget" -- wget -q -O /dev/null "$URL"
	bench_row "python3 urllib, no timeout" -- $PY -c \
		"import urllib.request; urllib.request.urlopen('$URL').read()"
	bench_row "python3 urllib, timeout=5" -- $PY -c \
		"import urllib.request; urllib.request.urlopen('$URL', timeout=5).read()"
	bench_row "python3 asyncio" -- $PY "$T/aio.py" @C@
	bench_row "perl IO::Socket::INET" -- perl -MIO::Socket::INET -e \
		'$s = IO::Socket::INET->new(PeerAddr => $ARGV[0]) or die "$@\n";
		print $s "GET / HTTP/1.0\r\n\r\n"; <$s> =~ / 200 / or die;' \
		"@C@:$HP"
	if command -v node >/dev/null; then
		bench_row "node $(node --version) http.get" -- node -e \
			'require("http").get(process.argv[1], (r) => {
				r.resume(); r.on("end", () => process.exit(0));
			}).on("error", (e) => { console.error(e); process.exit(1); });' \
			"$URL"
	else
		echo "node: not installed"
	fi
	if [ -n "$JAVA" ]; then
		bench_row "java 17 HttpClient" -- java -cp "$T/java" Get "$URL"
	else
		echo "java HttpClient: javac not installed"
	fi
	if [ -n "$PGDIR" ]; then
		bench_row "psql (libpq)" -- psql \
			"host=@C@ port=$PP user=postgres dbname=postgres sslmode=disable" \
			-Atc 'select 1'
	else
		echo "psql: PostgreSQL not installed"
	fi
	bench_row "redis-cli (hiredis)" -- redis-cli -h @C@ -p "$RP" ping
	printf '%s' "$BENCH_NOTES"
	BENCH_NOTES=
}
BENCH_NOTES=

echo "# hedge_clients.sh: policy in_order, HEDGE_CONFIG='${HEDGE_CONFIG:-}'"
echo "# LIMIT $LIMIT s; SYNs: sent to first/second/third replica in that run;"
echo "# e/s: errors/slowdowns of the first replica after that run"
echo
echo "## first replica silent ($BAD_SILENT: SYNs dropped)"
BAD_CLUSTER=silent BAD_ADDR=$BAD_SILENT bench_table
echo
echo "## first replica slow ($BAD_SLOW: SYNs answered after $SLOW_MS ms)"
BAD_CLUSTER=slow BAD_ADDR=$BAD_SLOW bench_table
