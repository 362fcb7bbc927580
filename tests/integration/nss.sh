#!/bin/bash
# nss.sh - the NSS module, libnss_replicalb.so.2 (design.md §16, issue
# 23): with `hosts: files replicalb dns` in nsswitch.conf (bind-mounted
# in a private mount namespace, with its own hosts file and a resolv.conf
# whose server is closed), programs that are not preloaded resolve
# virtual names to replicas in policy order: getent (gethostbyname2_r and
# getaddrinfo), python3 and curl, which reaches a real server. A replica
# named in /etc/hosts is read there, never through NSS; round_robin turns
# for every program; nothing is charged, an unresolvable replica
# included; a hostent larger than glibc's first buffer is answered (the
# caller grows the buffer on ERANGE); a name that is not virtual goes on
# to the next source. Every entry point is also called directly; errors
# recorded by others reorder the answer; an env -i program and a setuid
# copy of curl run as nobody are answered from the system config.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

[ "$(id -u)" = 0 ] || fail "needs root (a private mount namespace)"
NSSDIR=$top_builddir/.libs
[ -e "$NSSDIR/libnss_replicalb.so.2" ] || fail "no $NSSDIR/libnss_replicalb.so.2"

PORT=$(free_port)
many=$(for i in $(seq 1 200); do printf '"127.0.%d.%d", ' $((i / 250 + 1)) $((i % 250 + 1)); done)
write_config <<EOF
clusters = (
  { name = "nss.cluster"; port = $PORT; load_balancing = "in_order";
    replicas = ( "127.0.0.21", "named-replica", "127.0.0.23" ); },
  { name = "rr.cluster"; port = $PORT; load_balancing = "round_robin";
    replicas = ( "127.0.0.31", "127.0.0.32", "127.0.0.33" ); },
  { name = "gone.cluster"; port = $PORT; load_balancing = "in_order";
    replicas = ( "no-such-replica.invalid", "127.0.0.41" ); },
  { name = "many.cluster"; port = $PORT; load_balancing = "in_order";
    replicas = ( ${many%, } ); }
);
EOF
printf 'passwd: files\ngroup: files\nhosts: files replicalb dns\n' >"$T/nsswitch.conf"
{ cat /etc/hosts; echo "127.0.0.22 named-replica"; } >"$T/hosts"
# No DNS here: the server is a closed port, refused at once.
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$T/resolv.conf"
start_replica web 127.0.0.21 "$PORT" http || fail "start replica"

# in_nss CMD... : CMD in a mount namespace whose /etc says to ask the
# module, found on the library path as glibc dlopen()s it.
in_nss()
{
	unshare -m sh -c 'mount --bind "$1/nsswitch.conf" /etc/nsswitch.conf &&
		mount --bind "$1/hosts" /etc/hosts &&
		mount --bind "$1/resolv.conf" /etc/resolv.conf &&
		shift && exec "$@"' sh "$T" env LD_LIBRARY_PATH="$NSSDIR" "$@"
}

check_eq "gethostbyname2 (getent hosts): the replicas in policy order" \
	"127.0.0.21 127.0.0.22 127.0.0.23" \
	"$(in_nss getent hosts nss.cluster | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "h_name is the first replica's, the alias the virtual name" \
	"127.0.0.21 nss.cluster" \
	"$(in_nss getent hosts nss.cluster | head -1 | awk '{print $2, $3}')"
check_eq "getaddrinfo (getent ahostsv4): the same order" \
	"127.0.0.21 127.0.0.22 127.0.0.23" \
	"$(in_nss getent ahostsv4 nss.cluster | awk '$2 == "STREAM" {print $1}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "python3, not preloaded: the same" \
	"['127.0.0.21', '127.0.0.22', '127.0.0.23']" \
	"$(in_nss $PY -c "$PY_ADDRS" nss.cluster)"
check_match "curl, not preloaded, reaches the first replica" "web" \
	"$(in_nss curl -s --max-time 5 "http://nss.cluster:$PORT/")"

# round_robin turns through NSS, for every program (the shared counter).
firsts=
for _ in 1 2 3; do
	firsts="$firsts $(in_nss getent hosts rr.cluster | head -1 | awk '{print $1}')"
done
check_eq "three programs start at three replicas" 3 \
	"$(echo $firsts | tr ' ' '\n' | sort -u | wc -l)"
before=$(peek rr.cluster)
in_nss getent hosts rr.cluster >/dev/null
check_eq "the turn is in the shared state: replicalbctl's next order moved" \
	moved "$([ "$(peek rr.cluster)" != "$before" ] && echo moved)"

