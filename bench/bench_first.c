/* bench_first.c - what a new process's first resolution of a DNS cluster
 * costs when the host's shared answer is fresh (design.md §15.6: it asks
 * DNS nothing), against a config cluster's first resolution.
 *
 * Usage:
 *   bench_first NAME
 *       one getaddrinfo(NAME) in this (preloaded) process: prints the
 *       nanoseconds it took, the library's start included.
 *   bench_first --share DIR CLUSTER DNSNAME TTL ADDR...
 *       writes cluster CLUSTER's shared answer into state directory DIR,
 *       as a process that asked DNSNAME (dns = "DNSNAME") would have: its
 *       addresses ADDR, answered now with TTL. Linked with the core for
 *       the encoding; not preloaded.
 *
 * scripts/bench runs the first form in fresh processes, the two kinds of
 * cluster interleaved, and takes the ratio of the medians.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bench/bench.h"
#include "engine/engine.h"

static int share(int argc, char **argv)
{
	struct rlb_members_answer a = {.outcome = RLB_DNS_OK};
	char *text = NULL;
	size_t len = 0;
	int n = argc - 6;

	if (n < 1)
		return 2;
	a.m = calloc((size_t)n, sizeof(*a.m));
	if (!a.m)
		return 1;
	a.ttl = (uint32_t)strtoul(argv[5], NULL, 10);
	for (int i = 0; i < n; i++) {
		struct rlb_member *m = &a.m[a.n];

		if (inet_pton(AF_INET, argv[6 + i], m->addr.bytes) != 1)
			return 2;
		m->addr.family = AF_INET;
		m->literal = true;
		m->source = RLB_SOURCE_DNS;
		m->host = argv[6 + i];
		a.n++;
	}
	if (rlb_members_encode(&a, false,
			       rlb_members_shared_key(
				       rlb_hash64(argv[3], strlen(argv[3]), 0),
				       NULL, argv[4]),
			       rlb_now() * 1000, &text, &len) != 0 ||
	    rlb_health_side_write(argv[2], argv[3], RLB_SHARED_EXT, text,
				  len) != 0) {
		fprintf(stderr,
			"bench_first: cannot write the shared answer\n");
		return 1;
	}
	free(text);
	free(a.m);
	return 0;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	double t0, t1;
	int rc;

	if (argc >= 7 && strcmp(argv[1], "--share") == 0)
		return share(argc, argv);
	if (argc != 2) {
		fprintf(stderr, "usage: bench_first NAME | --share DIR CLUSTER "
				"DNSNAME TTL ADDR...\n");
		return 2;
	}
	t0 = bench_now_ns();
	rc = getaddrinfo(argv[1], "9000", &hints, &res);
	t1 = bench_now_ns();
	if (rc != 0) {
		fprintf(stderr, "bench_first: getaddrinfo(%s): %s\n", argv[1],
			gai_strerror(rc));
		return 1;
	}
	freeaddrinfo(res);
	printf("%.0f\n", t1 - t0);
	return 0;
}
