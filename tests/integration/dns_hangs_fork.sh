#!/bin/bash
# dns_hangs_fork.sh - dns_hangs.sh's phases "fork cancel" (see there), a test of
# their own so that make check runs them beside dns_hangs.sh's other
# phases, each in a namespace of its own, instead of one after another.
RLB_DNS_HANGS_PHASES="fork cancel" exec bash "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/dns_hangs.sh" "$@"
