/* test_resolve.c - addrinfo lists and hostents for virtual names, the
 * DNS cache, and resolution failures counted as replica errors. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "preload/preload.h"

/*
 * Add errors at the cluster's current decay time T, where no decay is
 * owed: for tests of other behaviour than the decay refinement.
 */
static void add_errors(struct rlb_cluster *c, size_t i, uint64_t n)
{
	rlb_health_add_errors(c, i, n, rlb_health_decay_time(c));
}

static char tmpdir[] = "/tmp/rlb-test-resolve-XXXXXX";
static struct rlb_config *cfg; /* snap->cfg */
static struct rlb_snapshot *snap;

/* The real resolver, and a fake one in front of it for *.test names. */
static int (*real_gai)(const char *, const char *, const struct addrinfo *,
		       struct addrinfo **);
static int fake_calls;

#define WIDE_ADDRS 64 /* addresses of wide.test */

/* An answer of WIDE_ADDRS IPv4 addresses, in glibc's layout. */
static int wide_answer(struct addrinfo **res)
{
	struct addrinfo *head = NULL, **tail = &head;

	for (int i = 0; i < WIDE_ADDRS; i++) {
		struct addrinfo *ai =
			calloc(1, sizeof(*ai) + sizeof(struct sockaddr_in));
		struct sockaddr_in *in;

		if (!ai) {
			rlb_libc()->freeaddrinfo(head);
			return EAI_MEMORY;
		}
		in = (void *)(ai + 1);
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(0x7f000100 + i);
		ai->ai_family = AF_INET;
		ai->ai_socktype = SOCK_STREAM;
		ai->ai_protocol = IPPROTO_TCP;
		ai->ai_addrlen = sizeof(*in);
		ai->ai_addr = (struct sockaddr *)in;
		*tail = ai;
		tail = &ai->ai_next;
	}
	*res = head;
	return 0;
}

/*
 * Names that fail in some families. The v4-* names have an IPv4 address
 * only, and their IPv6 question fails as it may with no DNS server in
 * reach while /etc/hosts knows the name (EAI_AGAIN), or as a resolver
 * says "no such address" (the others). The gone-* names fail in every
 * family.
 */
static const struct family_failure {
	const char *name;
	int v6_error;	  /* answer to an AF_INET6 question */
	int other_error;  /* to any other question; 0: addr */
	const char *addr; /* the IPv4 address */
} family_failures[] = {
	{"v4-again.test", EAI_AGAIN, 0, "127.0.0.51"},
	{"v4-noname.test", EAI_NONAME, 0, "127.0.0.52"},
	{"v4-nodata.test", EAI_NODATA, 0, "127.0.0.53"},
	{"v4-fail.test", EAI_FAIL, 0, "127.0.0.54"},
	{"gone-again.test", EAI_AGAIN, EAI_AGAIN, NULL},
	{"gone-noname.test", EAI_NONAME, EAI_NONAME, NULL},
};

static int fake_gai(const char *node, const char *service,
		    const struct addrinfo *hints, struct addrinfo **res)
{
	for (size_t i = 0;
	     node && i < sizeof(family_failures) / sizeof(family_failures[0]);
	     i++) {
		const struct family_failure *ff = &family_failures[i];

		if (strcmp(node, ff->name) != 0)
			continue;
		fake_calls++;
		if (hints && hints->ai_family == AF_INET6)
			return ff->v6_error;
		if (ff->other_error)
			return ff->other_error;
		return real_gai(ff->addr, service, hints, res);
	}
	/* Any service, even one no real service looks like. */
	if (node && strcmp(node, "svc.test") == 0) {
		fake_calls++;
		return real_gai("127.0.0.44", NULL, hints, res);
	}
	if (node && strcmp(node, "wide.test") == 0) {
		fake_calls++;
		return wide_answer(res);
	}
	if (node && strcmp(node, "broken.test") == 0) {
		fake_calls++;
		return EAI_AGAIN;
	}
	if (node && strcmp(node, "r2.test") == 0) {
		fake_calls++;
		return real_gai("127.0.0.22", service, hints, res);
	}
	return real_gai(node, service, hints, res);
}

