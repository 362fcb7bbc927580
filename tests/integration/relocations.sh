#!/bin/bash
# relocations.sh - the library never binds to its own hooks: no dynamic
# relocation of libreplicalb.so names a symbol it exports. Such a
# relocation means code inside the library calls an exported name (say
# close()) and so lands in our own hook instead of libc; internal calls go
# through the libc seam, rlb_libc()->close(...). The exported names come
# from the version script, src/libreplicalb.map.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup nocanary

command -v readelf >/dev/null 2>&1 || skip "readelf (binutils) not installed"

# RLB_LIB may start with a sanitizer runtime; the library is the last word.
lib=${RLB_LIB##* }
map=$top_srcdir/src/preload/libreplicalb.map

# words LINES : the lines joined by single spaces.
words()
{
	printf '%s\n' "$1" | paste -sd ' ' -
}

# The names of every global: section of every version node, sorted;
# comments dropped. A glob comes out as "PATTERN glob": the check below
# needs names.
exported=$(awk '
	{ text = text " " $0 }
	END {
		while ((i = index(text, "/*")) > 0) {
			rest = substr(text, i + 2)
			j = index(rest, "*/")
			text = substr(text, 1, i - 1) " " (j ? substr(rest, j + 2) : "")
		}
		gsub(/[{};]/, " & ", text)
		gsub(/global[ \t]*:/, " global: ", text)
		gsub(/local[ \t]*:/, " local: ", text)
		n = split(text, tok, /[ \t]+/)
		for (k = 1; k <= n; k++) {
			t = tok[k]
			if (t == "global:")
				g = 1
			else if (t == "local:" || t == "}")
				g = 0
			else if (g && t != "" && t != ";" && t != "{")
				print (t ~ /[*?\[]/ ? "PATTERN " : "") t
		}
	}' "$map" | sort -u)

if [ -z "$exported" ]; then
	fail "global: names read from $map" "none found"
	finish
fi
patterns=$(printf '%s\n' "$exported" | sed -n 's/^PATTERN //p')
if [ -n "$patterns" ]; then
	fail "the version script names symbols, not patterns" \
		"$(words "$patterns")"
	finish
fi
pass "global: names read from $map: $(words "$exported")"

# The parse is right when every name read is a defined dynamic symbol.
nm -D --defined-only "$lib" | awk '{ sub(/@.*/, "", $NF); print $NF }' |
	sort -u >"$T/defined"
for sym in $exported; do
	grep -qxF -- "$sym" "$T/defined" ||
		fail "$sym (from the map) is exported by the library"
done

# Relocation lines: OFFSET INFO TYPE [VALUE NAME [+ ADDEND]]; keep
# "NAME TYPE" for those against a symbol.
if ! readelf -rW "$lib" >"$T/relocs" 2>"$T/readelf.err"; then
	fail "readelf -rW $lib" "$(cat "$T/readelf.err")"
	finish
fi
awk '$3 ~ /^R_/ && NF >= 5 { n = $5; sub(/@.*/, "", n); print n, $3 }' \
	"$T/relocs" >"$T/named"
check "readelf shows the library's relocations" grep -q R_ "$T/relocs"

for sym in $exported; do
	types=$(awk -v s="$sym" '$1 == s { print $2 }' "$T/named" |
		sort -u | tr '\n' ' ')
	if [ -z "$types" ]; then
		pass "no dynamic relocation against exported $sym"
	else
		fail "no dynamic relocation against exported $sym" \
			"${types% }: code in the library calls (or takes the address of) $sym and binds to its own hook; call rlb_libc()->$sym instead"
	fi
done

finish
