#!/bin/bash
# cli.sh - replicalbctl: exact output and exit status of every command.
set -u

: "${top_builddir:?}" "${top_srcdir:?}"
CTL="$top_builddir/replicalbctl"

# rm_state_segments, shared by every test (its own ok/not_ok below).
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm_state_segments "$tmp"; rm -rf "$tmp"; rm_gone_segments' EXIT
for v in $(compgen -e); do
	case $v in REPLICALB_*) unset "$v" ;; esac
done
export REPLICALB_STATE_DIR="$tmp/state"

passed=0
failed=0

ok()
{
	passed=$((passed + 1))
	echo "ok - $1"
}

not_ok()
{
	failed=$((failed + 1))
	echo "not ok - $1"
	shift
	for line in "$@"; do
		printf '#   %s\n' "$line"
	done
}

# run CMD...: sets out, err (trailing newlines stripped) and rc.
run()
{
	"$@" >"$tmp/stdout" 2>"$tmp/stderr"
	rc=$?
	out=$(<"$tmp/stdout")
	err=$(<"$tmp/stderr")
}

# expect NAME RC STDOUT CMD...: exit status and stdout exactly.
expect()
{
	local name=$1 want_rc=$2 want_out=$3

	shift 3
	run "$@"
	if [[ $rc == "$want_rc" && $out == "$want_out" ]]; then
		ok "$name"
	else
		not_ok "$name" "command: $*" "status $rc, wanted $want_rc" \
			"stdout: $out" "wanted: $want_out" "stderr: $err"
	fi
}

# expect_err NAME STDERR CMD...: exit status 1, nothing on stdout and
# stderr exactly (when STDERR is not "*").
expect_err()
{
	local name=$1 want_err=$2

	shift 2
	run "$@"
	if [[ $rc == 1 && -z $out && ($want_err == "*" ||
		$err == "$want_err") ]]; then
		ok "$name"
	else
		not_ok "$name" "command: $*" "status $rc, wanted 1" \
			"stdout: $out" "stderr: $err" "wanted: $want_err"
	fi
}

# check NAME COMMAND...: passes when the command succeeds.
check()
{
	local name=$1

	shift
	if "$@"; then
		ok "$name"
	else
		not_ok "$name" "command: $*"
	fi
}

ctl()
{
	"$CTL" "$@"
}

main="$tmp/etc/replicalb.conf"
mkdir -p "$tmp/etc/apps.d"
cat >"$main" <<'EOF'
# replicalbctl test config
load_balancing = "in_order";
distributed_replica_error_half_life = 3600;
clusters = (
  { name = "ordered.cluster"; replicas = ("a", "b", "c"); },
  { name = "rr.cluster"; load_balancing = "round_robin";
    replicas = ("a", "b", "c"); },
  { name = "first.cluster"; load_balancing = "first_or_random";
    load_balancing_first_offset = 4; replicas = ("a", "b", "c"); },
  { name = "cap.cluster"; distributed_replica_error_cap = 5;
    replicas = ("x", "y"); },
  { name = "multi.cluster";
    replicas = ("h1:9000", "h1:9001", "[2001:db8::7]:9000", "h2",
      { host = "p1"; port = 5432; priority = 2;
        address = [ "10.0.0.1", "10.0.0.2" ]; });
  },
  { name = "analytics.cluster"; load_balancing = "nearest_hostname";
    replicas = ("ch-01-1.dc1.example.net", "ch-01-2.dc2.example.net:9440",
      "[2001:db8::7]:9000",
      { host = "ch-01-3.dc3.example.net"; port = 9000; priority = 2; });
  }
);
EOF