static const char config_text[] =
	"clusters = (\n"
	"  { name = \"db.cluster\"; load_balancing = \"in_order\";\n"
	"    replicas = ( { host = \"r1\"; address = [\"127.0.0.11\", "
	"\"::1\"]; },\n"
	"                 \"r2.test:7002\",\n"
	"                 { host = \"r3\"; address = \"127.0.0.33\"; port = "
	"7003; } ); },\n"
	"  { name = \"bad.cluster\"; load_balancing = \"in_order\";\n"
	"    replicas = ( \"broken.test\", \"r2.test\" ); },\n"
	"  { name = \"dead.cluster\"; replicas = ( \"broken.test\" ); },\n"
	"  { name = \"lit.cluster\"; replicas = ( \"127.0.0.11\",\n"
	"    { host = \"six\"; address = \"::1\"; } ); load_balancing = "
	"\"in_order\"; },\n"
	"  { name = \"svc.cluster\"; replicas = ( \"svc.test\" ); },\n"
	"  { name = \"wide.cluster\"; replicas = ( \"wide.test\" ); },\n"
	"  { name = \"v4.cluster\"; load_balancing = \"in_order\";\n"
	"    replicas = ( \"gone-again.test\", \"gone-noname.test\",\n"
	"      \"v4-again.test\", \"v4-noname.test\", \"v4-nodata.test\",\n"
	"      \"v4-fail.test\" ); },\n"
	"  { name = \"lr.cluster\"; load_balancing = \"least_request\";\n"
	"    load_balancing_least_request_choice_count = 3;\n"
	"    replicas = ( \"127.0.0.41\", \"127.0.0.42\", \"127.0.0.43\" ); }\n"
	");\n";

static int setup(void **state)
{
	struct rlb_diag diag = {0};

	if (!mkdtemp(tmpdir))
		return -1;
	if (rlb_config_parse_string(config_text, "resolve.conf", &cfg, &diag) !=
	    0) {
		for (size_t i = 0; i < diag.n; i++)
			fprintf(stderr, "%s\n", diag.msgs[i]);
		rlb_diag_free(&diag);
		return -1;
	}
	free(cfg->state_dir);
	cfg->state_dir = strdup(tmpdir);
	snap = rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT, true);
	if (!snap)
		return -1;
	real_gai = rlb_libc()->getaddrinfo;
	rlb_libc()->getaddrinfo = fake_gai;
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	rlb_libc()->getaddrinfo = real_gai;
	rlb_snapshot_put(snap);
	rlb_dnscache_flush();
	/* Segments outlive the directory that names them. */
	rlb_health_remove_state(&(struct rlb_config){.state_dir = tmpdir}, true,
				NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static int reset_each(void **state)
{
	for (size_t i = 0; i < cfg->nclusters; i++)
		rlb_health_reset(&cfg->clusters[i], SIZE_MAX);
	rlb_dnscache_flush();
	fake_calls = 0;
	return 0;
}

/* "addr:port" of one node. */
static const char *node_str(const struct addrinfo *ai, char *buf, size_t len)
{
	char host[64];
	int port;

	if (ai->ai_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ai->ai_addr;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const void *)ai->ai_addr;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%s:%d", host, port);
	return buf;
}

/* The whole list as "a:p b:p ...". */
static void list_str(const struct addrinfo *ai, char *out, size_t len)
{
	char one[80];

	out[0] = '\0';
	for (; ai; ai = ai->ai_next) {
		if (out[0])
			strncat(out, " ", len - strlen(out) - 1);
		strncat(out, node_str(ai, one, sizeof(one)),
			len - strlen(out) - 1);
	}
}

/*
 * least_request through getaddrinfo and gethostbyname_r, answers built on
 * the stack (3 replicas): the replica with the fewest connections in
 * flight comes first (a full scan), the busiest last.
 */
static void test_resolve_least_request_by_load(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "lr.cluster");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	struct hostent he, *hp = NULL;
	char out[512], buf[1024], a[INET_ADDRSTRLEN];
	int herr;

	assert_non_null(c);
	for (uint64_t ino = 1; ino <= 3; ino++)
		assert_true(rlb_health_conn_take(c, 0, 7000 + ino));
	assert_true(rlb_health_conn_take(c, 2, 7100));
	for (int round = 0; round < 20; round++) {
		assert_int_equal(rlb_resolve_getaddrinfo(c, "80", &hints, &res),
				 0);
		list_str(res, out, sizeof(out));
		assert_string_equal(
			out, "127.0.0.42:80 127.0.0.43:80 127.0.0.41:80");
		rlb_libc()->freeaddrinfo(res);
	}
	assert_int_equal(rlb_resolve_gethostbyname(c, "lr.cluster", AF_INET,
						   &he, buf, sizeof(buf), &hp,
						   &herr),
			 0);
	inet_ntop(AF_INET, hp->h_addr_list[0], a, sizeof(a));
	assert_string_equal(a, "127.0.0.42");
	for (uint64_t ino = 1; ino <= 3; ino++)
		rlb_health_conn_drop(c, 7000 + ino);
	rlb_health_conn_drop(c, 7100);
}

