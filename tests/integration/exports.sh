#!/bin/bash
# exports.sh - libreplicalb.so exports the hooks and nothing else
# (design.md §10), and loads into a program without a word.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup nocanary

expected="close
close_range
connect
dup
dup2
dup3
execl
execle
execlp
execv
execve
execvp
execvpe
fcntl
fcntl64
fexecve
getaddrinfo
gethostbyname
gethostbyname2
gethostbyname2_r
gethostbyname_r
getsockopt
recvmsg
sendmsg
setsockopt
socket"

# Version-node entries ("A" symbols) are allowed; everything else counts.
nm -D --defined-only "$RLB_LIB" >"$T/nm.out" 2>"$T/nm.err"
check "nm -D reads the library" test -s "$T/nm.out"
exported=$(awk '$(NF-1) != "A" { sub(/@.*/, "", $NF); print $NF }' \
	"$T/nm.out" | sort -u)
check_eq "exported symbols are exactly the hooks" "$expected" "$exported"

for sym in $expected; do
	type=$(awk -v s="$sym" '{ n = $NF; sub(/@.*/, "", n) }
		n == s { print $(NF-1) }' "$T/nm.out")
	check_eq "$sym is an exported function" "T" "$type"
done

# Nothing from libconfig or the core leaks: the only undefined symbols we
# may need from elsewhere are libc's, libconfig's, libdl's and pthread's,
# and none of ours is weak-exported by mistake.
leaked=$(nm -D --defined-only "$RLB_LIB" | awk '$(NF-1) != "A"' |
	grep -E ' (rlb_|config_|_?libconfig)' || true)
check_eq "no internal symbol exported" "" "$leaked"

# The library loads into a program and, unconfigured, says nothing.
preload /bin/true 2>"$T/true.err"
check_eq "preloaded /bin/true exits 0" "0" "$?"
check_empty "preloaded /bin/true is silent" "$T/true.err"

finish
