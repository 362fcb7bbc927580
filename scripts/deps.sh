# deps.sh - sourced by scripts/test and scripts/demo: make sure the Debian
# packages the build and the tests need are installed. bind9 and
# bind9-dnsutils are for the DNS membership tests, which run their own
# named in a private namespace (tests/integration/lib_dns.sh); they never
# use the named.service that installing bind9 may enable on the host.
# wget, postgresql-client and nodejs are clients of bench/hedge_clients.sh
# (which runs psql only where a PostgreSQL server is installed too).
# golang-go builds the cgo Go program that nss.sh resolves through the
# NSS module. prometheus brings promtool, which checks metrics.sh's
# `status --prometheus` (its service is never started by the tests).
# bash-completion gives completion.sh the functions the wrapper's
# completion calls (_command_offset).
# shellcheck shell=bash

RLB_DEPS="autoconf automake libtool pkg-config make gcc libc6-dev binutils \
libconfig-dev libcmocka-dev libnss-wrapper curl socat netcat-openbsd \
python3 valgrind file procps clang-format redis-server redis-tools strace \
iproute2 nftables clang libclang-rt-14-dev openjdk-17-jdk-headless \
haproxy python3-matplotlib bind9 bind9-dnsutils wget postgresql-client \
nodejs golang-go prometheus bash-completion"

rlb_ensure_deps()
{
	local missing=() p
	for p in $RLB_DEPS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "replicalb: missing packages: ${missing[*]}" >&2
		echo "run: sudo apt-get install -y ${missing[*]}" >&2
		return 1
	fi
	echo "==> installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || return 1
	apt-get install -y -qq "${missing[@]}" >/dev/null || return 1
}

# Generate ./configure when it is missing or older than its inputs.
rlb_bootstrap()
{
	local top=$1
	if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ] ||
		[ "$top/Makefile.am" -nt "$top/Makefile.in" ]; then
		echo "==> autoreconf"
		(cd "$top" && autoreconf -fi >/dev/null 2>&1) || (cd "$top" && autoreconf -fi)
	fi
}

# The source tree to configure out-of-tree builds of $1 from, printed on
# stdout: $1 itself, or, when $1 is configured in place (the README's
# in-tree `./configure && make`), a copy of it in $2 cleaned with
# `make distclean`: configure refuses an out-of-tree build of a configured
# tree, and make would take the in-tree objects for the build's own.
rlb_build_source()
{
	local top=$1 copy=$2
	if [ ! -f "$top/config.status" ]; then
		printf '%s\n' "$top"
		return 0
	fi
	echo "==> $top is configured in place; building from a clean copy, $copy" >&2
	rm -rf "$copy" && mkdir -p "$copy" || return 1
	(cd "$top" && tar --exclude=./build --exclude=./.git -cf - .) |
		(cd "$copy" && tar -xf -) || return 1
	if ! (cd "$copy" && make distclean) >"$copy.distclean.log" 2>&1; then
		# A broken in-tree build: remove what configure and make leave.
		find "$copy" \( -name '*.o' -o -name '*.lo' -o -name '*.la' -o \
			-name .libs -o -name .deps -o -name '*.trs' \) -prune \
			-exec rm -rf {} + || return 1
		rm -f "$copy/config.status" "$copy/config.h" "$copy/libtool" \
			"$copy/Makefile" "$copy/stamp-h1"
	fi
	printf '%s\n' "$copy"
}

# Start build directory $2 over when it was configured from a source tree
# other than $1 (make there would re-run that tree's configure).
rlb_claim_build_dir()
{
	local src=$1 dir=$2 was
	[ -f "$dir/Makefile" ] || return 0
	was=$(sed -n 's/^abs_top_srcdir = //p' "$dir/Makefile")
	[ "$was" = "$src" ] && return 0
	echo "==> $dir was configured from ${was:-another tree}; starting it over" >&2
	rm -rf "$dir"
}