static void test_resolve_order_and_ports(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "DB.Cluster.");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char out[512];

	assert_non_null(c);
	assert_int_equal(rlb_resolve_getaddrinfo(c, "9000", &hints, &res), 0);
	list_str(res, out, sizeof(out));
	/* r1's two pinned addresses with the caller's port, r2 and r3 with
	 * their own ports, in config order (in_order). */
	assert_string_equal(out, "127.0.0.11:9000 ::1:9000 127.0.0.22:7002 "
				 "127.0.0.33:7003");
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		assert_int_equal(ai->ai_socktype, SOCK_STREAM);
		assert_int_equal(ai->ai_protocol, IPPROTO_TCP);
	}
	assert_null(res->ai_canonname);
	/* Our list is in glibc's layout: libc's own freeaddrinfo frees it. */
	rlb_libc()->freeaddrinfo(res);
}

static void test_resolve_family_filter_and_named_service(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct addrinfo hints = {.ai_family = AF_INET6,
				 .ai_socktype = SOCK_STREAM},
			*res = NULL;
	char out[512];

	assert_int_equal(rlb_resolve_getaddrinfo(c, "http", &hints, &res), 0);
	list_str(res, out, sizeof(out));
	assert_string_equal(out, "::1:80");
	rlb_libc()->freeaddrinfo(res);

	hints.ai_family = AF_INET;
	assert_int_equal(rlb_resolve_getaddrinfo(c, NULL, &hints, &res), 0);
	list_str(res, out, sizeof(out));
	assert_string_equal(out, "127.0.0.11:0 127.0.0.22:7002 "
				 "127.0.0.33:7003");
	rlb_libc()->freeaddrinfo(res);
}

static void test_resolve_canonname_is_first_replica(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_CANONNAME},
			*res = NULL;

	add_errors(c, 0, 3);
	assert_int_equal(rlb_resolve_getaddrinfo(c, "1", &hints, &res), 0);
	assert_non_null(res->ai_canonname);
	/* r1 has errors now, so r2 leads. */
	assert_string_equal(res->ai_canonname, "r2.test");
	rlb_libc()->freeaddrinfo(res);
}

static void test_resolve_null_hints_any_socktype(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct addrinfo *res = NULL;
	int stream = 0, dgram = 0;

	assert_int_equal(rlb_resolve_getaddrinfo(c, "53", NULL, &res), 0);
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		stream += ai->ai_socktype == SOCK_STREAM;
		dgram += ai->ai_socktype == SOCK_DGRAM;
	}
	/* As libc: every address once per socket type. */
	assert_true(stream >= 3);
	assert_int_equal(stream, dgram);
	rlb_libc()->freeaddrinfo(res);
}

static void test_resolve_failure_counts_once_and_is_cached(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "bad.cluster");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char out[256];

	assert_int_equal(rlb_resolve_getaddrinfo(c, "80", &hints, &res), 0);
	list_str(res, out, sizeof(out));
	/* broken.test is left out and counts one error. */
	assert_string_equal(out, "127.0.0.22:80");
	rlb_libc()->freeaddrinfo(res);
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 1);
	assert_int_equal(fake_calls, 2);

	/* Within dns_cache_ttl neither name is asked again. */
	assert_int_equal(rlb_resolve_getaddrinfo(c, "80", &hints, &res), 0);
	rlb_libc()->freeaddrinfo(res);
	assert_int_equal(fake_calls, 2);
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 1);
}

