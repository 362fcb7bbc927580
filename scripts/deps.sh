# deps.sh - sourced by scripts/test and scripts/demo: make sure the Debian
# packages the build and the tests need are installed.
# shellcheck shell=bash

RLB_DEPS="autoconf automake libtool pkg-config make gcc libc6-dev binutils \
libconfig-dev libcmocka-dev libnss-wrapper curl socat netcat-openbsd \
python3 valgrind file procps clang-format redis-server redis-tools strace \
iproute2 nftables clang libclang-rt-14-dev openjdk-17-jdk-headless"

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
