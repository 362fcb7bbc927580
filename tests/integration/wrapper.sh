#!/bin/bash
# wrapper.sh - the replicalb wrapper script: options, --env, LD_PRELOAD
# handling, warnings, and real programs balanced through it.
#
# Run by make check with top_srcdir, top_builddir and RLB_LIB set; also
# runnable by hand from a build directory:
#   top_builddir=$PWD RLB_LIB=$PWD/.libs/libreplicalb.so \
#     bash ../tests/integration/wrapper.sh

set -u

top_builddir=${top_builddir:-$PWD}
RLB_LIB=${RLB_LIB:-$top_builddir/.libs/libreplicalb.so}
RLB=$top_builddir/replicalb
PY=/usr/bin/python3
T=20	# seconds any one command may take

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok()
{
	failed=$((failed + 1))
	echo "FAIL - $1"
	shift
	local line
	for line in "$@"; do
		printf '    %s\n' "$line"
	done
}
# check NAME EXPECTED ACTUAL
check()
{
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1" "expected: $2" "actual:   $3"
	fi
}
# check_match NAME GLOB ACTUAL
check_match()
{
	# shellcheck disable=SC2053
	if [[ $3 == $2 ]]; then
		ok "$1"
	else
		not_ok "$1" "expected to match: $2" "actual: $3"
	fi
}

finish()
{
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ] || exit 1
	exit 0
}

# A clean environment: nothing of the caller's replicalb settings leaks in.
unset REPLICALB_CONFIG REPLICALB_LOAD_BALANCING REPLICALB_APP \
	REPLICALB_HOSTNAME REPLICALB_LOG_LEVEL REPLICALB_DISABLE \
	REPLICALB_LIBRARY LD_PRELOAD

if [ ! -x "$RLB" ] || [ ! -f "$RLB_LIB" ]; then
	not_ok "wrapper and library are built" "missing $RLB or $RLB_LIB"
	finish