static void test_resolve_all_fail_returns_libc_error(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "dead.cluster");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct addrinfo *res = (struct addrinfo *)0x1;

	assert_int_equal(rlb_resolve_getaddrinfo(c, "80", &hints, &res),
			 EAI_AGAIN);
	assert_ptr_equal(res, (struct addrinfo *)0x1);
}

static void test_resolve_hostent_order(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct hostent he, *result = NULL;
	char buf[1024], a[3][INET_ADDRSTRLEN];
	int herr = -1;

	assert_int_equal(rlb_resolve_gethostbyname(c, "db.cluster", AF_INET,
						   &he, buf, sizeof(buf),
						   &result, &herr),
			 0);
	assert_ptr_equal(result, &he);
	assert_int_equal(herr, NETDB_SUCCESS);
	assert_string_equal(he.h_name, "r1");
	assert_string_equal(he.h_aliases[0], "db.cluster");
	assert_null(he.h_aliases[1]);
	assert_int_equal(he.h_addrtype, AF_INET);
	assert_int_equal(he.h_length, 4);
	for (int i = 0; i < 3; i++)
		inet_ntop(AF_INET, he.h_addr_list[i], a[i], sizeof(a[i]));
	assert_null(he.h_addr_list[3]);
	assert_string_equal(a[0], "127.0.0.11");
	assert_string_equal(a[1], "127.0.0.22");
	assert_string_equal(a[2], "127.0.0.33");
	/* Everything lives in the caller's buffer. */
	assert_true((char *)he.h_addr_list >= buf &&
		    (char *)he.h_addr_list < buf + sizeof(buf));
	assert_true(he.h_name >= buf && he.h_name < buf + sizeof(buf));
}

static void test_resolve_hostent_erange(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct hostent he, *result = &he;
	char buf[16];
	int herr = 0;

	assert_int_equal(rlb_resolve_gethostbyname(c, "db.cluster", AF_INET,
						   &he, buf, sizeof(buf),
						   &result, &herr),
			 ERANGE);
	assert_null(result);
	assert_int_equal(herr, NETDB_INTERNAL);
}

/* Whether p lies in [buf, buf + len). */
static bool within(const void *p, const char *buf, size_t len)
{
	return (const char *)p >= buf && (const char *)p < buf + len;
}

/*
 * gethostbyname_r into a buffer at any address, as glibc's: the pointer
 * arrays pointer-aligned (UBSan: misaligned stores otherwise) and the
 * addresses aligned for their struct, everything inside [buf, buf +
 * buflen), and ERANGE exactly below the length that holds the answer at
 * that address. The buffer ends where its malloc block ends, so ASan
 * sees any write past buflen.
 */
static void test_resolve_hostent_unaligned_buffer(void **state)
{
	static const int families[] = {AF_INET, AF_INET6};
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");

	for (size_t f = 0; f < 2; f++) {
		int af = families[f];
		size_t fits[8];

		for (size_t k = 0; k < 8; k++) {
			fits[k] = 0;
			for (size_t len = 0; len <= 256 && !fits[k]; len++) {
				size_t size = k + len;
				char *block = malloc(size ? size : 1), *buf;
				struct hostent he, *h = &he;
				int herr = 0, rc;

				assert_non_null(block);
				buf = block + k;
				errno = 0;
				rc = rlb_resolve_gethostbyname(c, "db.cluster",
							       af, &he, buf,
							       len, &h, &herr);
				if (rc == ERANGE) {
					assert_null(h);
					assert_int_equal(herr, NETDB_INTERNAL);
					assert_int_equal(errno, ERANGE);
					free(block);
					continue;
				}
				assert_int_equal(rc, 0);
				assert_ptr_equal(h, &he);
				fits[k] = len;
				assert_int_equal((uintptr_t)h->h_addr_list %
							 alignof(char *),
						 0);
				assert_int_equal((uintptr_t)h->h_aliases %
							 alignof(char *),
						 0);
				assert_true(within(h->h_addr_list, buf, len));
				assert_true(within(h->h_aliases, buf, len));
				assert_true(within(h->h_name, buf, len));
				assert_string_equal(h->h_aliases[0],
						    "db.cluster");
				assert_true(within(h->h_aliases[0], buf, len));
				assert_null(h->h_aliases[1]);
				for (char **a = h->h_addr_list; *a; a++) {
					assert_true(within(*a, buf, len));
					assert_int_equal(
						(uintptr_t)*a %
							(af == AF_INET
								 ? alignof(struct
									   in_addr)
								 : alignof(struct
									   in6_addr)),
						0);
				}
				if (af == AF_INET) {
					/* As programs read it. */
					struct in_addr *a =
						(struct in_addr *)
							h->h_addr_list[2];

					assert_int_equal(ntohl(a->s_addr),
							 0x7f000021);
					assert_null(h->h_addr_list[3]);
				}
				free(block);
			}
			assert_true(fits[k] > 0);
			/* Only the slack to the next pointer boundary grows
			 * the length needed. */
			assert_true(fits[k] - fits[0] < alignof(char *));
		}
	}
}

