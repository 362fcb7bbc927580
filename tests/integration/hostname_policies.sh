#!/bin/bash
# hostname_policies.sh - the four hostname policies (design.md §3.1, §3.2) with
# the vectors TV07, TV08 and TV11 of clickhouse.md §9,
# replica names resolved through a stacked nss_wrapper, and the local
# hostname taken from local_hostname, REPLICALB_HOSTNAME (which wins) or
# the canonical name of gethostname() (NSS_WRAPPER_HOSTNAME). Replica
# addresses are cached for dns_cache_ttl seconds.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

need_nss_wrapper
export NSS_WRAPPER_HOSTS=$T/hosts
write_hosts()
{
	cat >"$NSS_WRAPPER_HOSTS.tmp" && mv -f "$NSS_WRAPPER_HOSTS.tmp" "$NSS_WRAPPER_HOSTS"
}
hosts_base="127.0.0.2 ch2.dc1.example.com
127.0.0.3 ch1.dc2.example.com
127.0.0.2 db-a1.eu
127.0.0.3 web-b10.eu
127.0.0.4 web-a2.us
127.0.0.2 ch-1.example.com
127.0.0.3 CH-2.example.COM
127.0.0.5 web-a1.eu web-a1
127.0.0.6 ch1.dc1.example.com ch1"
printf '%s\n%s\n' "$hosts_base" "127.0.0.7 moving.test" | write_hosts

POLICIES="nearest_hostname hostname_levenshtein_distance hostname_longest_common_prefix hostname_longest_common_suffix"
short()	# policy -> short cluster-name part
{
	case $1 in
	nearest_hostname) echo nearest ;;
	hostname_levenshtein_distance) echo lev ;;
	hostname_longest_common_prefix) echo lcp ;;
	hostname_longest_common_suffix) echo lcs ;;
	esac
}

# One cluster per vector and policy: tv07-lcs.cluster etc.
{
	echo 'load_balancing = "in_order";'
	echo 'local_hostname = "web-a1.eu";'
	echo 'dns_cache_ttl = 3;'
	echo 'clusters = ('
	for p in $POLICIES; do
		s=$(short "$p")
		cat <<EOF
  { name = "tv07-$s.cluster"; load_balancing = "$p";
    replicas = ( "ch2.dc1.example.com", "ch1.dc2.example.com" ); },
  { name = "tv08-$s.cluster"; load_balancing = "$p";
    replicas = ( "db-a1.eu", "web-b10.eu", "web-a2.us" ); },
  { name = "tv11-$s.cluster"; load_balancing = "$p";
    replicas = ( "ch-1.example.com", "CH-2.example.COM" ); },
EOF
	done
	cat <<EOF
  { name = "moving.cluster";
    replicas = ( "moving.test" ); }
);
EOF
} | write_config

gai()
{
	preload_nss $PY "$GAI" -u "$@" 2>>"$T/stderr"
}
: >"$T/stderr"
rep()	# LINE-COUNT ORDER : ORDER repeated, one per line
{
	local i
	for i in $(seq "$1"); do echo "$2"; done
}

# ---------------------------------------------------------------------
# local_hostname from the config: TV08, local "web-a1.eu",
# replicas 0 db-a1.eu (.2), 1 web-b10.eu (.3), 2 web-a2.us (.4).

check_eq "nss_wrapper resolves the replica names (in_order via env)" \
	"127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(REPLICALB_LOAD_BALANCING=in_order gai tv08-lev.cluster 80)"
check_eq "AI_CANONNAME: first replica's host string" \
	"canon=web-a2.us 127.0.0.4 127.0.0.3 127.0.0.2" \
	"$(gai -c tv08-nearest.cluster 80)"

check_eq "TV08 nearest_hostname (dist 8,4,3): [2,1,0]" \
	"$(rep 5 '127.0.0.4 127.0.0.3 127.0.0.2')" \
	"$(gai -n 5 tv08-nearest.cluster 80)"
check_eq "TV08 longest_common_prefix (lcp 0,4,5): [2,1,0]" \
	"$(rep 5 '127.0.0.4 127.0.0.3 127.0.0.2')" \
	"$(gai -n 5 tv08-lcp.cluster 80)"
check_eq "TV08 longest_common_suffix (lcs 7,3,0): [0,1,2]" \
	"$(rep 5 '127.0.0.2 127.0.0.3 127.0.0.4')" \
	"$(gai -n 5 tv08-lcs.cluster 80)"
out=$(gai -n 40 tv08-lev.cluster 80)
check_eq "TV08 levenshtein (lev 2,2,3): index 2 always last" "40" \
	"$(printf '%s\n' "$out" | grep -c ' 127\.0\.0\.4$')"
check_match "TV08 levenshtein: tie broken randomly (0 first)" \
	'^127\.0\.0\.2 127\.0\.0\.3 127\.0\.0\.4$' "$out"
check_match "TV08 levenshtein: tie broken randomly (1 first)" \
	'^127\.0\.0\.3 127\.0\.0\.2 127\.0\.0\.4$' "$out"

check_eq "replicalbctl resolve --peek agrees (TV08 LCS)" \
	"db-a1.eu web-b10.eu web-a2.us" "$(peek tv08-lcs.cluster)"

