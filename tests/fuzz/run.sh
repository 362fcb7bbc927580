#!/usr/bin/env bash
# run.sh - build the libFuzzer targets with clang (ASan+UBSan, apart from the
# autotools build) and run them.
#
#   tests/fuzz/run.sh [build | run | replay | all] [TARGET...]
#
# TARGETs are config, resolve, state and dnsmsg (default: all four). `build`
# compiles them; `run` fuzzes each for FUZZ_SECONDS (default 30), one after
# another, from the seed corpus tests/fuzz/corpus/TARGET plus every past
# crash in tests/fuzz/crashes/TARGET; `replay` only runs those committed
# inputs once; `all` (the default) builds, then runs. New corpus entries
# and crash artifacts go to the build directory, never into the tree.
#
# Environment: FUZZ_SECONDS; FUZZ_BUILD_DIR (default build/fuzz);
# FUZZ_CONFIG_H_DIR, a configured build directory whose config.h to use
# (default: a minimal one is generated); CLANG (default clang); FUZZ_CFLAGS,
# added to every compile and link (e.g. -fno-sanitize=alignment, with its
# own FUZZ_BUILD_DIR, to look past a known finding).
# Exits non-zero when a build or any target fails.
#
# One input: build/fuzz/fuzz_TARGET FILE, with FUZZ_LOG=debug for the
# library's messages; the input formats are described atop each target.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
B=${FUZZ_BUILD_DIR:-$top/build/fuzz}
mkdir -p "$B" && B=$(cd "$B" && pwd) || exit 1
seconds=${FUZZ_SECONDS:-30}
clang=${CLANG:-clang}
all_targets="config resolve state dnsmsg"

mode=all
case ${1:-} in
build | run | replay | all) mode=$1; shift ;;
esac
targets=${*:-$all_targets}

# The library sources each target needs: the core, plus the preload layer
# for resolve (it also brings in track.c).
core="base/libc base/env base/util base/log model/policy model/config model/config_copy model/config_keys model/config_parse model/config_load model/dnsmsg model/resolv_conf state/health state/health_attach state/health_dir state/health_gc state/health_memfd state/health_saved state/health_segment state/health_table state/health_side state/health_traffic engine/policies engine/policy_hostname engine/policy_order engine/policy_random engine/policy_least_request engine/select engine/snapshot engine/answer engine/format engine/members engine/members_shared engine/dns_client"
preload="session/session preload/runtime preload/resolve preload/dnscache preload/track_addrs preload/track_pending preload/track_ledger preload/track_hedge preload/track_connect"

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="-std=gnu11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra \
-Wno-unused-parameter $san ${FUZZ_CFLAGS:-}"

die() { echo "fuzz: $*" >&2; exit 1; }

config_h_dir()
{
	if [ -n "${FUZZ_CONFIG_H_DIR:-}" ] && [ -f "$FUZZ_CONFIG_H_DIR/config.h" ]; then
		(cd "$FUZZ_CONFIG_H_DIR" && pwd)
		return
	fi
	# What configure's config.h gives the sources: the GNU extensions.
	mkdir -p "$B/include"
	printf '%s\n' '/* config.h - minimal, for the fuzz build (tests/fuzz/run.sh). */' \
		'#define _GNU_SOURCE 1' >"$B/include/config.h.tmp"
	cmp -s "$B/include/config.h.tmp" "$B/include/config.h" ||
		mv "$B/include/config.h.tmp" "$B/include/config.h"
	rm -f "$B/include/config.h.tmp"
	echo "$B/include"
}