static void test_resolve_hostent_v6(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct hostent he, *result = NULL;
	char buf[1024], a[INET6_ADDRSTRLEN];
	int herr = 0;

	assert_int_equal(rlb_resolve_gethostbyname(c, "db.cluster", AF_INET6,
						   &he, buf, sizeof(buf),
						   &result, &herr),
			 0);
	assert_non_null(result);
	assert_int_equal(he.h_length, 16);
	inet_ntop(AF_INET6, he.h_addr_list[0], a, sizeof(a));
	assert_string_equal(a, "::1");
	assert_null(he.h_addr_list[1]);
}

static void test_resolve_static_hostent(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");
	struct hostent *h;
	char a[INET_ADDRSTRLEN];

	h = rlb_resolve_gethostbyname_static(c, "db.cluster", AF_INET);
	assert_non_null(h);
	assert_string_equal(h->h_name, "r1");
	inet_ntop(AF_INET, h->h_addr_list[2], a, sizeof(a));
	assert_string_equal(a, "127.0.0.33");
	h_errno = 0;
	h = rlb_resolve_gethostbyname_static(
		rlb_config_find(cfg, "dead.cluster"), "dead.cluster", AF_INET);
	assert_null(h);
	assert_int_equal(h_errno, HOST_NOT_FOUND);
}

/* Flatten a list into comparable text (family, type, proto, address). */
static void list_full(const struct addrinfo *ai, char *out, size_t len)
{
	char one[128], addr[80];

	out[0] = '\0';
	for (; ai; ai = ai->ai_next) {
		snprintf(one, sizeof(one), "[%d %d %d %s]", ai->ai_family,
			 ai->ai_socktype, ai->ai_protocol,
			 node_str(ai, addr, sizeof(addr)));
		strncat(out, one, len - strlen(out) - 1);
	}
}

/*
 * For IP-literal replicas the library answers without libc; for every
 * combination of hints that answer must be exactly libc's answer for the
 * same literals (the concatenation, in replica order).
 */
/*
 * The snapshot's word per replica for the hot path: a replica whose one
 * literal is IPv4 (its port, or 0 for the caller's), nothing for the
 * others; all_literal only when every replica has literals.
 */
static void test_resolve_snapshot_fast_words(void **state)
{
	struct rlb_cluster *db = rlb_config_find(cfg, "db.cluster");
	struct rlb_cluster *lit = rlb_config_find(cfg, "lit.cluster");
	uint32_t a;

	assert_non_null(db);
	assert_non_null(lit);
	assert_non_null(db->view);
	assert_non_null(lit->view);
	assert_non_null(db->view->fast_v4);
	/* r1: two literals; r2: a name; r3: 127.0.0.33 port 7003. */
	assert_int_equal(db->view->fast_v4[0], 0);
	assert_int_equal(db->view->fast_v4[1], 0);
	inet_pton(AF_INET, "127.0.0.33", &a);
	assert_int_equal(db->view->fast_v4[2],
			 RLB_FAST_V4 | (uint64_t)htons(7003) << 32 | a);
	assert_false(db->view->all_literal);
	/* 127.0.0.11 (the caller's port), and ::1 (not IPv4). */
	inet_pton(AF_INET, "127.0.0.11", &a);
	assert_int_equal(lit->view->fast_v4[0], RLB_FAST_V4 | a);
	assert_int_equal(lit->view->fast_v4[1], 0);
	assert_true(lit->view->all_literal);
	assert_non_null(lit->view->track_stamps);
}