# ---------------------------------------------------------------------
# REPLICALB_HOSTNAME overrides local_hostname: TV07, local
# "ch1.dc1.example.com", replicas 0 ch2.dc1.example.com (.2),
# 1 ch1.dc2.example.com (.3).

export REPLICALB_HOSTNAME=ch1.dc1.example.com
check_eq "TV07a longest_common_suffix (lcs 16,12): [0,1]" \
	"$(rep 5 '127.0.0.2 127.0.0.3')" "$(gai -n 5 tv07-lcs.cluster 80)"
check_eq "TV07b longest_common_prefix (lcp 2,6): [1,0]" \
	"$(rep 5 '127.0.0.3 127.0.0.2')" "$(gai -n 5 tv07-lcp.cluster 80)"
for s in nearest lev; do
	out=$(gai -n 40 "tv07-$s.cluster" 80 | sort -u | tr '\n' ';')
	check_eq "TV07c $s (1,1): both orders occur" \
		"127.0.0.2 127.0.0.3;127.0.0.3 127.0.0.2;" "$out"
done
check_eq "TV07 LCP, once more: the env override holds in every process" \
	"127.0.0.3 127.0.0.2" "$(gai tv07-lcp.cluster 80)"

# TV11: case. Local "CH-1.example.COM"; replicas 0 ch-1.example.com (.2),
# 1 CH-2.example.COM (.3): nearest and LCS are case-sensitive,
# Levenshtein is not.
export REPLICALB_HOSTNAME=CH-1.example.COM
check_eq "TV11 nearest_hostname (dist 5,1): [1,0]" \
	"$(rep 5 '127.0.0.3 127.0.0.2')" "$(gai -n 5 tv11-nearest.cluster 80)"
check_eq "TV11 levenshtein, case-insensitive (lev 0,1): [0,1]" \
	"$(rep 5 '127.0.0.2 127.0.0.3')" "$(gai -n 5 tv11-lev.cluster 80)"
check_eq "TV11 longest_common_suffix (lcs 0,12): [1,0]" \
	"$(rep 5 '127.0.0.3 127.0.0.2')" "$(gai -n 5 tv11-lcs.cluster 80)"
check_eq "TV11 longest_common_prefix (lcp 0,3): [1,0]" \
	"$(rep 5 '127.0.0.3 127.0.0.2')" "$(gai -n 5 tv11-lcp.cluster 80)"
unset REPLICALB_HOSTNAME

# ---------------------------------------------------------------------
# No local_hostname anywhere: the canonical name of gethostname().
# NSS_WRAPPER_HOSTNAME=web-a1, whose canonical name (hosts file) is
# web-a1.eu. With the short name LCS would tie (all 0); with the FQDN it
# is TV08's [0,1,2].

grep -v '^local_hostname' "$REPLICALB_CONFIG" | write_config
export NSS_WRAPPER_HOSTNAME=web-a1
check_eq "nss_wrapper's gethostname() is web-a1" "web-a1" \
	"$(nss_only $PY -c 'import socket; print(socket.gethostname())')"
check_eq "local hostname: canonical name of gethostname() (TV08 LCS)" \
	"$(rep 5 '127.0.0.2 127.0.0.3 127.0.0.4')" \
	"$(gai -n 5 tv08-lcs.cluster 80)"
check_eq "local hostname: canonical name of gethostname() (TV08 nearest)" \
	"$(rep 5 '127.0.0.4 127.0.0.3 127.0.0.2')" \
	"$(gai -n 5 tv08-nearest.cluster 80)"
check_eq "REPLICALB_HOSTNAME still wins over gethostname()" \
	"$(rep 3 '127.0.0.3 127.0.0.2')" \
	"$(REPLICALB_HOSTNAME=ch1.dc1.example.com gai -n 3 tv07-lcp.cluster 80)"
unset NSS_WRAPPER_HOSTNAME

check_empty "all of the above: stderr silent" "$T/stderr"

# ---------------------------------------------------------------------
# dns_cache_ttl = 3: a replica's addresses are reused for 3 s, then
# resolved again (nss_wrapper rereads its changed hosts file).

cat >"$T/moving.py" <<'EOF'
import os, socket, sys, time
def addr():
    return socket.getaddrinfo("moving.cluster", 80, socket.AF_INET,
                              socket.SOCK_STREAM)[0][4][0]
print("first", addr(), flush=True)
# wait for the test to move the name (bounded)
for _ in range(100):
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
print("cached", addr(), flush=True)
time.sleep(3.5)
print("expired", addr(), flush=True)
EOF
preload_nss $PY "$T/moving.py" "$T/moved" >"$T/moving.out" 2>>"$T/stderr2" &
bg_track $!
mpid=$!
wait_until 5 grep -q '^first' "$T/moving.out"
printf '%s\n%s\n' "$hosts_base" "127.0.0.8 moving.test" | write_hosts
touch "$T/moved"
wait_until 10 grep -q '^expired' "$T/moving.out"
wait "$mpid" 2>/dev/null
check_eq "dns_cache_ttl: cached, then re-resolved after the TTL" \
	"$(printf 'first 127.0.0.7\ncached 127.0.0.7\nexpired 127.0.0.8')" \
	"$(cat "$T/moving.out")"
check_empty "dns_cache_ttl: silent" "$T/stderr2"

finish