# An unresolvable replica: the others answer, and nothing is charged.
check_eq "a replica that does not resolve is passed over" "127.0.0.41" \
	"$(in_nss getent hosts gone.cluster | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "nothing charged: the module counts no error" 0 \
	"$(replica_errors gone.cluster no-such-replica.invalid)"

# Errors other programs record reorder what every program sees.
rlbctl record-error nss.cluster 127.0.0.21 5 >/dev/null || fail "record-error"
check_eq "after record-error: the demoted replica goes last" \
	"127.0.0.22 127.0.0.23 127.0.0.21" \
	"$(in_nss getent hosts nss.cluster | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')"
rlbctl reset nss.cluster >/dev/null || fail "reset"

# Every entry point called directly (dlopen, as systemd's test-nss-hosts).
CALL="$top_builddir/tests/helpers/nss_call $NSSDIR/libnss_replicalb.so.2"
check_eq "4_r: every address, ttl 0" \
	"SUCCESS errno=0 h_errno=0
ttl=0
127.0.0.21
127.0.0.22
127.0.0.23" "$(in_nss $CALL 4 nss.cluster unspec 4096)"
check_eq "4_r with a tuple of the caller's: the list starts there" \
	"ttl=0 first=caller" "$(in_nss $CALL 4 nss.cluster unspec 4096 prealloc | sed -n 2p)"
check_eq "4_r, a short buffer: TRYAGAIN, ERANGE, NETDB_INTERNAL" \
	"TRYAGAIN errno=34 h_errno=-1" "$(in_nss $CALL 4 nss.cluster unspec 8)"
check_eq "3_r, a short buffer: the same" \
	"TRYAGAIN errno=34 h_errno=-1" "$(in_nss $CALL 3 nss.cluster inet 16)"
check_eq "3_r: h_name the first replica's, canonp it, ttl 0" \
	"SUCCESS errno=0 h_errno=0
name=127.0.0.21 alias=nss.cluster ttl=0 canon=h_name
127.0.0.21
127.0.0.22
127.0.0.23" "$(in_nss $CALL 3 nss.cluster inet 4096)"
check_eq "2_r AF_INET6 of an IPv4 cluster: not found" \
	"NOTFOUND errno=2 h_errno=1" "$(in_nss $CALL 2 nss.cluster inet6 4096)"
check_eq "_r of a name that is not virtual: not found, errno and mask kept" \
	"NOTFOUND errno=2 h_errno=1" "$(in_nss $CALL 1 localhost inet 4096)"
# Signals are blocked where a call takes a lock or waits (the session's
# start, a replica's name resolved, the state's once-a-second look at its
# name file), and only there: the common call of literal replicas makes
# no system call.
blocks() { in_nss $CALL 4 "$1" unspec 4096 blocks "${@:2}" | grep '^blocks=' | tr '\n' ' ' | sed 's/ $//'; }
check_eq "literal replicas: signals blocked at the start only" \
	"blocks=1 blocks=0" "$(blocks rr.cluster)"
check_eq "... and a second later (the reload check and the state's follow due)" \
	"blocks=1 blocks=1" "$(blocks rr.cluster pause)"
check_eq "a replica's name to resolve: signals blocked in every call" \
	"blocks=1 blocks=1" "$(blocks nss.cluster)"
check_eq "a name that is not virtual: blocked at the start only" \
	"blocks=1 blocks=0" "$(blocks localhost)"

# env -i: no REPLICALB_* at all, so the system config (SYSCONFDIR, here a
# tmpfs over it in the namespace); only the library path is given, to
# find the module.
sysconf=$(rlbctl --help 2>&1 | grep -o '/[^ ]*/replicalb/replicalb.conf' | head -1)
sysdir=${sysconf%/replicalb/replicalb.conf}
if [ -n "$sysdir" ] && [ -d "$sysdir" ]; then
	# Its state in $T, so that the cleanup finds its segment.
	printf 'state_dir = "%s/sysstate-env";\nclusters = ( { name = "sys.cluster"; load_balancing = "in_order";\n  replicas = ( "127.0.0.52", "127.0.0.51" ); } );\n' "$T" >"$T/sys.conf"
	check_eq "an env -i program: the system config's cluster, in order" \
		"127.0.0.52 127.0.0.51" \
		"$(unshare -m sh -c 'mount --bind "$1/nsswitch.conf" /etc/nsswitch.conf &&
			mount -t tmpfs tmpfs "$2" && mkdir "$2/replicalb" &&
			cp "$1/sys.conf" "$2/replicalb/replicalb.conf" &&
			exec env -i LD_LIBRARY_PATH="$3" getent hosts sys.cluster' \
			sh "$T" "$sysdir" "$NSSDIR" | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')"
