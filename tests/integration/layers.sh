#!/bin/bash
# layers.sh - the folders of src/ are the layers (design.md §10.1): a file
# includes only headers of its own folder and of folders below it, the
# products (preload, ctl and the NSS module) never include each
# other, each folder has one header that the others include, no file is
# over 1,000 lines; and the binaries hold only their own layers: no CLI
# code in libreplicalb.so, no preload code in replicalbctl.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup nocanary

# Each folder and the folders it may include, itself first.
declare -A below=(
	[base]="base"
	[model]="model base"
	[state]="state model base"
	[engine]="engine state model base"
	[session]="session engine state model base"
	[preload]="preload session engine state model base"
	[nss]="nss session engine state model base"
	[ctl]="ctl session engine state model base"
)

bad=
for dir in "$top_srcdir"/src/*/; do
	layer=$(basename "$dir")
	if [ -z "${below[$layer]:-}" ]; then
		bad+="src/$layer is no known layer; "
		continue
	fi
	[ -f "$dir/$layer.h" ] || bad+="src/$layer has no $layer.h; "
	for f in "$dir"*.[ch]; do
		while read -r inc; do
			case $inc in
			config.h) continue ;; # autoconf's, from the build
			*/*) ;;
			*) bad+="${f#"$top_srcdir"/}: \"$inc\" names no folder; "; continue ;;
			esac
			to=${inc%%/*}
			ok=
			for l in ${below[$layer]}; do [ "$l" = "$to" ] && ok=1; done
			[ -n "$ok" ] || bad+="${f#"$top_srcdir"/} includes $inc; "
			# Across folders only the folder's one header.
			if [ "$to" != "$layer" ] && [ "$inc" != "$to/$to.h" ]; then
				bad+="${f#"$top_srcdir"/} includes $inc, not $to/$to.h; "
			fi
		done < <(sed -n 's/^#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f")
	done
done
check_eq "every include points down, products apart, one header a folder" "" "$bad"

# Each file one module a reader can hold in their head.
long=
for f in "$top_srcdir"/src/*/*.[ch]; do
	n=$(wc -l <"$f")
	[ "$n" -le 1000 ] || long+="${f#"$top_srcdir"/} ($n lines) "
done
check_eq "no source file over 1,000 lines" "" "$long"

# A layer's header includes exactly the one below it.
check_eq "model.h builds on base.h" 'base/base.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/model/model.h")"
check_eq "state.h builds on model.h" 'model/model.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/state/state.h")"
check_eq "engine.h builds on state.h" 'state/state.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/engine/engine.h")"
check_eq "session.h builds on engine.h" 'engine/engine.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/session/session.h")"
check_eq "preload.h builds on session.h" 'session/session.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/preload/preload.h")"
check_eq "ctl.h builds on session.h" 'session/session.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/ctl/ctl.h")"
check_eq "nss.h builds on session.h" 'session/session.h' \
	"$(sed -n 's/^#include "\(.*\)"/\1/p' "$top_srcdir/src/nss/nss.h")"

lib=${RLB_LIB##* }
ctl=$top_builddir/replicalbctl
[ -x "$ctl" ] && [ -x "$top_builddir/.libs/replicalbctl" ] &&
	ctl=$top_builddir/.libs/replicalbctl
# Function symbols (local ones included) by their module prefix.
syms() { nm "$1" 2>/dev/null | awk '$2 ~ /^[tT]$/ { print $3 }'; }
check_ge "libreplicalb.so has a symbol table" 50 "$(syms "$lib" | wc -l)"
check_eq "no CLI code in libreplicalb.so" "" \
	"$(syms "$lib" | grep -E '^(rlb_probe|cmd_|probe_)' | head -5 | tr '\n' ' ')"
check_ge "replicalbctl has a symbol table" 50 "$(syms "$ctl" | wc -l)"
check_eq "no preload code in replicalbctl" "" \
	"$(syms "$ctl" | grep -E '^rlb_(track|resolve|runtime|dnscache)_' | head -5 | tr '\n' ' ')"
nss=$top_builddir/.libs/libnss_replicalb.so.2
check_ge "libnss_replicalb.so.2 has a symbol table" 50 "$(syms "$nss" | wc -l)"
check_eq "no preload or CLI code in the NSS module" "" \
	"$(syms "$nss" | grep -E '^(rlb_(track|resolve|runtime|dnscache|probe)_|cmd_)' | head -5 | tr '\n' ' ')"
check_eq "the NSS module exports glibc's four entry points, nothing else" \
	"_nss_replicalb_gethostbyname2_r _nss_replicalb_gethostbyname3_r _nss_replicalb_gethostbyname4_r _nss_replicalb_gethostbyname_r" \
	"$(nm -D --defined-only "$nss" | awk '$2 == "T" { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')"
finish
