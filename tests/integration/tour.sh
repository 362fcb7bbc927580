#!/bin/bash
# tour.sh - the first hour, as a new user lives it: the README's tour in the
# order written, then both top commands, in a copy of this checkout made
# the way a release tarball is (git archive: group-writable modes).
#
#  0. REPLICALB_TEST_QUICK=1 bash scripts/test, as a reader may run it
#     first (it leaves a build directory behind);
#  1. the README's build line, verbatim but for the prefix (a scratch one)
#     and sudo: in-tree autoreconf, ./configure, make, make install;
#  2. the installed sample is inert: check says "no clusters", probe has
#     nothing to probe, both exit 0; the man pages carry the configured
#     paths;
#  3. every "$ command" of the tour's steps 1-6, against three HTTP
#     replicas on 127.0.0.2-4 whose names (ch-N.dcN.example.net) a stacked
#     nss_wrapper resolves, on a free port in place of 8123: each must
#     succeed, and print what the README shows where it shows output;
#  4. bash scripts/demo, in full, and REPLICALB_TEST_QUICK=1 bash
#     scripts/test (the build and two quick tests, test_config among them,
#     which must pass from the group-writable tree), side by side, over
#     that in-tree build;
#  5. a broken build: scripts/test must fail it and report no test result
#     (the earlier run's .trs files are still there).
#
# Run by scripts/test as a step of its own (it builds three times; run
# beside the timing-sensitive tests it would slow them). By hand:
#   top_srcdir=$PWD top_builddir=build/check bash tests/integration/tour.sh
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup
need_nss_wrapper
[ -z "${REPLICALB_TOUR_INNER:-}" ] || skip "tour.sh inside tour.sh"
export REPLICALB_TOUR_INNER=1
# The inner builds are the user's, not a part of this make's.
unset MAKEFLAGS MFLAGS MAKELEVEL REPLICALB_CONFIG
readme=$top_srcdir/README.md
clone=$T/clone
prefix=$T/prefix
log=$top_builddir/tour.log	# every command's output, kept
: >"$log"

# step NAME CMD... : one result; on failure, the tail of the output.
step()
{
	local name=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	printf '%s\n' "$out" >>"$log"
	if [ "$rc" -eq 0 ]; then
		pass "$name"
	else
		fail "$name" "exit $rc: $*"
		printf '%s\n' "$out" | tail -n 30 | sed 's/^/    | /'
	fi
	return "$rc"
}

# check_glob NAME PATTERN ACTUAL : ACTUAL matches the shell pattern.
check_glob()
{
	# shellcheck disable=SC2053
	if [[ $3 == $2 ]]; then
		pass "$1"
	else
		fail "$1" "[$3] does not match [$2]"
	fi
}