static void test_resolve_literal_answers_match_libc(void **state)
{
	static const int families[] = {AF_UNSPEC, AF_INET, AF_INET6};
	static const int types[] = {0, SOCK_STREAM, SOCK_DGRAM, SOCK_RAW,
				    SOCK_SEQPACKET};
	static const int protos[] = {0, IPPROTO_TCP, IPPROTO_UDP};
	static const int flags[] = {0,
				    AI_NUMERICSERV,
				    AI_V4MAPPED,
				    AI_V4MAPPED | AI_ALL,
				    AI_ADDRCONFIG,
				    AI_PASSIVE};
	static const char *const services[] = {NULL,	"80",	"0080",
					       "99999", "http", ""};
	static const char *const literals[] = {"127.0.0.11", "::1"};
	struct rlb_cluster *c = rlb_config_find(cfg, "lit.cluster");
	char got[2048], want[2048], part[1024];
	size_t combos = 0;

	assert_non_null(c);
	for (size_t f = 0; f < 3; f++)
		for (size_t t = 0; t < 5; t++)
			for (size_t p = 0; p < 3; p++)
				for (size_t fl = 0; fl < 6; fl++)
					for (size_t sv = 0; sv < 6; sv++) {
						struct addrinfo hints = {
							.ai_family =
								families[f],
							.ai_socktype = types[t],
							.ai_protocol =
								protos[p],
							.ai_flags = flags[fl]};
						struct addrinfo *res = NULL;
						int rc, want_rc = EAI_NONAME,
							ok = 0;

						want[0] = '\0';
						for (size_t l = 0; l < 2; l++) {
							struct addrinfo *r =
								NULL;
							int lrc = real_gai(
								literals[l],
								services[sv],
								&hints, &r);

							if (lrc) {
								want_rc = lrc;
								continue;
							}
							ok = 1;
							list_full(r, part,
								  sizeof(part));
							strncat(want, part,
								sizeof(want) -
									strlen(want) -
									1);
							rlb_libc()
								->freeaddrinfo(
									r);
						}
						rc = rlb_resolve_getaddrinfo(
							c, services[sv], &hints,
							&res);
						if (ok) {
							assert_int_equal(rc, 0);
							list_full(res, got,
								  sizeof(got));
							rlb_libc()
								->freeaddrinfo(
									res);
							if (strcmp(got, want) !=
							    0)
								fail_msg(
									"family"
									" %d "
									"type "
									"%d "
									"proto "
									"%d "
									"flags "
									"%#x "
									"servic"
									"e %s: "
									"got "
									"%s, "
									"libc "
									"%s",
									families[f],
									types[t],
									protos[p],
									flags[fl],
									services[sv]
										? services[sv]
										: "NULL",
									got,
									want);
						} else {
							assert_int_equal(
								rc, want_rc);
						}
						combos++;
					}
	assert_int_equal(combos, 3 * 5 * 3 * 6 * 6);
}

/* The error counts of c's replicas in config order, as "1 1 0 0". */
static void errors_str(struct rlb_cluster *c, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < c->nreplicas; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%llu",
			 i ? " " : "",
			 (unsigned long long)rlb_health_errors(c, i, 0, false));
}

/*
 * An IPv6 question about replicas that have IPv4 addresses only is not
 * their fault, however the IPv6 question fails (design.md §5.5): only a
 * name that resolves in no family at all counts, once. Before, each
 * EAI_AGAIN (and EAI_FAIL) counted, so in_order ranked the healthy
 * replicas last.
 */
