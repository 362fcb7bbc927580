#!/bin/bash
# system_preload.sh - the library preloaded system-wide (issue 23,
# deliverable 7), never on the host's own files: /etc/ld.so.preload in a
# private mount namespace (a copy of /etc bind-mounted over it) makes
# every program started there balance with no LD_PRELOAD in its
# environment: python3 gets the replicas in policy order, curl reaches
# the replica past a refused one, and the refusal is counted (the preload
# counts, unlike the NSS module); a setuid copy of curl run as nobody is
# preloaded too (the loader honours ld.so.preload in secure-execution
# mode) and reads only the system config. The systemd drop-in example
# (etc/systemd/replicalb-preload.conf) gives a program the same
# environment a service would get.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

[ "$(id -u)" = 0 ] || fail "needs root (a private mount namespace)"
PORT=$(free_port)
write_config <<EOF
clusters = (
  { name = "sys.cluster"; port = $PORT; load_balancing = "in_order";
    use_hedged_requests = false;
    replicas = ( "127.0.0.71", "127.0.0.72" ); }
);
EOF
start_replica web 127.0.0.72 "$PORT" http || fail "start replica"

# A copy of /etc with ld.so.preload naming the build tree's library.
cp -a /etc "$T/etc" 2>/dev/null
lib=${RLB_LIB##* }
echo "$lib" >"$T/etc/ld.so.preload"

# in_preloaded CMD... : CMD where every program is preloaded by ld.so.
in_preloaded()
{
	unshare -m sh -c 'mount --bind "$1/etc" /etc && shift && exec "$@"' \
		sh "$T" "$@"
}

check_eq "no LD_PRELOAD in the environment" "" \
	"$(in_preloaded sh -c 'echo "${LD_PRELOAD:-}"')"
check_eq "python3: the replicas in policy order" \
	"['127.0.0.71', '127.0.0.72']" \
	"$(in_preloaded $PY -c "$PY_ADDRS" sys.cluster)"
check_match "curl reaches the replica past the refused one" "web" \
	"$(in_preloaded curl -s --max-time 5 "http://sys.cluster:$PORT/")"
check_eq "and the refusal is counted in the shared state" 1 \
	"$(replica_errors sys.cluster 127.0.0.71)"

# A setuid copy of curl run as nobody: still preloaded (ld.so.preload is
# the administrator's), in secure-execution mode: the system config only,
# so a tmpfs over SYSCONFDIR holds one for this namespace.
sysconf=$(rlbctl --help 2>&1 | grep -o '/[^ ]*/replicalb/replicalb.conf' | head -1)
sysdir=${sysconf%/replicalb/replicalb.conf}
[ -n "$sysdir" ] && [ -d "$sysdir" ] ||
	fail "the system config directory $sysdir does not exist"
chmod 0711 "$T"
mkdir -m 0755 "$T/suid"
cp "$(command -v curl)" "$T/suid/curl"
chmod 4755 "$T/suid/curl"
printf 'state_dir = "%s/sysstate";\nclusters = ( { name = "sys.cluster"; port = %d; load_balancing = "in_order"; use_hedged_requests = false;\n  replicas = ( "127.0.0.73", "127.0.0.72" ); } );\n' \
	"$T" "$PORT" >"$T/suid.conf"
out=$(unshare -m sh -c 'mount --bind "$1/etc" /etc &&
	mount -t tmpfs tmpfs "$2" && mkdir "$2/replicalb" &&
	cp "$1/suid.conf" "$2/replicalb/replicalb.conf" &&
	exec setpriv --reuid=65534 --regid=65534 --clear-groups \
		env REPLICALB_DISABLE=1 "$1/suid/curl" -s --max-time 5 \
		"http://sys.cluster:$3/"' sh "$T" "$sysdir" "$PORT" 2>&1)
check_match "setuid curl as nobody, preloaded by ld.so.preload, reaches the replica" \
	"web" "$out"
check_eq "its refusal is counted in the state of its effective user (root)" 1 \
	"$(REPLICALB_CONFIG=$T/suid.conf REPLICALB_STATE_DIR=$T/sysstate \
		replica_errors sys.cluster 127.0.0.73)"

# The systemd drop-in: the environment it gives a service.
dropin=$top_srcdir/etc/systemd/replicalb-preload.conf
[ -f "$dropin" ] || fail "no $dropin"
envs=$(sed -n "s|^Environment=||p" "$dropin" | sed "s|@pkglibdir@/libreplicalb.so|$lib|")
check_match "the drop-in sets LD_PRELOAD to the installed library" \
	"LD_PRELOAD=$lib" "$envs"
# shellcheck disable=SC2086
check_eq "a program with that environment is balanced (the refused replica last now)" \
	"['127.0.0.72', '127.0.0.71']" \
	"$(env $envs $PY -c "$PY_ADDRS" sys.cluster)"
finish