hosts="$tmp/hosts.conf"
cat >"$hosts" <<'EOF'
clusters = (
  { name = "tv07-lcs"; load_balancing = "hostname_longest_common_suffix";
    replicas = ("ch2.dc1.example.com", "ch1.dc2.example.com"); },
  { name = "tv07-lcp"; load_balancing = "hostname_longest_common_prefix";
    replicas = ("ch2.dc1.example.com", "ch1.dc2.example.com"); },
  { name = "tv08-nearest"; load_balancing = "nearest_hostname";
    replicas = ("db-a1.eu", "web-b10.eu", "web-a2.us"); },
  { name = "tv08-lev"; load_balancing = "hostname_levenshtein_distance";
    replicas = ("db-a1.eu", "web-b10.eu", "web-a2.us"); },
  { name = "tv08-lcp"; load_balancing = "hostname_longest_common_prefix";
    replicas = ("db-a1.eu", "web-b10.eu", "web-a2.us"); },
  { name = "tv08-lcs"; load_balancing = "hostname_longest_common_suffix";
    replicas = ("db-a1.eu", "web-b10.eu", "web-a2.us"); }
);
EOF

# --- policies, help, version, usage errors -------------------------------

expect "policies lists the nine names in enum order" 0 \
	"random
nearest_hostname
hostname_levenshtein_distance
hostname_longest_common_prefix
hostname_longest_common_suffix
in_order
first_or_random
round_robin
least_request" ctl policies
expect "policies NAME: a valid name as it is" 0 "in_order" ctl policies in_order
expect "policies NAME: the closest valid one" 0 "nearest_hostname" \
	ctl policies nearest
expect "policies NAME: none close, exit 1" 1 "" ctl policies xyzzy

# --- the installed sample: nothing declared, nothing to probe ------------

cp "$top_srcdir/etc/replicalb.conf" "$tmp/sample.conf"
chmod 0644 "$tmp/sample.conf"
expect "check: the sample declares no cluster" 0 \
	"no clusters: every name passes through unchanged
ok" "$CTL" -c "$tmp/sample.conf" check
expect "probe: no clusters, nothing to probe, exit 0" 0 \
	"no clusters: nothing to probe" "$CTL" -c "$tmp/sample.conf" probe

run ctl --version
if [[ $rc == 0 && $out =~ ^replicalbctl\ [0-9]+\.[0-9]+ ]]; then
	ok "--version"
else
	not_ok "--version" "status $rc, stdout: $out"
fi

run ctl -h
if [[ $rc == 0 && $out == usage:* && $out == *record-error* ]]; then
	ok "-h prints usage on stdout"
else
	not_ok "-h prints usage on stdout" "status $rc, stdout: $out"
fi

usage_case()
{
	local name=$1

	shift
	run ctl "$@"
	if [[ $rc == 1 && -z $out && $err == *usage:* ]]; then
		ok "usage error: $name"
	else
		not_ok "usage error: $name" "command: ctl $*" "status $rc" \
			"stdout: $out" "stderr: $err"
	fi
}
usage_case "no command"
usage_case "unknown command" -c "$main" frobnicate
usage_case "unknown option" -c "$main" check --frob
usage_case "missing option argument" check -c
usage_case "resolve without NAME" -c "$main" resolve
usage_case "resolve with two NAMEs" -c "$main" resolve a b
usage_case "resolve -n 0" -c "$main" resolve -n 0 ordered.cluster
usage_case "resolve -n abc" -c "$main" resolve -n abc ordered.cluster
usage_case "resolve -n -3" -c "$main" resolve -n -3 ordered.cluster
usage_case "check takes no arguments" -c "$main" check extra
usage_case "status takes no --peek" -c "$main" status --peek
usage_case "resolve takes no --json" -c "$main" resolve --json rr.cluster
usage_case "record-error needs HOST" -c "$main" record-error cap.cluster
usage_case "record-error COUNT 0" -c "$main" record-error cap.cluster x 0
usage_case "record-error COUNT x" -c "$main" record-error cap.cluster x 1x
usage_case "reset takes at most two" -c "$main" reset cap.cluster x y
usage_case "-a with a path" -c "$main" -a ../main check

expect_err "missing config file" \
	"replicalbctl: $tmp/nope.conf: no such config file" \
	ctl -c "$tmp/nope.conf" check
expect_err "REPLICALB_CONFIG is the default config" \
	"replicalbctl: $tmp/env.conf: no such config file" \
	env REPLICALB_CONFIG="$tmp/env.conf" "$CTL" status

# --- check ----------------------------------------------------------------