fi
LIB=$(cd "${RLB_LIB%/*}" && pwd -P)/${RLB_LIB##*/}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlb-wrapper.XXXXXX") || exit 1
server_pid=
# shellcheck disable=SC2317
cleanup()
{
	local f
	[ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null
	# The SysV segments that state files name outlive the directory.
	for f in "$tmp"/state/*.state; do
		[ -f "$f" ] && ipcrm -m "$(awk '{print $4}' "$f")" 2>/dev/null
	done
	rm -rf "$tmp"
	# And those no state file named (design.md §12.11).
	"$top_builddir/replicalbctl" gc >/dev/null 2>&1
}
trap cleanup EXIT
export REPLICALB_STATE_DIR=$tmp/state

# ---- basics ---------------------------------------------------------------

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
	"$top_builddir/config.h" 2>/dev/null)
out=$("$RLB" --version 2>&1)
check "--version" "replicalb ${version:-?}" "$out"

out=$("$RLB" -h 2>&1)
rc=$?
check_match "-h prints usage, exit 0" "0 Usage: replicalb *--env*" \
	"$rc $out"

out=$("$RLB" 2>&1)
rc=$?
check_match "no command: usage error, exit 2" "2 *no command*" "$rc $out"

out=$("$RLB" -x true 2>&1)
rc=$?
check_match "unknown option: exit 2" "2 *unknown option -x*" "$rc $out"

out=$("$RLB" -p nearest true 2>&1)
rc=$?
check_match "unknown policy: exit 2 and replicalbctl's did-you-mean" \
	"2 *unknown policy \"nearest\"; did you mean \"nearest_hostname\"?*" \
	"$rc $out"
out=$("$RLB" -p in-order true 2>&1)
check_match "a misspelt policy: its spelling suggested" \
	"*did you mean \"in_order\"?*" "$out"
out=$("$RLB" -p xyzzy true 2>&1)
rc=$?
check_match "a policy close to none: exit 2 naming the valid ones" \
	"2 *\"xyzzy\"; one of: random,*round_robin*" "$rc $out"

out=$("$RLB" -c "$tmp/nonexistent.conf" true 2>&1)
rc=$?
check_match "missing -c file: exit 2" "2 *nonexistent.conf*" "$rc $out"

out=$("$RLB" rlb-no-such-command-x 2>&1)
rc=$?
check_match "command not found: exit 127" "127 *not found*" "$rc $out"

"$RLB" sh -c 'exit 7'
check "exit status is the command's" 7 "$?"

out=$("$RLB" -- printf '<%s>' "a b" "" "-c" 2>&1)
check "arguments kept as given, after --" "<a b><><-c>" "$out"

out=$(REPLICALB_LIBRARY=$tmp/none.so "$RLB" true 2>&1)
rc=$?
check_match "REPLICALB_LIBRARY missing: exit 2" "2 *none.so*" "$rc $out"

# ---- --env ----------------------------------------------------------------

echo 'clusters = ();' > "$tmp/empty.conf"
awkward="it's \"x\" \$HOME \\ \`y\` ;"
out=$(cd "$tmp" && "$RLB" -c empty.conf -p round_robin -a "$awkward" \
	-H host.example -d --failover --env)
rc=$?
check "--env exits 0" 0 "$rc"
check_match "--env prints only export lines" "export LD_PRELOAD=*" "$out"
got=$(
	LD_PRELOAD=stale.so
	eval "$out" || echo "eval failed"
	printf '%s|' "$LD_PRELOAD" "$REPLICALB_CONFIG" \
		"$REPLICALB_LOAD_BALANCING" "$REPLICALB_APP" \
		"$REPLICALB_HOSTNAME" "$REPLICALB_LOG_LEVEL" \
		"$REPLICALB_CONNECT_FAILOVER"
)
check "--env output evaluates to every variable" \
	"$LIB|$(cd "$tmp" && pwd -P)/empty.conf|round_robin|$awkward|host.example|debug|1|" \
	"$got"

out=$(LD_PRELOAD="libm.so.6 $LIB" "$RLB" -q --env)
got=$(eval "$out"; printf '%s|%s' "$LD_PRELOAD" "$REPLICALB_LOG_LEVEL")
check "--env keeps other LD_PRELOAD entries, -q" "$LIB libm.so.6|none" "$got"

# A sanitizer runtime must stay first or it aborts. Paths that do not
# exist: the loader only warns (on stderr) while running the wrapper.
san=$tmp/san
out=$(LD_PRELOAD="libm.so.6 $san/libasan.so.8" "$RLB" --env 2>/dev/null)
got=$(eval "$out"; printf '%s' "$LD_PRELOAD")
check "--env: an ASan runtime stays first" "$san/libasan.so.8 $LIB libm.so.6" \
	"$got"
out=$(LD_PRELOAD="libm.so.6:$san/libtsan.so.2 $LIB $san/libubsan.so.1:$san/libclang_rt.asan-x86_64.so" \
	"$RLB" --env 2>/dev/null)
got=$(eval "$out"; printf '%s' "$LD_PRELOAD")
check "--env: TSan, UBSan, clang runtimes first, in order" \
	"$san/libtsan.so.2 $san/libubsan.so.1 $san/libclang_rt.asan-x86_64.so $LIB libm.so.6" \
	"$got"
# The real runtime, when gcc has one: a program runs instead of aborting
# with "ASan runtime does not come first".
asan=$(gcc -print-file-name=libasan.so 2>/dev/null)
asan=$(readlink -f "$asan" 2>/dev/null)
if [ -f "$asan" ]; then
	out=$(LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0 \
		"$RLB" /bin/echo ran 2>&1)
	check "a program runs with the ASan runtime preloaded" "ran" "$out"
else
	echo "skip - ASan runtime: gcc has no libasan.so here"
fi

"$RLB" --env true >/dev/null 2>&1
check "--env with a command: exit 2" 2 "$?"

# ---- LD_PRELOAD -----------------------------------------------------------

show='printf "%s" "$LD_PRELOAD"'
out=$("$RLB" sh -c "$show")
check "LD_PRELOAD set to the library" "$LIB" "$out"

out=$(LD_PRELOAD="$LIB:libm.so.6 $LIB  libdl.so.2" "$RLB" sh -c "$show")
check "LD_PRELOAD: library first and once, others kept" \
	"$LIB libm.so.6 libdl.so.2" "$out"

out=$(LD_PRELOAD="/elsewhere/libreplicalb.so libm.so.6" \
	"$RLB" sh -c "$show" 2>/dev/null)
check "LD_PRELOAD: another copy of the library dropped" \
	"$LIB libm.so.6" "$out"

out=$("$RLB" "$RLB" sh -c "$show")
check "nested wrapper keeps one copy" "$LIB" "$out"

ln -s "$RLB" "$tmp/replicalb-link"
out=$("$tmp/replicalb-link" sh -c "$show")
check "through a symlink: the build tree's library" "$LIB" "$out"

cp "$RLB_LIB" "$tmp/libcopy.so"
out=$(REPLICALB_LIBRARY=$tmp/libcopy.so "$RLB" sh -c "$show")
check "REPLICALB_LIBRARY chooses the library" \
	"$(cd "$tmp" && pwd -P)/libcopy.so" "$out"

# ---- options become environment variables ---------------------------------

vars='printf "%s|" "${REPLICALB_CONFIG-unset}" "${REPLICALB_LOAD_BALANCING-unset}" "${REPLICALB_APP-unset}" "${REPLICALB_HOSTNAME-unset}" "${REPLICALB_LOG_LEVEL-unset}"'
out=$("$RLB" sh -c "$vars")
check "no options: no REPLICALB_ variables" \
	"unset|unset|unset|unset|unset|" "$out"
out=$(cd "$tmp" && "$RLB" -c ./empty.conf sh -c "$vars")
check "-c exports an absolute REPLICALB_CONFIG" \
	"$(cd "$tmp" && pwd -P)/empty.conf|unset|unset|unset|unset|" "$out"
out=$("$RLB" -p in_order sh -c "$vars")
check "-p exports REPLICALB_LOAD_BALANCING" \
	"unset|in_order|unset|unset|unset|" "$out"
out=$("$RLB" --policy=first_or_random sh -c "$vars")
check "--policy=X form" "unset|first_or_random|unset|unset|unset|" "$out"
out=$("$RLB" -a myapp sh -c "$vars")
check "-a exports REPLICALB_APP" "unset|unset|myapp|unset|unset|" "$out"
out=$("$RLB" -Hdb-1.example sh -c "$vars")
check "-H exports REPLICALB_HOSTNAME (attached value)" \
	"unset|unset|unset|db-1.example|unset|" "$out"
out=$("$RLB" -q sh -c "$vars")
check "-q exports REPLICALB_LOG_LEVEL=none" \
	"unset|unset|unset|unset|none|" "$out"
out=$("$RLB" -d sh -c "$vars" 2>/dev/null)
check "-d exports REPLICALB_LOG_LEVEL=debug" \
	"unset|unset|unset|unset|debug|" "$out"

# ---- setuid and static warnings -------------------------------------------

cp /bin/true "$tmp/suid-true"
chmod u+s "$tmp/suid-true"
out=$("$RLB" "$tmp/suid-true" 2>&1)
rc=$?
check_match "setuid command: warning, still run" \
	"0 replicalb\[[0-9]*\]: warning: */suid-true is setuid/setgid; the loader ignores LD_PRELOAD" \
	"$rc $out"
out=$("$RLB" -q "$tmp/suid-true" 2>&1)
check "setuid warning silenced by -q" "0 " "$? $out"

cp /bin/true "$tmp/sgid-true"
chmod g+s "$tmp/sgid-true"
out=$("$RLB" "$tmp/sgid-true" 2>&1)
check_match "setgid command: warning" "*is setuid/setgid*" "$out"

out=$("$RLB" /bin/true 2>&1)
check "ordinary dynamic command: no warning" "" "$out"

# A PATH with od and awk but no file(1): the wrapper reads the ELF itself.
mkdir "$tmp/bin"
for tool in od awk; do
	ln -s "$(command -v "$tool")" "$tmp/bin/$tool"
done

printf 'int main(void) { return 3; }\n' > "$tmp/static.c"
if gcc -static -o "$tmp/static" "$tmp/static.c" 2>/dev/null; then
	out=$("$RLB" "$tmp/static" 2>&1)
	rc=$?
	check_match "static command: warning, still run" \
		"3 replicalb\[[0-9]*\]: warning: */static is statically linked; LD_PRELOAD has no effect" \
		"$rc $out"
	out=$(PATH=$tmp/bin "$RLB" "$tmp/static" 2>&1)
	check_match "static detected without file(1)" \
		"*is statically linked*" "$out"
else
	echo "skip - static warning: gcc -static cannot link here"
fi
if gcc -static-pie -o "$tmp/static-pie" "$tmp/static.c" 2>/dev/null; then
	out=$(PATH=$tmp/bin "$RLB" "$tmp/static-pie" 2>&1)
	check_match "static-pie detected without file(1)" \
		"*is statically linked*" "$out"
fi
out=$(PATH=$tmp/bin "$RLB" /bin/true 2>&1)
check "dynamic command without file(1): no warning" "" "$out"
printf '#!/bin/sh\nexit 0\n' > "$tmp/script"
chmod +x "$tmp/script"
out=$("$RLB" "$tmp/script" 2>&1)
check "script command: no warning" "" "$out"

# ---- real programs through the wrapper ------------------------------------

# One replica's HTTP server on 127.0.0.2, port chosen by the kernel.
mkdir "$tmp/www"
echo "hello from 127.0.0.2" > "$tmp/www/file"
(cd "$tmp/www" && exec "$PY" -u -m http.server 0 --bind 127.0.0.2) \
	> "$tmp/http.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' \
		"$tmp/http.log")
	[ -n "$port" ] && break
	sleep 0.1
done
if [ -z "$port" ]; then
	not_ok "HTTP server on 127.0.0.2 started" "$(cat "$tmp/http.log")"
	finish
fi

cat > "$tmp/demo.conf" <<EOF
clusters = (
  { name = "demo.cluster";
    replicas = ( "127.0.0.2" ); }
);
EOF
out=$(timeout $T "$RLB" -c "$tmp/demo.conf" \
	curl -s --max-time 10 "http://demo.cluster:$port/file" 2>&1)
check "curl http://demo.cluster/ through the wrapper" \
	"hello from 127.0.0.2" "$out"

# Same request, first replica dead: in_order fails over to the live one.
cat > "$tmp/failover.conf" <<EOF
clusters = (
  { name = "demo.cluster";
    load_balancing = "random";
    replicas = ( "127.0.0.3", "127.0.0.2" ); }
);
EOF
out=$(timeout $T "$RLB" -q -p in_order -c "$tmp/failover.conf" \
	curl -s --max-time 10 "http://demo.cluster:$port/file" 2>&1)
check "curl fails over from a dead replica" "hello from 127.0.0.2" "$out"

# The order a program sees, printed by python: proves each option reaches
# the library.
cat > "$tmp/order.py" <<'EOF'
import socket, sys
infos = socket.getaddrinfo(sys.argv[1], 9000, type=socket.SOCK_STREAM)
print(" ".join(i[4][0] for i in infos))
EOF
cat > "$tmp/order.conf" <<'EOF'
load_balancing = "random";
clusters = (
  { name = "order.cluster";
    replicas = (
      { host = "db-a.example"; address = [ "127.0.0.2" ]; },
      { host = "db-b.example"; address = [ "127.0.0.3" ]; },
      { host = "db-c.example"; address = [ "127.0.0.4" ]; }
    ); }
);
EOF
mkdir "$tmp/apps.d"
cat > "$tmp/apps.d/myapp.conf" <<'EOF'
clusters = (
  { name = "order.cluster";
    load_balancing = "in_order";
    replicas = (
      { host = "db-c.example"; address = [ "127.0.0.4" ]; },
      { host = "db-a.example"; address = [ "127.0.0.2" ]; }
    ); }
);
EOF
order()
{
	timeout $T "$RLB" -c "$tmp/order.conf" "$@" \
		"$PY" "$tmp/order.py" order.cluster
}

all=
for _ in 1 2 3 4 5; do
	all="${all}[$(order -p in_order)]"
done
check "-p in_order: config order every time" \
	"$(printf '[127.0.0.2 127.0.0.3 127.0.0.4]%.0s' 1 2 3 4 5)" "$all"

out=$(order -p nearest_hostname -H db-c.example)
check_match "-H: nearest_hostname prefers the named host" \
	"127.0.0.4 *" "$out"
out=$(order -p nearest_hostname -H db-b.example)
check_match "-H: another name, another first replica" "127.0.0.3 *" "$out"

out=$(order -a myapp)
check "-a: apps.d/APP.conf replaces the cluster" "127.0.0.4 127.0.0.2" "$out"

out=$(order -d -p in_order 2>&1 >/dev/null)
check_match "-d: the library logs the selection" \
	"*replicalb\[*order.cluster*" "$out"

# A name one typo away from a virtual one passes through; -d says so.
# ("localhost" is answered by /etc/hosts: no DNS is asked.)
echo 'clusters = ( { name = "localhst"; replicas = ( "127.0.0.2" ); } );' \
	>"$tmp/near.conf"
out=$(timeout $T "$RLB" -d -c "$tmp/near.conf" \
	"$PY" "$tmp/order.py" localhost 2>&1 >/dev/null)
check_match "-d: a near miss of a virtual name is named" \
	"*localhost: not a virtual name, passed through; did you mean localhst?*" "$out"
out=$(timeout $T "$RLB" -c "$tmp/near.conf" \
	"$PY" "$tmp/order.py" localhost 2>&1 >/dev/null)
check "without -d: nothing" "" "$out"

echo 'clusters = ( { name = "broken" ' > "$tmp/broken.conf"
out=$(timeout $T "$RLB" -c "$tmp/broken.conf" \
	"$PY" "$tmp/order.py" localhost 2>&1 >/dev/null)
check_match "broken config: the library reports it" "*replicalb\[*" "$out"
out=$(timeout $T "$RLB" -q -c "$tmp/broken.conf" \
	"$PY" "$tmp/order.py" localhost 2>&1 >/dev/null)
check "-q: the library says nothing" "" "$out"

# --check: whether and how a command was balanced, or why not.
out=$(timeout $T "$RLB" -c "$tmp/order.conf" -p in_order --check -- \
	"$PY" "$tmp/order.py" order.cluster 2>&1 >/dev/null)
rc=$?
check "--check: the command's status is its own" 0 "$rc"
check_match "--check: names the virtual name, its policy, its first replica" \
	"*balanced:*order.cluster (in_order): resolved 1 time, first replica db-a.example*errors counted: 0*" \
	"$out"
out=$(timeout $T "$RLB" -c "$tmp/order.conf" --check -- \
	"$PY" -c 'import sys; sys.stderr.write("own message\n"); sys.exit(3)' 2>&1)
rc=$?
check "--check: a failing command's status" 3 "$rc"
check_match "--check: its own messages pass through, and nothing was balanced" \
	"own message*not balanced: no virtual name was resolved*NSS module*" "$out"
static=$(command -v ldconfig || echo /sbin/ldconfig)
out=$(timeout $T "$RLB" -c "$tmp/order.conf" --check -- "$static" -p 2>&1 >/dev/null)
check_match "--check: a static binary is out of reach, and it says so" \
	"*not balanced*statically linked: neither LD_PRELOAD nor an NSS module*" "$out"

finish