else
	fail "the system config directory $sysdir does not exist"
fi

# A setuid copy of curl run as nobody: secure-execution mode, so glibc
# ignores LD_LIBRARY_PATH (the module is found through an ld.so.cache made
# for the namespace, with a copy of it in a directory of its own) and the
# library reads only the system config and no REPLICALB_* variable (the
# REPLICALB_DISABLE=1 given would switch it off); it uses root's state.
if [ -n "$sysdir" ] && [ -d "$sysdir" ]; then
	chmod 0711 "$T"
	mkdir -m 0755 "$T/suid" "$T/nsslib"
	cp "$NSSDIR/libnss_replicalb.so.2" "$T/nsslib/"
	cp "$(command -v curl)" "$T/suid/curl"
	chmod 4755 "$T/suid/curl"
	printf 'include /etc/ld.so.conf\n%s\n' "$T/nsslib" >"$T/ld.so.conf"
	ldconfig -f "$T/ld.so.conf" -C "$T/ld.so.cache" 2>/dev/null
	printf 'state_dir = "%s/sysstate";\nclusters = ( { name = "nss.cluster"; port = %d; load_balancing = "in_order";\n  replicas = ( "127.0.0.29", "127.0.0.21" ); } );\n' \
		"$T" "$PORT" >"$T/suid.conf"
	out=$(unshare -m sh -c 'mount --bind "$1/nsswitch.conf" /etc/nsswitch.conf &&
		mount --bind "$1/ld.so.cache" /etc/ld.so.cache &&
		mount --bind "$1/resolv.conf" /etc/resolv.conf &&
		mount -t tmpfs tmpfs "$2" && mkdir "$2/replicalb" &&
		cp "$1/suid.conf" "$2/replicalb/replicalb.conf" &&
		exec setpriv --reuid=65534 --regid=65534 --clear-groups \
			env LD_LIBRARY_PATH=/nonexistent REPLICALB_DISABLE=1 \
			"$1/suid/curl" -s --max-time 5 "http://nss.cluster:$3/"' \
		sh "$T" "$sysdir" "$PORT" 2>&1)
	check_match "setuid curl run as nobody reaches the replica (the second: the first is down)" \
		"web" "$out"
	check_eq "root's state has its first replica, uncounted (the module counts nothing)" \
		0 "$(REPLICALB_CONFIG=$T/suid.conf REPLICALB_STATE_DIR=$T/sysstate \
			replica_errors nss.cluster 127.0.0.29)"
fi

# Go with cgo: its default resolver hands the lookup to the C library
# when nsswitch.conf names a source it does not know (replicalb), and so
# does GODEBUG=netdns=cgo; Go's own resolver (netdns=go) never sees the
# module, and says the name does not exist.
command -v go >/dev/null || fail "go is not installed (golang-go, scripts/deps.sh)"
mkdir -p "$T/gohello"
cat >"$T/gohello/main.go" <<'EOF'
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

func main() {
	addrs, err := net.LookupHost(os.Args[1])
	if err != nil {
		fmt.Println("error")
		return
	}
	fmt.Println(strings.Join(addrs, " "))
}
EOF
(cd "$T/gohello" && HOME=$T GOCACHE=$T/gocache GOPATH=$T/gopath GO111MODULE=off \
	CGO_ENABLED=1 GOFLAGS= go build -o "$T/gohello/gohello" main.go) >"$T/go.log" 2>&1 ||
	fail "go build: $(cat "$T/go.log")"
check_eq "Go (cgo, default resolver): the replicas in policy order" \
	"127.0.0.21 127.0.0.22 127.0.0.23" "$(in_nss "$T/gohello/gohello" nss.cluster)"
check_eq "Go with GODEBUG=netdns=cgo: the same" \
	"127.0.0.21 127.0.0.22 127.0.0.23" \
	"$(in_nss env GODEBUG=netdns=cgo "$T/gohello/gohello" nss.cluster)"
check_eq "Go's own resolver (netdns=go) never sees the module" "error" \
	"$(in_nss env GODEBUG=netdns=go "$T/gohello/gohello" nss.cluster)"

check_eq "200 replicas: glibc grows the buffer (ERANGE) and gets them all" \
	200 "$(in_nss $PY -c 'import socket
print(len(socket.gethostbyname_ex("many.cluster")[2]))')"
check_eq "a name that is not virtual goes to the next source" "127.0.0.1" \
	"$(in_nss getent hosts localhost | awk '{print $1; exit}')"
check_eq "nor is a virtual name asked of DNS when it answers" "" \
	"$(in_nss getent hosts no-such.cluster)"
finish
