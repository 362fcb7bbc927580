#!/bin/bash
# dns_hangs_down.sh - dns_hangs.sh's phases "down glueless latency" (see there), a test of
# their own so that make check runs them beside dns_hangs.sh's other
# phases, each in a namespace of its own, instead of one after another.
RLB_DNS_HANGS_PHASES="down glueless latency" exec bash "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/dns_hangs.sh" "$@"
