#!/bin/bash
# man_examples.sh - the examples of the man pages print what the page
# shows (issue 24): every "$ " line of the three pages is run against the config of
# replicalb.conf(5)'s EXAMPLE (with apps.d/clickhouse-client.conf from
# etc/apps.d, and the round_robin rr.cluster of a, b, c the page
# rotates), each display in a state directory of its own; the lines
# shown must be the first lines it prints (stdout, then stderr), and one
# shown without output must exit 0 with nothing on stderr. (The README's
# "$ " lines are all in its tour, which tour.sh runs.) And every page renders
# with no troff warning under a long install prefix.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

man5=$top_srcdir/man/replicalb.conf.5.in
man1=$top_srcdir/man/replicalbctl.1.in
# groff's escapes the pages use, undone.
unroff() { sed -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' -e 's/\\e/\\/g'; }

mkdir -p "$T/etc/apps.d"
sed -n '/^\.SH EXAMPLE/,/^\.fi/p' "$man5" | sed '1,2d;$d' | unroff >"$T/etc/replicalb.conf"
check_match "replicalb.conf(5) has its EXAMPLE config" "analytics.cluster" \
	"$(cat "$T/etc/replicalb.conf")"
# The page's rr.cluster, appended to the list in a copy, for the commands
# that name it.
cp "$T/etc/replicalb.conf" "$T/etc/rr.conf"
$PY - "$T/etc/rr.conf" <<'PYEOF'
import sys
p = sys.argv[1]
s = open(p).read().rstrip()
assert s.endswith(");"), s[-20:]
s = s[:-2].rstrip() + """,
  { name = "rr.cluster"; load_balancing = "round_robin";
    replicas = ( "a", "b", "c" ); }
);
"""
open(p, "w").write(s)
PYEOF
cp "$top_srcdir/etc/apps.d/clickhouse-client.conf" "$T/etc/apps.d/"
export REPLICALB_CONFIG=$T/etc/replicalb.conf
rlbctl check >/dev/null 2>"$T/check.err"
check_empty "the example config is valid" "$T/check.err"

# The examples: "block<TAB>command<TAB>shown\nshown..." for every "$ "
# line of the three pages; a block is one .nf/.fi display, whose commands
# run in order in one state directory (record-error, then status).
$PY - "$top_srcdir"/man/*.in >"$T/examples" <<'PYEOF'
import sys
def unroff(s):
    return (s.replace("\\-", "-").replace("\\(aq", "'")
            .replace("\\(dq", '"').replace("\\e", "\\"))
out, block = [], 0
for page in sys.argv[1:]:
    cmd, shown = None, []
    for line in open(page).read().split("\n"):
        if line.startswith(".") or line.startswith("$ "):
            if cmd is not None:
                out.append((block, page.split("/")[-1], cmd, shown))
            cmd, shown = None, []
            if line.startswith("$ "):
                cmd = unroff(line[2:])
            else:
                block += 1
        elif cmd is not None:
            shown.append(unroff(line))
for b, page, c, s in out:
    print("%d\t%s\t%s\t%s" % (b, page, c, "\\n".join(s)))
PYEOF
check_ge "the pages have their examples" 10 "$(wc -l <"$T/examples")"
check_ge "examples with output shown" 4 "$(awk -F'\t' '$4 != ""' "$T/examples" | wc -l)"
check_eq "every example is replicalbctl's (the runner knows no other)" "" \
	"$(cut -f3 "$T/examples" | grep -v '^replicalbctl ')"
n=0
while IFS=$'\t' read -r block page cmd shown; do
	n=$((n + 1))
	export REPLICALB_STATE_DIR=$T/state.$block
	conf=$T/etc/replicalb.conf
	case $cmd in *rr.cluster*) conf=$T/etc/rr.conf ;; esac
	out=$(cd "$T" && REPLICALB_CONFIG=$conf \
		bash -c "${cmd/replicalbctl/$RLBCTL}" 2>"$T/err.$n")
	rc=$?
	[ -n "$out" ] && out=$out$'\n'
	out=$out$(cat "$T/err.$n")
	name="${page%.in}: \$ $cmd"
	if [ -z "$shown" ]; then
		# No output shown: it must work, and say nothing on stderr.
		check_eq "$name: exit 0" 0 "$rc"
		check_empty "$name: no error" "$T/err.$n"
		continue
	fi
	want=$(printf '%b' "$shown")
	got=$(printf '%s\n' "$out" | head -n "$(printf '%s\n' "$want" | wc -l)")
	check_eq "$name" "$want" "$got"
done <"$T/examples"

# The pages render without a warning whatever the prefix: made as the
# Makefile makes them (a break point after each /) with a long one.
long=/opt/a/very/long/installation/prefix/that/goes/on/and/on/for/testing
brk() { printf '%s' "$1" | sed 's|/|/\\\\:|g'; }
for page in replicalb.1 replicalbctl.1 replicalb.conf.5; do
	sed -e "s|@sysconfdir[@]|$(brk "$long/etc")|g" \
		-e "s|@pkglibdir[@]|$(brk "$long/lib/replicalb")|g" \
		-e "s|@datadir[@]|$(brk "$long/share")|g" \
		-e 's|@VERSION[@]|0|g' "$top_srcdir/man/$page.in" >"$T/$page"
	check_eq "$page with a long prefix: no troff warning" "" \
		"$(MANWIDTH=80 man --warnings -l "$T/$page" 2>&1 >/dev/null)"
done
finish