static void test_resolve_family_failure_not_counted(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "v4.cluster");
	struct addrinfo hints = {.ai_family = AF_INET6,
				 .ai_socktype = SOCK_STREAM},
			*res = NULL;
	struct hostent he, *h;
	char out[256], buf[1024];
	int herr, calls;

	assert_non_null(c);
	/* Twelve questions, each new to the cache (as a program connecting
	 * to twelve ports asks). No replica has an IPv6 address: each
	 * answer is the last failure's code. */
	for (int i = 0; i < 12; i++) {
		char service[16];

		snprintf(service, sizeof(service), "%d", 9000 + i);
		assert_int_not_equal(
			rlb_resolve_getaddrinfo(c, service, &hints, &res), 0);
	}
	errors_str(c, out, sizeof(out));
	/* The last four, the v4-* replicas, are not at fault. */
	assert_string_equal(strchr(strchr(out, ' ') + 1, ' '), " 0 0 0 0");
	/* A name that resolves in no family counts once a question. */
	reset_each(state);
	assert_int_not_equal(rlb_resolve_getaddrinfo(c, "9000", &hints, &res),
			     0);
	assert_int_not_equal(rlb_resolve_getaddrinfo(c, "9000", &hints, &res),
			     0);
	errors_str(c, out, sizeof(out));
	assert_string_equal(out, "1 1 0 0 0 0");
	/* The IPv4 question: the healthy replicas first, in config order. */
	hints.ai_family = AF_INET;
	assert_int_equal(rlb_resolve_getaddrinfo(c, "9000", &hints, &res), 0);
	list_str(res, out, sizeof(out));
	assert_string_equal(out, "127.0.0.51:9000 127.0.0.52:9000 "
				 "127.0.0.53:9000 127.0.0.54:9000");
	rlb_libc()->freeaddrinfo(res);

	/* gethostbyname2_r asks the same question. */
	reset_each(state);
	calls = fake_calls;
	assert_int_equal(rlb_resolve_gethostbyname(c, "v4.cluster", AF_INET6,
						   &he, buf, sizeof(buf), &h,
						   &herr),
			 0);
	assert_null(h);
	assert_int_equal(herr, HOST_NOT_FOUND);
	errors_str(c, out, sizeof(out));
	assert_string_equal(out, "1 1 0 0 0 0");
	/* Each name's two questions, then both from the cache. */
	assert_int_equal(fake_calls - calls, 12);
	assert_int_equal(rlb_resolve_gethostbyname(c, "v4.cluster", AF_INET6,
						   &he, buf, sizeof(buf), &h,
						   &herr),
			 0);
	assert_int_equal(fake_calls - calls, 12);
}

/*
 * gethostbyname2_r and gethostbyname2 of a virtual name in a family
 * they cannot answer: exactly glibc's answer for a name it knows
 * (result, return value, h_errno, errno).
 */
static void test_resolve_hostent_bad_family_as_libc(void **state)
{
	static const int families[] = {AF_UNIX, AF_PACKET, 12345};
	struct rlb_cluster *c = rlb_config_find(cfg, "db.cluster");

	for (size_t f = 0; f < 3; f++) {
		struct hostent he, *got = &he, *want = &he, *h;
		char buf[1024];
		int got_herr = 99, want_herr = 99, got_rc, want_rc, got_errno,
		    want_errno, got_h_errno;

		errno = 0;
		want_rc = rlb_libc()->gethostbyname2_r("localhost", families[f],
						       &he, buf, sizeof(buf),
						       &want, &want_herr);
		want_errno = errno;
		errno = 0;
		got_rc = rlb_resolve_gethostbyname(c, "db.cluster", families[f],
						   &he, buf, sizeof(buf), &got,
						   &got_herr);
		got_errno = errno;
		assert_int_equal(got_rc, want_rc);
		assert_ptr_equal(got, want);
		assert_int_equal(got_herr, want_herr);
		assert_int_equal(got_errno, want_errno);

		errno = 0;
		h_errno = 99;
		h = rlb_libc()->gethostbyname2("localhost", families[f]);
		assert_null(h);
		want_errno = errno;
		want_herr = h_errno;
		errno = 0;
		h_errno = 99;
		h = rlb_resolve_gethostbyname_static(c, "db.cluster",
						     families[f]);
		got_errno = errno;
		got_h_errno = h_errno;
		assert_null(h);
		assert_int_equal(got_h_errno, want_herr);
		assert_int_equal(got_errno, want_errno);
	}
}

/* This process's resident set, in KiB. */
static long rss_kib(void)
{
	long pages = -1, resident = -1;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = -1;
		fclose(f);
	}
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#define CACHE_MAX_BYTES (4u << 20) /* dnscache.c's bound */

/*
 * A program that hands untrusted service strings to getaddrinfo for a
 * replica known by name: 5000 distinct services of 256 KiB each. None is
 * a service anything real looks like, so none is kept; the cache and the
 * process stay small (this grew to 2.1 GB, the cache keeping every
 * string).
 */
