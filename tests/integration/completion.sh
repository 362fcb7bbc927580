#!/bin/bash
# completion.sh - bash completion of replicalbctl and replicalb
# (etc/bash-completion/, design.md §6): the completion functions run in a
# real bash with bash-completion's library, as a shell runs them on TAB.
# replicalbctl's words come from its one option table and command table
# (__complete): commands, each command's options only, cluster and
# replica names of the config in effect (REPLICALB_CONFIG, or -c typed),
# policies; files after -c. The wrapper completes its options, a policy
# after -p, then the command it runs. Also the "did you mean" of an
# unknown command, cluster and replica.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

BC=/usr/share/bash-completion/bash_completion
[ -f "$BC" ] || fail "bash-completion is not installed (scripts/deps.sh)"
write_config <<EOF
clusters = (
  { name = "analytics.cluster"; port = 9000;
    replicas = ( "ch-1.example", "ch-2.example:9440" ); },
  { name = "audit.cluster"; replicas = ( "127.0.0.5" ); }
);
EOF
cat >"$T/other.conf" <<EOF
clusters = ( { name = "other.cluster"; replicas = ( "127.0.0.9" ); } );
EOF
mkdir -p "$T/bin"
ln -s "$RLBCTL" "$T/bin/replicalbctl"
ln -s "$top_builddir/replicalb" "$T/bin/replicalb"

# comp LINE : what TAB at the end of LINE offers, sorted, one line.
comp()
{
	PATH=$T/bin:$PATH bash -c '
		. "$1" >/dev/null 2>&1
		. "$2"; . "$3"
		read -ra COMP_WORDS <<<"$4"
		case $4 in *" ") COMP_WORDS+=("") ;; esac
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE=$4 COMP_POINT=${#4}
		f=$(complete -p "${COMP_WORDS[0]}" | sed "s/.*-F \([^ ]*\).*/\1/")
		"$f" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" \
			"${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " " | sed "s/ $//"
	' sh "$BC" "$top_srcdir/etc/bash-completion/replicalbctl" \
		"$top_srcdir/etc/bash-completion/replicalb" "$1"
}

check_eq "replicalbctl st<TAB>: status" "status" "$(comp 'replicalbctl st')"
check_eq "replicalbctl r<TAB>: the commands that start so" \
	"record-error remove-state reset resolve" "$(comp 'replicalbctl r')"
check_eq "hidden commands are not offered" "" "$(comp 'replicalbctl __')"
check_eq "status --<TAB>: its options and the global ones" \
	"--app --config --help --hostname --json --prometheus --version" \
	"$(comp 'replicalbctl status --')"
check_eq "resolve --j<TAB>: not an option of resolve" "" \
	"$(comp 'replicalbctl resolve --j')"
check_eq "resolve a<TAB>: the clusters of the config in effect" \
	"analytics.cluster audit.cluster" "$(comp 'replicalbctl resolve a')"
check_eq "-c FILE status <TAB>: the clusters of that file" \
	"other.cluster" "$(comp "replicalbctl -c $T/other.conf status o")"
check_eq "record-error CLUSTER <TAB>: its replicas" \
	"ch-1.example:9000 ch-2.example:9440" \
	"$(comp 'replicalbctl record-error analytics.cluster c')"
check_eq "reset CLUSTER REPLICA <TAB>: nothing more" "" \
	"$(comp 'replicalbctl reset audit.cluster 127.0.0.5 1')"
check_eq "policies ro<TAB>: round_robin" "round_robin" \
	"$(comp 'replicalbctl policies ro')"
: >"$T/conf-a.conf"
check_eq "-c <TAB>: files" "$T/conf-a.conf" "$(comp "replicalbctl -c $T/conf-")"
check_eq "a broken config: no names, nothing on the terminal" "" \
	"$(comp "replicalbctl -c $T/conf-a.conf resolve a" 2>&1)"

check_eq "replicalb --fa<TAB>: --failover" "--failover" "$(comp 'replicalb --fa')"
check_eq "replicalb -p ro<TAB>: a policy" "round_robin" "$(comp 'replicalb -p ro')"
check_eq "replicalb -d replicalbc<TAB>: the command" "replicalbctl" \
	"$(comp 'replicalb -d replicalbc')"
check_eq "replicalb -- replicalbctl st<TAB>: the command's own completion" \
	"status" "$(comp 'replicalb -- replicalbctl st')"

# "Did you mean", for what a user mistypes.
out=$(rlbctl stauts 2>&1)
check_match "an unknown command: did you mean" \
	'unknown command "stauts"; did you mean "status"\?' "$out"
out=$(rlbctl status analytcs.cluster 2>&1)
check_match "an unknown cluster: did you mean" \
	'no cluster named analytcs.cluster; did you mean analytics.cluster\?' "$out"
out=$(rlbctl record-error analytics.cluster ch-3.example 2>&1)
check_match "an unknown replica: did you mean" \
	'no replica ch-3.example in cluster analytics.cluster; did you mean ch-1.example\?' "$out"
out=$(rlbctl status nothing.like.it 2>&1)
check_eq "nothing close: no suggestion" \
	"replicalbctl: no cluster named nothing.like.it" "$out"
finish