# --- the copy -------------------------------------------------------------
# The files of the work tree (tracked and new, not ignored), with the modes
# git archive gives them.
if git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mkdir -p "$clone"
	(cd "$top_srcdir" && git ls-files -co --exclude-standard -z |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | (cd "$clone" && tar -xf -) ||
		{ echo "cannot copy the work tree"; exit 1; }
	chmod -R g+w "$clone"
else
	skip "$top_srcdir is not a git work tree: nothing to copy as a user would"
fi

# --- 0. the README's top command first, as a reader may run it -----------
# It leaves build/check configured from the clean tree; after the in-tree
# build below, scripts/test must start that directory over, not fail in it.
echo "tour: REPLICALB_TEST_QUICK=1 bash scripts/test, before the tour (at ${SECONDS}s)"
step "scripts/test (quick) before the tour" \
	env REPLICALB_TEST_QUICK=1 bash "$clone/scripts/test"

# --- 1. build and install, as the README says ----------------------------
build_line=$(awk '/^Build and install/ { f = 1 } f && /^autoreconf/ { print; exit }' "$readme")
check_glob "the README has the build line" "autoreconf -fi && ./configure --prefix=*" \
	"$build_line"
build_line=${build_line//\/usr\/local/$prefix}
build_line=${build_line//sudo /}
echo "tour: $build_line (at ${SECONDS}s)"
export MAKEFLAGS=-j2
step "README build line: $build_line" bash -c "cd '$clone' && $build_line" ||
	finish
unset MAKEFLAGS
export PATH="$prefix/bin:$PATH"

# The install layout the README lists.
for f in lib/replicalb/libreplicalb.so bin/replicalb bin/replicalbctl \
	etc/replicalb/replicalb.conf etc/replicalb/apps.d/curl.conf.example \
	etc/replicalb/apps.d/clickhouse-client.conf.example \
	share/replicalb/systemd/replicalb-probe.service.example \
	share/man/man1/replicalb.1 share/man/man1/replicalbctl.1 \
	share/man/man5/replicalb.conf.5; do
	[ -f "$prefix/$f" ] || fail "installed: $f" "missing"
done
pass "the README's install layout"

# --- 2. the installed sample is inert; man pages name the real paths -------
conf=$prefix/etc/replicalb/replicalb.conf
check_eq "fresh install: check says there are no clusters" \
	"no clusters: every name passes through unchanged
ok" "$(replicalbctl check 2>&1)"
out=$(replicalbctl probe 2>&1)
check_eq "fresh install: probe has nothing to probe, exit 0" \
	"0 no clusters: nothing to probe" "$? $out"
for m in man1/replicalb.1 man1/replicalbctl.1 man5/replicalb.conf.5; do
	# The pages' paths may break after each / (a \: break point).
	page=$T/page.${m##*/}
	sed 's/\\://g' "$prefix/share/man/$m" >"$page"
	check "$m names the configured $conf" grep -qF "$conf" "$page"
	check_not "$m: no placeholder left" grep -q '@[a-z]*@' "$page"
	check_not "$m: no other config path" \
		grep -E '(^|[^a-zA-Z0-9/_.-])/etc/replicalb' "$page"
done
check_glob "replicalb --help names the same default config" \
	"*Config: \$REPLICALB_CONFIG, else $conf.*" "$(replicalb --help)"
out=$(replicalb -p nearest true 2>&1)
check_glob "the installed wrapper: replicalbctl's did-you-mean for -p" \
	"2 *unknown policy \"nearest\"; did you mean \"nearest_hostname\"?*" \
	"$? $out"
check "man renders the installed replicalb(1)" \
	env MANWIDTH=80 man -l "$prefix/share/man/man1/replicalb.1"

# --- 3. the tour's commands -----------------------------------------------
# Step 1: the README's cluster in place of the sample's empty list.
awk '/^\*\*1\. Declare a cluster/ { f = 1 } f && /^```$/ { if (inb) exit; inb = 1; next } inb' \
	"$readme" >"$T/cluster.conf"
check_glob "the README declares analytics.cluster" "*analytics.cluster*" \
	"$(cat "$T/cluster.conf")"
awk -v block="$T/cluster.conf" '
	/^clusters = \(/ { skip = 1; while ((getline l < block) > 0) print l; next }
	skip && /^\);/ { skip = 0; next }
	!skip' "$conf" >"$T/new.conf" && cat "$T/new.conf" >"$conf"

port=$(free_port)
export NSS_WRAPPER_HOSTS=$T/hosts
cat >"$NSS_WRAPPER_HOSTS" <<EOF
127.0.0.2 ch-1.dc1.example.net
127.0.0.3 ch-2.dc2.example.net
127.0.0.4 ch-3.dc3.example.net
EOF
sed -i "s/8123/$port/" "$conf"
for n in 1 2 3; do
	start_replica "ch-$n" "127.0.0.$((n + 1))" "$port" http || finish
done
cat >"$T/my_etl.py" <<EOF
import urllib.request
print(urllib.request.urlopen("http://analytics.cluster:$port/").read().decode())
EOF
printf 'GET /ping HTTP/1.0\r\n\r\n' >"$T/request"

# Each "$ command" of the tour's steps 2-6, with the output lines the
# README shows after it (if any): "command<TAB>expected\nexpected...".
awk '
	/^## Five-minute tour/ { tour = 1 }
	/^## / && !/^## Five-minute tour/ { tour = 0 }
	tour && /^```/ { inb = !inb; next }
	tour && inb && /^\$ / { if (cmd != "") print_cmd(); cmd = substr($0, 3); want = ""; next }
	tour && inb && cmd != "" { want = want (want == "" ? "" : "\\n") $0 }
	tour && !inb && cmd != "" { print_cmd() }
	function print_cmd() { printf "%s\t%s\n", cmd, want; cmd = "" }
' "$readme" >"$T/commands"
check_ge "the tour has its commands" 12 "$(wc -l <"$T/commands")"
# The README shows no "$ " command outside the tour: each one is run here.
check_eq "every \$ line of the README is a tour command" \
	"$(awk '/^```/ { inb = !inb; next } inb && /^\$ /' "$readme" | wc -l)" \
	"$(wc -l <"$T/commands")"
cd "$T" || exit 1
# The library stacked over nss_wrapper, for the wrapper and replicalbctl.
export LD_PRELOAD=$NSS_WRAPPER_LIB
while IFS=$'\t' read -r cmd want; do
	# The README's comment after the command; its port.
	cmd=$(printf '%s' "$cmd" | sed -E 's/[[:space:]]{2,}#.*$//; s/ +$//')
	cmd=${cmd//8123/$port}
	in=/dev/null
	case $cmd in
	*socat*) in=$T/request ;;
	esac
	case $cmd in
	*--interval*)
		# Forever by design: its first pass, then stopped.
		out=$(timeout 3 bash -c "$cmd" <"$in" 2>&1)
		rc=$?
		[ "$rc" -ne 124 ] || rc=0
		;;
	*)
		out=$(timeout 60 bash -c "$cmd" <"$in" 2>&1)
		rc=$?
		;;
	esac
	printf '$ %s\n%s\n' "$cmd" "$out" >>"$log"
	if [ "$rc" -ne 0 ]; then
		fail "tour: $cmd" "exit $rc"
		printf '%s\n' "$out" | tail -n 10 | sed 's/^/    | /'
	elif [ -n "$want" ] && [ "$out" != "$(printf '%b' "$want")" ]; then
		fail "tour: $cmd" "printed something else than the README shows"
		printf '%s\n' "$out" | head -n 10 | sed 's/^/    | /'
	else
		pass "tour: $cmd"
	fi
done <"$T/commands"
unset LD_PRELOAD NSS_WRAPPER_HOSTS
for n in 1 2 3; do
	stop_replica "ch-$n"
done

# --- 4. both top commands, over the in-tree build -------------------------
# Side by side: each builds from a copy of its own (build/demo-src,
# build/src) into a directory of its own, and neither runs autoreconf
# again over the configured tree; each takes free ports.
echo "tour: bash scripts/demo and REPLICALB_TEST_QUICK=1 bash scripts/test, side by side (at ${SECONDS}s)"
t0=$SECONDS
bash "$clone/scripts/demo" >"$T/demo.out" 2>&1 &
demo_pid=$!
out=$(REPLICALB_TEST_QUICK=1 bash "$clone/scripts/test" 2>&1)
rc=$?
printf '%s
' "$out" >>"$log"
echo "tour: the quick scripts/test took $((SECONDS - t0))s"
wait "$demo_pid"
demo_rc=$?
cat "$T/demo.out" >>"$log"
echo "tour: the demo took $((SECONDS - t0))s (both ended)"
if [ "$demo_rc" -eq 0 ]; then
	pass "bash scripts/demo after the in-tree build"
else
	fail "bash scripts/demo after the in-tree build" "exit $demo_rc"
	tail -n 30 "$T/demo.out" | sed 's/^/    | /'
fi
grep -q "man -l .*/man/replicalb.1" "$T/demo.out" &&
	check "the demo's man hint works" \
		man -l "$clone/build/demo-build/man/replicalb.1"
check_eq "scripts/test (quick) after the in-tree build: exit 0" 0 "$rc"
# make -j2 check may finish the two in either order.
check_glob "scripts/test (quick): test_config passed, from this run" \
	"*PASS: tests/unit/test_config*summary: 2 passed, 0 failed*" "$out"
check_glob "scripts/test (quick): cli.sh passed, from this run" \
	"*PASS: tests/integration/cli.sh*summary: 2 passed, 0 failed*" "$out"
[ "$rc" -eq 0 ] || printf '%s\n' "$out" | tail -n 40 | sed 's/^/    | /'

# --- 5. a broken build reports no results ---------------------------------
echo '#error "broken on purpose by tour.sh"' >>"$clone/src/base/util.c"
out=$(REPLICALB_TEST_QUICK=1 bash "$clone/scripts/test" 2>&1)
rc=$?
printf '%s\n' "$out" >>"$log"
check_eq "a broken build: scripts/test fails" 1 "$rc"
check_glob "a broken build: reported as FAIL: build" "*FAIL: build*" "$out"
check_eq "a broken build: no test result reported" "" \
	"$(printf '%s\n' "$out" | grep -E '^ *(PASS|XPASS|XFAIL|SKIP): ')"
check_glob "a broken build: the summary counts no pass" \
	"*summary: 0 passed, 1 failed" "$out"
check_glob "a broken build: the earlier run's .trs files were there" \
	"*.trs*" "$(find "$clone/build/check" -name '*.trs')"

echo "tour: ${SECONDS}s in all; log: $log"
finish
