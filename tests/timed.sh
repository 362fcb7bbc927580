#!/bin/bash
# timed.sh - make check's LOG_COMPILER: run one test (a .sh with bash, a
# program as itself) and end its log with the time it took, as
# "# elapsed: N ms", from which scripts/test names the slowest tests.
t0=$(date +%s%N)
case $1 in
*.sh) bash "$@" ;;
*) "$@" ;;
esac
rc=$?
echo "# elapsed: $((($(date +%s%N) - t0) / 1000000)) ms"
exit "$rc"
