#!/bin/bash
# dns_harness.sh - the DNS test harness alone (tests/integration/lib_dns.sh
# in its self-check mode, DNS_HARNESS_SELFTEST=1): BIND 9 answers in the
# private namespace, UDP and TCP; dynamic updates, 300-record answers
# truncated over UDP and complete over TCP, 1,000 updates in one nsupdate
# session; glibc's getaddrinfo and res_query reach it and nothing else;
# stop, restart (journal kept), freeze; the malformed server's every mode
# (the breaks of SRV answers, and delay, drop, noglue and ttl).
# Needs no part of the library: it proves the ground the DNS membership
# tests (dns_membership.sh, dns_churn.sh) stand on.
export DNS_HARNESS_SELFTEST=1
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_dns.sh"
dns_enter_ns "$@"
dns_setup