mkdir -p "$tmp/fresh"
expect "check lists every cluster, then ok" 0 \
	"ordered.cluster: in_order, 3 replicas
rr.cluster: round_robin, 3 replicas
first.cluster: first_or_random, 3 replicas
cap.cluster: in_order, 2 replicas
multi.cluster: in_order, 5 replicas
analytics.cluster: nearest_hostname, 4 replicas
ok" env REPLICALB_STATE_DIR="$tmp/fresh/state" "$CTL" -c "$main" check
check "check touches no state" test ! -e "$tmp/fresh/state"

cat >"$tmp/etc/apps.d/myapp.conf" <<'EOF'
load_balancing = "random";
clusters = (
  { name = "app.cluster"; replicas = ("q"); },
  { name = "rr.cluster"; load_balancing = "in_order"; replicas = ("z"); }
);
EOF
want_app="ordered.cluster: random, 3 replicas
rr.cluster: in_order, 1 replica
first.cluster: first_or_random, 3 replicas
cap.cluster: random, 2 replicas
multi.cluster: random, 5 replicas
analytics.cluster: nearest_hostname, 4 replicas
app.cluster: random, 1 replica
ok"
run ctl check -c "$main" -a myapp
# Replaced clusters may keep their place or move; compare sorted.
if [[ $rc == 0 && $(sort <<<"$out") == "$(sort <<<"$want_app")" &&
	$out == *$'\nok' ]]; then
	ok "check -a APP includes apps.d/APP.conf"
else
	not_ok "check -a APP includes apps.d/APP.conf" "status $rc" \
		"stdout: $out" "stderr: $err"
fi
run env REPLICALB_APP=myapp "$CTL" -c "$main" check
if [[ $rc == 0 && $out == *"app.cluster: random, 1 replica"* ]]; then
	ok "check honours REPLICALB_APP"
else
	not_ok "check honours REPLICALB_APP" "status $rc" "stdout: $out"
fi