# Compile src to obj when obj is older than it or than any header.
compile()
{
	local src=$1 obj=$2 h
	shift 2
	if [ -f "$obj" ] && [ "$obj" -nt "$src" ]; then
		for h in "$top"/src/*/*.h "$here"/*.h "$cfg_dir/config.h" "$0"; do
			[ "$h" -nt "$obj" ] && break
			h=
		done
		[ -z "$h" ] && return 0
	fi
	echo "  CC       ${src#"$top"/}"
	# shellcheck disable=SC2086 # $cflags: words on purpose
	"$clang" $cflags "$@" -c "$src" -o "$obj"
}

# Flag lists ($cflags, pkg-config's) are split into words on purpose.
# shellcheck disable=SC2086
build()
{
	local libconfig_cflags libconfig_libs f t objs
	command -v "$clang" >/dev/null || die "$clang not found (apt-get install clang)"
	libconfig_cflags=$(pkg-config --cflags libconfig) || die "libconfig not found"
	libconfig_libs=$(pkg-config --libs libconfig)
	for f in $core $preload; do mkdir -p "$B/obj/${f%/*}"; done
	cfg_dir=$(config_h_dir)
	# Library sources get coverage (fuzzer-no-link); targets get main().
	for f in $core $preload; do
		compile "$top/src/$f.c" "$B/obj/$f.o" -fsanitize=fuzzer-no-link \
			-I"$cfg_dir" -I"$top/src" -DSYSCONFDIR='"/nonexistent"' \
			-DPKGLIBDIR='"/nonexistent"' $libconfig_cflags || return 1
	done
	compile "$here/fuzz.c" "$B/obj/fuzz.o" -I"$cfg_dir" -I"$top/src" \
		-I"$here" || return 1
	for t in $targets; do
		[ -f "$here/fuzz_$t.c" ] || die "no target $t"
		compile "$here/fuzz_$t.c" "$B/obj/fuzz_$t.o" -fsanitize=fuzzer \
			-I"$cfg_dir" -I"$top/src" -I"$here" $libconfig_cflags ||
			return 1
		objs=
		for f in $core; do objs="$objs $B/obj/$f.o"; done
		if [ "$t" = resolve ]; then
			for f in $preload; do objs="$objs $B/obj/$f.o"; done
		fi
		echo "  CCLD     fuzz_$t"
		"$clang" $cflags -fsanitize=fuzzer -o "$B/fuzz_$t" \
			"$B/obj/fuzz_$t.o" "$B/obj/fuzz.o" $objs \
			$libconfig_libs -ldl -lpthread || return 1
	done
}

# Run one target; print "PASS/FAIL: fuzz_T ..." with its executions.
run_one()
{
	local t=$1 bin="$B/fuzz_$1" log="$B/fuzz_$1.log" runs dirs opts rc
	[ -x "$bin" ] || { echo "FAIL: fuzz_$t (not built)"; return 1; }
	mkdir -p "$B/corpus/$t" "$B/artifacts/$t"
	touch "$B/artifacts/$t/.start"
	dirs=("$here/corpus/$t")
	[ -d "$here/crashes/$t" ] && dirs+=("$here/crashes/$t")
	opts=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1
		-artifact_prefix="$B/artifacts/$t/")
	[ "$t" = config ] && opts+=(-dict="$here/config.dict")
	if [ "$mode" = replay ]; then
		opts+=(-runs=0)
	else
		# New units go to the first directory: the one in the build.
		opts+=(-max_total_time="$seconds")
		dirs=("$B/corpus/$t" "${dirs[@]}")
	fi
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
		UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
		LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/lsan.supp:print_suppressions=0} \
		"$bin" "${opts[@]}" "${dirs[@]}" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	if [ "$rc" -eq 0 ]; then
		echo "PASS: fuzz_$t (${runs:-?} runs in ${seconds}s)"
		return 0
	fi
	echo "FAIL: fuzz_$t (exit $rc after ${runs:-?} runs); log: $log"
	grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz:|    #[0-9]+ )|runtime error' "$log" | head -40
	find "$B/artifacts/$t" -type f -newer "$B/artifacts/$t/.start" \
		! -name .start | while read -r a; do
		known=
		for c in "$here/crashes/$t"/*; do
			[ -f "$c" ] && cmp -s "$a" "$c" && known=$c
		done
		if [ -n "$known" ]; then
			echo "  still failing: ${known#"$top"/} (committed)"
		else
			echo "  crashing input: $a"
			echo "  keep it: cp $a $here/crashes/$t/NAME and commit it"
		fi
	done
	return 1
}

if [ "$mode" = build ] || [ "$mode" = all ]; then
	build || die "build failed"
fi
[ "$mode" = build ] && exit 0
[ "$mode" = replay ] && seconds=0
failed=0
for t in $targets; do
	run_one "$t" || failed=$((failed + 1))
done
[ "$failed" -eq 0 ]