static void test_resolve_cache_bounded_for_long_services(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "svc.cluster");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	const size_t len = 256 * 1024;
	char *service = malloc(len + 1), out[64];
	long rss0;

	assert_non_null(c);
	assert_non_null(service);
	memset(service, 'x', len);
	service[len] = '\0';
	rss0 = rss_kib();
	assert_true(rss0 > 0);
	for (int i = 0; i < 5000; i++) {
		char tag[16];

		/* Distinct in the first bytes: each is a new question. */
		snprintf(tag, sizeof(tag), "%08x", (unsigned)i);
		memcpy(service, tag, 8);
		assert_int_equal(
			rlb_resolve_getaddrinfo(c, service, &hints, &res), 0);
		list_str(res, out, sizeof(out));
		assert_string_equal(out, "127.0.0.44:0");
		rlb_libc()->freeaddrinfo(res);
		assert_true(rlb_dnscache_bytes() <= CACHE_MAX_BYTES);
	}
	/* Never from the cache: each question was asked. */
	assert_int_equal(fake_calls, 5000);
	assert_int_equal(rlb_dnscache_bytes(), 0);
	assert_true(rss_kib() - rss0 < 32 * 1024);
	free(service);
}

/*
 * Plain services but large answers (WIDE_ADDRS addresses each): the
 * cache keeps them up to its byte bound, not up to its entry bound, and
 * still answers a repeated question itself.
 */
static void test_resolve_cache_bounded_in_bytes(void **state)
{
	struct rlb_cluster *c = rlb_config_find(cfg, "wide.cluster");
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char service[32];
	size_t most = 0;
	int n;

	assert_non_null(c);
	for (int i = 0; i < 1000; i++) {
		snprintf(service, sizeof(service), "svc-%d", i);
		assert_int_equal(
			rlb_resolve_getaddrinfo(c, service, &hints, &res), 0);
		n = 0;
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
			n++;
		assert_int_equal(n, WIDE_ADDRS);
		rlb_libc()->freeaddrinfo(res);
		assert_true(rlb_dnscache_bytes() <= CACHE_MAX_BYTES);
		if (rlb_dnscache_bytes() > most)
			most = rlb_dnscache_bytes();
	}
	assert_int_equal(fake_calls, 1000);
	/* It filled up to near the bound (so the bound was what held). */
	assert_true(most > CACHE_MAX_BYTES / 2);
	assert_int_equal(rlb_resolve_getaddrinfo(c, service, &hints, &res), 0);
	rlb_libc()->freeaddrinfo(res);
	assert_int_equal(fake_calls, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_resolve_least_request_by_load,
				       reset_each),
		cmocka_unit_test_setup(test_resolve_order_and_ports,
				       reset_each),
		cmocka_unit_test_setup(
			test_resolve_family_filter_and_named_service,
			reset_each),
		cmocka_unit_test_setup(test_resolve_canonname_is_first_replica,
				       reset_each),
		cmocka_unit_test_setup(test_resolve_null_hints_any_socktype,
				       reset_each),
		cmocka_unit_test_setup(
			test_resolve_failure_counts_once_and_is_cached,
			reset_each),
		cmocka_unit_test_setup(test_resolve_all_fail_returns_libc_error,
				       reset_each),
		cmocka_unit_test_setup(test_resolve_hostent_order, reset_each),
		cmocka_unit_test_setup(test_resolve_hostent_erange, reset_each),
		cmocka_unit_test_setup(test_resolve_hostent_unaligned_buffer,
				       reset_each),
		cmocka_unit_test_setup(test_resolve_hostent_v6, reset_each),
		cmocka_unit_test_setup(test_resolve_static_hostent, reset_each),
		cmocka_unit_test(test_resolve_snapshot_fast_words),
		cmocka_unit_test_setup(test_resolve_literal_answers_match_libc,
				       reset_each),
		cmocka_unit_test_setup(
			test_resolve_cache_bounded_for_long_services,
			reset_each),
		cmocka_unit_test_setup(test_resolve_cache_bounded_in_bytes,
				       reset_each),
		cmocka_unit_test_setup(test_resolve_family_failure_not_counted,
				       reset_each),
		cmocka_unit_test_setup(test_resolve_hostent_bad_family_as_libc,
				       reset_each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