broken="$tmp/broken.conf"
cat >"$broken" <<'EOF'
# line 1
clusters = (
  { name = "x.cluster";
    load_balancing = "nearest";
    replicas = ("a"); },
  { name = "y.cluster";
    replicas = ("b");
    colour = "blue"; }
);
EOF
run ctl -c "$broken" check
mapfile -t lines <<<"$err"
if [[ $rc == 1 && -z $out && ${#lines[@]} == 2 &&
	${lines[0]} == "$broken:4: unknown load_balancing \"nearest\""* &&
	${lines[0]} == *nearest_hostname* && ${lines[1]} == "$broken:8: "* ]]
then
	ok "broken config: every error as FILE:LINE: message, exit 1"
else
	not_ok "broken config: every error as FILE:LINE: message, exit 1" \
		"status $rc" "stdout: $out" "stderr: $err"
fi

printf 'clusters = (\n  { name = "s"; replicas = ("a") }\n  oops\n);\n' \
	>"$tmp/syntax.conf"
run ctl -c "$tmp/syntax.conf" resolve s
if [[ $rc == 1 && -z $out && $err == "$tmp/syntax.conf:"[0-9]*": "* ]]; then
	ok "syntax error: FILE:LINE: message, exit 1"
else
	not_ok "syntax error: FILE:LINE: message, exit 1" "status $rc" \
		"stderr: $err"
fi

# --- resolve ----------------------------------------------------------------

expect "resolve in_order" 0 "a b c" ctl -c "$main" resolve ordered.cluster
expect "resolve -n 2 in_order" 0 "a b c
a b c" ctl resolve -c "$main" -n 2 ordered.cluster
expect "NAME is case-insensitive, trailing dot ignored" 0 "a b c" \
	ctl -c "$main" resolve ORDERED.Cluster.
expect_err "unknown cluster" "replicalbctl: no cluster named nope.cluster" \
	ctl -c "$main" resolve nope.cluster

expect "round_robin -n 4 over a,b,c" 0 "b c a
c a b
a b c
b c a" ctl resolve -c "$main" -n 4 rr.cluster
expect "round_robin counter continues in a new process" 0 "c a b" \
	ctl -c "$main" resolve rr.cluster
expect "--peek does not advance round_robin" 0 "a b c
a b c" ctl -c "$main" resolve --peek -n 2 rr.cluster
expect "after --peek the next selection takes that turn" 0 "a b c" \
	ctl -c "$main" resolve rr.cluster

run ctl -c "$main" resolve -n 60 first.cluster
if [[ $rc == 0 && $(grep -cvx -e 'b a c' -e 'b c a' <<<"$out") == 0 &&
	$(grep -cx 'b a c' <<<"$out") -gt 0 &&
	$(grep -cx 'b c a' <<<"$out") -gt 0 ]]; then
	ok "first_or_random offset 4 mod 3: b first, then a and c at random"
else
	not_ok "first_or_random offset 4 mod 3" "status $rc" "stdout: $out"
fi

expect "resolve -v: key parts and addresses" 0 "a b c
  a errors=0 slowdowns=0 priority=1 policy_priority=0 in_flight=0 addresses=dns
  b errors=0 slowdowns=0 priority=1 policy_priority=1 in_flight=0 addresses=dns
  c errors=0 slowdowns=0 priority=1 policy_priority=2 in_flight=0 addresses=dns" \
	ctl -c "$main" resolve -v ordered.cluster
expect "resolve -v: ports, IPv6 and pinned addresses" 0 "h1 h1 2001:db8::7 h2 p1
  h1:9000 errors=0 slowdowns=0 priority=1 policy_priority=0 in_flight=0 addresses=dns
  h1:9001 errors=0 slowdowns=0 priority=1 policy_priority=1 in_flight=0 addresses=dns
  [2001:db8::7]:9000 errors=0 slowdowns=0 priority=1 policy_priority=2 in_flight=0 addresses=2001:db8::7
  h2 errors=0 slowdowns=0 priority=1 policy_priority=3 in_flight=0 addresses=dns
  p1:5432 errors=0 slowdowns=0 priority=2 policy_priority=4 in_flight=0 addresses=10.0.0.1,10.0.0.2" \
	ctl -c "$main" resolve --verbose multi.cluster

# --- hostname policies (clickhouse.md §9) -----------------

H="-H ch1.dc1.example.com"
expect "TV07a longest_common_suffix" 0 \
	"ch2.dc1.example.com ch1.dc2.example.com" \
	ctl -c "$hosts" $H resolve tv07-lcs
expect "TV07b longest_common_prefix" 0 \
	"ch1.dc2.example.com ch2.dc1.example.com" \
	ctl -c "$hosts" resolve tv07-lcp $H
expect "TV08 nearest_hostname" 0 "web-a2.us web-b10.eu db-a1.eu" \
	ctl -c "$hosts" -H web-a1.eu resolve tv08-nearest
expect "TV08 longest_common_prefix" 0 "web-a2.us web-b10.eu db-a1.eu" \
	ctl -c "$hosts" -H web-a1.eu resolve tv08-lcp
expect "TV08 longest_common_suffix, -v priorities" 0 \
	"db-a1.eu web-b10.eu web-a2.us
  db-a1.eu errors=0 slowdowns=0 priority=1 policy_priority=-7 in_flight=0 addresses=dns
  web-b10.eu errors=0 slowdowns=0 priority=1 policy_priority=-3 in_flight=0 addresses=dns
  web-a2.us errors=0 slowdowns=0 priority=1 policy_priority=0 in_flight=0 addresses=dns" \
	ctl -c "$hosts" -H web-a1.eu resolve -v tv08-lcs
run ctl -c "$hosts" -H web-a1.eu resolve -n 60 tv08-lev
if [[ $rc == 0 &&
	$(grep -cvx -e 'db-a1.eu web-b10.eu web-a2.us' \
		-e 'web-b10.eu db-a1.eu web-a2.us' <<<"$out") == 0 &&
	$(grep -c '^db' <<<"$out") -gt 0 && $(grep -c '^web' <<<"$out") -gt 0 ]]
then
	ok "TV08 levenshtein: first of {db-a1.eu, web-b10.eu}, web-a2.us last"
else
	not_ok "TV08 levenshtein" "status $rc" "stdout: $out"
fi
expect "REPLICALB_HOSTNAME is honoured like -H" 0 \
	"web-a2.us web-b10.eu db-a1.eu" \
	env REPLICALB_HOSTNAME=web-a1.eu "$CTL" -c "$hosts" resolve tv08-nearest
expect "REPLICALB_LOAD_BALANCING overrides every cluster" 0 \
	"db-a1.eu web-b10.eu web-a2.us" \
	env REPLICALB_LOAD_BALANCING=in_order "$CTL" -c "$hosts" \
	resolve tv08-lcp

# --- record-error and reset -------------------------------------------------

# An unusable (world-writable) state directory: the change would only
# live in this process, so the admin commands refuse and say so.
mkdir -p "$tmp/badstate" && chmod 0777 "$tmp/badstate"
run env REPLICALB_STATE_DIR="$tmp/badstate" "$CTL" -c "$main" \
	record-error ordered.cluster a
if [[ $rc == 1 && $err == *"ordered.cluster: the state file cannot be used"* ]]; then
	ok "record-error refuses private state"
else
	not_ok "record-error refuses private state" "status $rc" "stderr: $err"
fi
run env REPLICALB_STATE_DIR="$tmp/badstate" "$CTL" -c "$main" reset
if [[ $rc == 1 && $err == *"the state file cannot be used"* ]]; then
	ok "reset refuses private state"
else
	not_ok "reset refuses private state" "status $rc" "stderr: $err"
fi

expect "record-error prints nothing" 0 "" \
	ctl -c "$main" record-error ordered.cluster a
expect "in_order: a replica with an error goes to the back" 0 "b c a" \
	ctl -c "$main" resolve ordered.cluster
expect "record-error COUNT, HOST case-insensitive" 0 "" \
	ctl -c "$main" record-error ORDERED.cluster. B 2
expect "fewest errors first" 0 "c a b
  c errors=0 slowdowns=0 priority=1 policy_priority=2 in_flight=0 addresses=dns
  a errors=1 slowdowns=0 priority=1 policy_priority=0 in_flight=0 addresses=dns
  b errors=2 slowdowns=0 priority=1 policy_priority=1 in_flight=0 addresses=dns" \
	ctl -c "$main" resolve -v ordered.cluster
expect "reset CLUSTER HOST" 0 "" ctl -c "$main" reset ordered.cluster a
expect "reset of one replica leaves the others" 0 "a c b" \
	ctl -c "$main" resolve ordered.cluster
expect "reset CLUSTER" 0 "" ctl -c "$main" reset ordered.cluster
expect "reset CLUSTER zeroes the cluster" 0 "a b c" \
	ctl -c "$main" resolve ordered.cluster

expect_err "record-error on a host with two ports is ambiguous" \
	"replicalbctl: h1: ambiguous in cluster multi.cluster, add :PORT" \
	ctl -c "$main" record-error multi.cluster h1
expect_err "record-error on an unknown replica" \
	"replicalbctl: no replica zz in cluster multi.cluster" \
	ctl -c "$main" record-error multi.cluster zz
expect_err "record-error on an unknown cluster" \
	"replicalbctl: no cluster named nope" \
	ctl -c "$main" record-error nope a
expect_err "record-error with a port no replica has" "*" \
	ctl -c "$main" record-error multi.cluster h1:9999
expect "record-error HOST:PORT" 0 "" \
	ctl -c "$main" record-error multi.cluster H1:9001 3
expect "record-error [v6]:PORT" 0 "" \
	ctl -c "$main" record-error multi.cluster '[2001:db8::7]:9000'
expect "record-error bare IPv6 host" 0 "" \
	ctl -c "$main" record-error multi.cluster 2001:db8::7 1
expect "errors were recorded against the right replicas" 0 \
	"h1 h2 p1 2001:db8::7 h1" ctl -c "$main" resolve multi.cluster

expect "record-error beyond the cap" 0 "" \
	ctl -c "$main" record-error cap.cluster x 100
ctl -c "$main" record-error cap.cluster x >/dev/null 2>&1
ctl -c "$main" record-error cap.cluster y 4 >/dev/null 2>&1

# --- status -----------------------------------------------------------------

# The JSON documents are checked by one python3 run at the end (python
# starts slowly); the state file is taken from the first one here.
run ctl -c "$main" status --json
json_all=$out json_all_rc=$rc
re='"name": "analytics.cluster", [^]]*"state_file": "([^"]*)"'
[[ $json_all =~ $re ]] && state=${BASH_REMATCH[1]} || state=unknown
run ctl -c "$main" status --json cap.cluster
json_one=$out json_one_rc=$rc

# State is made at a cluster's first use: analytics.cluster has had none.
expect "status table" 0 \
	"CLUSTER analytics.cluster  policy nearest_hostname  state $state (absent)
  HOST                       PORT  PRIO  ERRORS SLOWDOWNS  RECOVERY_S  CONNECTS  FAILURES IN_FLIGHT
  ch-01-1.dc1.example.net       -     1       0         0           0         0         0         0
  ch-01-2.dc2.example.net    9440     1       0         0           0         0         0         0
  2001:db8::7                9000     1       0         0           0         0         0         0
  ch-01-3.dc3.example.net    9000     2       0         0           0         0         0         0" \
	ctl -c "$main" -H ch-01-1.dc1.example.net status ANALYTICS.cluster
run ctl -c "$main" status
if [[ $rc == 0 && $(grep -c '^CLUSTER ' <<<"$out") == 6 &&
	$out == *"$(printf '\n  %-25s %5s %5s %7s ' x - 1 5)"* ]]
then
	ok "status table of every cluster"
else
	not_ok "status table of every cluster" "status $rc" "stdout: $out"
fi
expect_err "status of an unknown cluster" \
	"replicalbctl: no cluster named nope" ctl -c "$main" status nope

sums_before=$(cd "$REPLICALB_STATE_DIR" && cat -- * | cksum)
ctl -c "$main" status >/dev/null 2>&1
ctl -c "$main" status --json >/dev/null 2>&1
run ctl -c "$main" status --json
sums_after=$(cd "$REPLICALB_STATE_DIR" && cat -- * | cksum)
# Recovery times count down with the clock; everything else must stay.
no_clock='s/"recovery_seconds": [0-9]*//g'
if [[ $(sed "$no_clock" <<<"$out") == "$(sed "$no_clock" <<<"$json_all")" &&
	$sums_before == "$sums_after" ]]; then
	ok "reading status changes nothing"
else
	not_ok "reading status changes nothing" "before: $json_all" \
		"after: $out"
fi

# Reading never writes (§6): status and resolve --peek create no state
# directory or file, and leave existing files exactly as they were.
nostate="$tmp/nostate/sub"
run env REPLICALB_STATE_DIR="$nostate" "$CTL" -c "$main" status cap.cluster
want="CLUSTER cap.cluster  policy in_order  state $nostate/cap.cluster.state (absent)"
if [[ $rc == 0 && $out == "$want"* && ! -e $tmp/nostate ]]; then
	ok "status against a missing state dir creates nothing"
else
	not_ok "status against a missing state dir creates nothing" \
		"status $rc" "stdout: $out" "stderr: $err" \
		"$(ls -laR "$tmp/nostate" 2>&1)"
fi
run env REPLICALB_STATE_DIR="$nostate" "$CTL" -c "$main" status --json
if [[ $rc == 0 && $out == *'"errors": 5'* ]]; then
	not_ok "status --json against a missing state dir shows zeroes" \
		"stdout: $out"
elif [[ $rc == 0 && ! -e $tmp/nostate ]]; then
	ok "status --json against a missing state dir creates nothing"
else
	not_ok "status --json against a missing state dir creates nothing" \
		"status $rc" "stdout: $out" "stderr: $err"
fi
run env REPLICALB_STATE_DIR="$nostate" "$CTL" -c "$main" \
	resolve --peek -n 2 rr.cluster
if [[ $rc == 0 && $out == $'b c a\nb c a' && ! -e $tmp/nostate ]]; then
	ok "resolve --peek against a missing state dir creates nothing"
else
	not_ok "resolve --peek against a missing state dir creates nothing" \
		"status $rc" "stdout: $out" "stderr: $err"
fi
# A state dir without the cluster's file: no file is made in it.
printf 'clusters = ({ name = "fresh.cluster"; replicas = ("a", "b"); });\n' \
	>"$tmp/fresh.conf"
files_before=$(ls -A "$REPLICALB_STATE_DIR")
expect "status of a cluster without a state file" 0 \
	"CLUSTER fresh.cluster  policy random  state $REPLICALB_STATE_DIR/fresh.cluster.state (absent)
  HOST                       PORT  PRIO  ERRORS SLOWDOWNS  RECOVERY_S  CONNECTS  FAILURES IN_FLIGHT
  a                             -     1       0         0           0         0         0         0
  b                             -     1       0         0           0         0         0         0" \
	ctl -c "$tmp/fresh.conf" status
run ctl -c "$tmp/fresh.conf" status --json
expect_sub='"state_file": "'"$REPLICALB_STATE_DIR"'/fresh.cluster.state", "state_file_use": "absent"'
if [[ $rc == 0 && $out == *"$expect_sub"* ]]; then
	ok "status --json: the path alone, and that there is no file yet"
else
	not_ok "status --json: the path alone, and that there is no file yet" \
		"stdout: $out"
fi
run ctl -c "$tmp/fresh.conf" resolve --peek fresh.cluster
if [[ $rc == 0 && $(ls -A "$REPLICALB_STATE_DIR") == "$files_before" &&
	! -e $REPLICALB_STATE_DIR/fresh.cluster.state ]]; then
	ok "status and resolve --peek create no state file"
else
	not_ok "status and resolve --peek create no state file" \
		"before: $files_before" "after: $(ls -A "$REPLICALB_STATE_DIR")"
fi
# Existing files: the counts recorded earlier show, bytes and mtime stay.
rm -rf "$tmp/state.copy"
cp -a "$REPLICALB_STATE_DIR" "$tmp/state.copy"
mtimes_before=$(cd "$REPLICALB_STATE_DIR" && stat -c '%n %y %i' -- *)
sleep 0.02
# Recovery times count down with the clock: compared without them (and
# without the traffic counts after them, all 0 here).
run ctl -c "$main" status cap.cluster
want="CLUSTER cap.cluster  policy in_order  state $REPLICALB_STATE_DIR/cap.cluster.state
  HOST                       PORT  PRIO  ERRORS SLOWDOWNS  RECOVERY_S  CONNECTS  FAILURES IN_FLIGHT
  x                             -     1       5         0
  y                             -     1       4         0"
if [[ $rc == 0 && $(sed -E 's/( +[0-9]+){4}$//' <<<"$out") == "$want" ]]; then
	ok "status shows the recorded counts"
else
	not_ok "status shows the recorded counts" "status $rc" "stdout: $out" \
		"wanted: $want" "stderr: $err"
fi
expect "resolve --peek -v shows the recorded counts" 0 "y x
  y errors=4 slowdowns=0 priority=1 policy_priority=1 in_flight=0 addresses=dns
  x errors=5 slowdowns=0 priority=1 policy_priority=0 in_flight=0 addresses=dns" \
	ctl -c "$main" resolve --peek -v cap.cluster
run ctl -c "$main" resolve --peek -n 3 rr.cluster
peek_rr=$out
ctl -c "$main" status >/dev/null 2>&1
ctl -c "$main" status --json >/dev/null 2>&1
run ctl -c "$main" resolve --peek rr.cluster
mtimes_after=$(cd "$REPLICALB_STATE_DIR" && stat -c '%n %y %i' -- *)
if diff -r "$tmp/state.copy" "$REPLICALB_STATE_DIR" >/dev/null &&
	cmp -s "$tmp/state.copy/cap.cluster.state" \
		"$REPLICALB_STATE_DIR/cap.cluster.state" &&
	[[ $mtimes_before == "$mtimes_after" &&
		$peek_rr == "$out"$'\n'"$out"$'\n'"$out" ]]; then
	ok "status and resolve --peek leave state files' bytes and mtime"
else
	not_ok "status and resolve --peek leave state files' bytes and mtime" \
		"before: $mtimes_before" "after: $mtimes_after" \
		"peek: $peek_rr / $out"
fi

expect "reset of everything" 0 "" ctl -c "$main" reset
run ctl -c "$main" status --json
json_reset=$out json_reset_rc=$rc

# One line "ok - NAME" or "not ok - NAME" (and details) per document.
python3 - "$REPLICALB_STATE_DIR" "$json_all_rc" "$json_all" \
	"$json_one_rc" "$json_one" "$json_reset_rc" "$json_reset" \
	>"$tmp/py.out" 2>&1 <<'EOF'
import json, sys, traceback

state_dir = sys.argv[1]


def check_all(doc):
    assert list(doc) == ["clusters"], doc
    cl = {c["name"]: c for c in doc["clusters"]}
    assert list(cl) == ["ordered.cluster", "rr.cluster", "first.cluster",
                        "cap.cluster", "multi.cluster", "analytics.cluster"]
    for c in cl.values():
        assert c["state_file"].startswith(state_dir + "/"), c
        for r in c["replicas"]:
            assert set(r) >= {"host", "port", "priority", "errors",
                              "recovery_seconds"}, r
            assert (r["errors"] == 0) == (r["recovery_seconds"] == 0), r
    cap = cl["cap.cluster"]
    assert cap["load_balancing"] == "in_order"
    assert [(r["host"], r["port"], r["errors"])
            for r in cap["replicas"]] == [("x", None, 5), ("y", None, 4)]
    # bit_length(5) = 3 half-lives of 3600 s, less the time since T.
    assert 3 * 3600 - 5 <= cap["replicas"][0]["recovery_seconds"] <= 3 * 3600
    m = cl["multi.cluster"]["replicas"]
    assert [(r["host"], r["port"], r["priority"], r["errors"])
            for r in m] == [
        ("h1", 9000, 1, 0), ("h1", 9001, 1, 3), ("2001:db8::7", 9000, 1, 2),
        ("h2", None, 1, 0), ("p1", 5432, 2, 0)], m
    assert cl["rr.cluster"]["load_balancing"] == "round_robin"
    assert cl["analytics.cluster"]["replicas"][1]["port"] == 9440


def check_one(doc):
    assert [c["name"] for c in doc["clusters"]] == ["cap.cluster"], doc


def check_reset(doc):
    assert len(doc["clusters"]) == 6
    assert all(r["errors"] == 0 and r["recovery_seconds"] == 0
               for c in doc["clusters"] for r in c["replicas"]), doc


tests = [
    ("status --json is one valid object with the right values", check_all),
    ("status --json CLUSTER shows one cluster", check_one),
    ("reset zeroes every count", check_reset),
]
for k, (name, fn) in enumerate(tests):
    rc, text = sys.argv[2 + 2 * k], sys.argv[3 + 2 * k]
    try:
        assert rc == "0", "exit status " + rc
        fn(json.loads(text))
        print("ok - " + name)
    except Exception:
        print("not ok - " + name)
        for line in traceback.format_exc().splitlines():
            print("#   " + line)
EOF
cat "$tmp/py.out"
n=$(grep -c '^ok - ' "$tmp/py.out")
passed=$((passed + n))
failed=$((failed + 3 - n))

# env: the one table of environment variables, and the docs that list it.
run ctl env
table=$(awk '{ print $1 }' <<<"$out" | sort | tr '\n' ' ')
doc=$(sed -n '/^### §2.6 Environment/,/^### §2.7/p' "$top_srcdir/docs/contract.md" |
	sed -n 's/^| `\([A-Z_]*\)` |.*/\1/p' | sort | tr '\n' ' ')
check "env: lists the variables, exit 0" test "$rc" = 0 -a -n "$table"
check "env: design.md §2.6 lists exactly the table's variables" \
	test "$table" = "$doc"
REPLICALB_APP=curl run ctl env
check "env: shows a value in force" grep -q '^REPLICALB_APP .*: curl$' "$tmp/stdout"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
