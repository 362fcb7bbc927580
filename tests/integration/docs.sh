#!/bin/bash
# docs.sh - the documents hold together (issue 24): every section number
# cited in the tree is a heading of exactly one document, the index
# (docs/design.md) lists each design heading under the document that
# holds it, every relative Markdown link and anchor resolves
# (tests/helpers/doc_refs.py), and the README stays the page a newcomer
# reads. The checker is shown to fail on a copy of the tree broken in
# each of those ways.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup nocanary

REFS=$top_srcdir/tests/helpers/doc_refs.py

out=$("$PY" "$REFS" "$top_srcdir" 2>&1)
rc=$?
check_eq "every citation, index entry and link of the tree resolves" 0 "$rc"
[ "$rc" -eq 0 ] || printf '%s\n' "$out" | head -n 20
check_match "the design documents' sections were read" \
	'^[0-9]{3,} citations of [0-9]{2,} sections checked$' "$(printf '%s\n' "$out" | tail -n 1)"

# A copy of what the checker reads, to break.
copy()
{
	rm -rf "$T/tree"
	mkdir -p "$T/tree"
	cp -r "$top_srcdir/docs" "$top_srcdir/README.md" "$T/tree/"
	mkdir -p "$T/tree/src"
}

broken()
{
	local name=$1 want=$2 got
	got=$("$PY" "$REFS" "$T/tree" 2>&1)
	check "$name: the checker fails" test $? -eq 1
	check_match "$name: it names the fault" "$want" "$got"
}

# Section numbers no document has, spelt so that this file cites none.
none=99
copy
printf '/* see design.md §12.%s */\n' "$none" >"$T/tree/src/x.c"
broken "a citation of no section" "^src/x.c:1: §12.$none cites no heading"


copy
printf '/* clickhouse.md §5.%s */\n' "$none" >"$T/tree/src/x.c"
broken "a citation of clickhouse.md" "^src/x.c:1: §5.$none cites no heading of clickhouse.md"

copy
sed -i "s/^### §12.12 /### §12.$none /" "$T/tree/docs/state-format.md"
broken "a heading renumbered" "§12.$none is not in the index"

copy
sed -i 's/^## §15 /### §3.1 /' "$T/tree/docs/dns.md"
broken "a heading twice" '§3.1 is also a heading of'

copy
sed -i '0,/\[contract.md\](contract.md)/s//[contract.md](contrct.md)/' "$T/tree/docs/design.md"
broken "a link to no file" 'link to contrct.md: no such file'

copy
printf '\nSee [the vectors](clickhouse.md#99-test-vectors).\n' >>"$T/tree/docs/dns.md"
broken "a link to no heading" 'link to clickhouse.md#99-test-vectors: no such heading'

# The README is the page a newcomer reads: the pitch, the tour, the bad
# day, the limits in brief, where to go next; the reference lives in the
# man pages and docs/ (issue 24: about 200 lines).
lines=$(wc -l <"$top_srcdir/README.md")
check_le "the README stays short ($lines lines)" 260 "$lines"
for doc in docs/design.md docs/contract.md man/replicalb.conf.5.in man/replicalbctl.1.in; do
	check "the README points to ${doc%.in}" grep -q "${doc%.in}" "$top_srcdir/README.md"
done

finish
