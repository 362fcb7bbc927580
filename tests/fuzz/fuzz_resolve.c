/* fuzz_resolve.c - libFuzzer target: answers for virtual names
 * (resolve.c) with arbitrary services, hints and hostent buffers.
 *
 * One fixed config of IP-literal, pinned and fake-named replicas. The
 * real getaddrinfo is replaced by a fake that answers names only from a
 * small table, and IP literals with AI_NUMERICHOST: nothing reaches DNS.
 * The input picks, in this order (zero once it runs out):
 *
 *   u8  cluster; u8 spelling of its name; u8 what to call (bits)
 *   u16 ai_flags; u8 family, socktype, protocol (a table index, or raw)
 *   str service (length byte, then bytes)
 *   u16 hostent buffer size; u8 misalignment 0..7; u8 gethostbyname af
 *   u8  replicas already tried and u8 family of the failed connect
 *       (connect_failover's next address)
 *
 * Results are checked against the contract (and, for clusters of IP
 * literals in a known order, against libc's own answers for the same
 * literals) and freed with glibc's own freeaddrinfo(); buffers are exactly as
 * large as said, so ASan sees any byte written past them and UBSan any
 * misaligned pointer store.
 */
#include "config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "preload/preload.h"

/* Names the fake resolver knows: addresses, or the error it gives. */
static const struct fake_host {
	const char *name;
	const char *addrs[3];
	int error;
} fake_hosts[] = {
	{"a.fake", {"198.51.100.1", "2001:db8::a"}, 0},
	{"b.fake", {"198.51.100.2"}, 0},
	{"six.fake", {"2001:db8::6"}, 0},
	{"again.fake", {NULL}, EAI_AGAIN},
	{"fail.fake", {NULL}, EAI_FAIL},
};

static int (*real_getaddrinfo)(const char *, const char *,
			       const struct addrinfo *, struct addrinfo **);

/* getaddrinfo of literal with AI_NUMERICHOST: never asks DNS. */
static int numeric(const char *literal, const char *service,
		   const struct addrinfo *hints, struct addrinfo **res)
{
	struct addrinfo h = {.ai_flags = AI_NUMERICHOST};

	if (hints) {
		h = *hints;
		h.ai_flags |= AI_NUMERICHOST;
	}
	return real_getaddrinfo(literal, service, &h, res);
}

static int fake_getaddrinfo(const char *node, const char *service,
			    const struct addrinfo *hints, struct addrinfo **res)
{
	struct addrinfo *head = NULL, **tail = &head;
	int rc, last = EAI_NONAME;

	if (!node)
		return EAI_NONAME;
	rc = numeric(node, service, hints, res);
	if (rc != EAI_NONAME)
		return rc;
	for (size_t i = 0; i < sizeof(fake_hosts) / sizeof(*fake_hosts); i++) {
		const struct fake_host *f = &fake_hosts[i];

		if (strcasecmp(node, f->name) != 0)
			continue;
		if (f->error)
			return f->error;
		/* glibc's freeaddrinfo frees node by node: lists chain. */
		for (size_t k = 0; k < 3 && f->addrs[k]; k++) {
			struct addrinfo *ai;

			rc = numeric(f->addrs[k], service, hints, &ai);
			if (rc) {
				last = rc;
				continue;
			}
			*tail = ai;
			while (*tail)
				tail = &(*tail)->ai_next;
		}
		if (!head)
			return last;
		*res = head;
		return 0;
	}
	return EAI_NONAME;
}

static char config_text[16384];
static struct rlb_snapshot *snap;

/* Clusters 0 to 5 (the seeds in seeds.py count on this order). */
static const char config_head[] =
	"local_hostname = \"r2.dc1.example\";\n"
	"clusters = (\n"
	" { name = \"lit.cluster\"; load_balancing = \"in_order\";\n"
	"   port = 9000;\n"
	"   replicas = ( \"10.0.0.1\", \"10.0.0.2:9001\",\n"
	"     \"[2001:db8::1]:9440\", \"2001:db8::2\",\n"
	"     \"::ffff:10.0.0.3\" ); },\n"
	" { name = \"pinned.cluster\"; load_balancing = \"in_order\";\n"
	"   connect_failover = true;\n"
	"   replicas = (\n"
	"     { host = \"r1.dc1.example\";\n"
	"       address = [ \"192.0.2.1\", \"2001:db8::11\" ]; },\n"
	"     { host = \"r2.dc1.example\"; address = \"192.0.2.2\";\n"
	"       port = 5432; priority = 2; },\n"
	"     { host = \"r3.dc2.example\";\n"
	"       address = [ \"192.0.2.3\", \"192.0.2.3\" ]; } ); },\n"
	" { name = \"named.cluster\"; load_balancing = \"nearest_hostname\";\n"
	"   distributed_replica_max_ignored_errors = 1;\n"
	"   dns_cache_ttl = 0; connect_failover = true;\n"
	"   replicas = ( \"a.fake\", \"b.fake:80\", \"six.fake\",\n"
	"     \"again.fake\", \"missing.fake\", \"10.0.0.9\" ); },\n"
	" { name = \"dead.cluster.\";\n"
	"   distributed_replica_error_half_life = 0;\n"
	"   replicas = ( \"again.fake\", \"fail.fake\",\n"
	"     \"missing.fake\" ); },\n"
	" { name = \"big.cluster\"; load_balancing = \"first_or_random\";\n"
	"   load_balancing_first_offset = 3; port = 1;\n"
	"   replicas = ( \"a.fake\"";
static const char config_tail[] =
	" ); },\n"
	" { name = \"rr.cluster\"; load_balancing = \"round_robin\";\n"
	"   replicas = ( \"10.2.0.1\", \"[2001:db8::21]:21\", \"b.fake\" );"
	" }\n"
	");\n";

static void make_config(void)
{
	size_t off = (size_t)snprintf(config_text, sizeof(config_text), "%s",
				      config_head);

	/* More replicas than a selection keeps on the stack (64). */
	for (int i = 1; i <= 70; i++)
		off += (size_t)snprintf(config_text + off,
					sizeof(config_text) - off,
					", \"10.1.%d.%d\"", i / 8, i);
	snprintf(config_text + off, sizeof(config_text) - off, "%s",
		 config_tail);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct rlb_config *cfg;
	struct rlb_diag diag = {0};
	char state[PATH_MAX];

	fuzz_log_setup();
	make_config();
	if (rlb_config_parse_string(config_text, "resolve.conf", &cfg, &diag) !=
	    0) {
		for (size_t i = 0; i < diag.n; i++)
			fprintf(stderr, "%s\n", diag.msgs[i]);
		exit(1);
	}
	fuzz_path(state, sizeof(state), fuzz_scratch_dir("resolve"), "state");
	free(cfg->state_dir);
	cfg->state_dir = strdup(state);
	snap = rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT, true);
	if (!snap || !cfg->state_dir)
		exit(1);
	real_getaddrinfo = rlb_libc()->getaddrinfo;
	rlb_libc()->getaddrinfo = fake_getaddrinfo;
	return 0;
}

/* A table entry chosen by a byte, or (last choice) a raw value. */
static int pick(struct fuzz_input *in, const int *table, size_t n)
{
	uint8_t b = fuzz_u8(in);

	if (b % (n + 1) < n)
		return table[b % (n + 1)];
	return (int)(int8_t)fuzz_u8(in);
}

/* Cluster c's name as a program may write it: 0 as stored, 1 upper
 * case, 2 with a trailing dot. Malloc'd. */
static char *spelling(const struct rlb_cluster *c, unsigned how)
{
	size_t len = strlen(c->name);
	char *s = malloc(len + 2);

	if (!s)
		return NULL;
	memcpy(s, c->name, len + 1);
	if (how % 3 == 1) {
		for (size_t i = 0; i < len; i++)
			if (s[i] >= 'a' && s[i] <= 'z')
				s[i] = (char)(s[i] - 'a' + 'A');
	} else if (how % 3 == 2) {
		strcat(s, ".");
	}
	return s;
}

static void check_list(const struct addrinfo *res, const struct addrinfo *h)
{
	fuzz_check(res != NULL, "a list on success");
	if (h && (h->ai_flags & AI_CANONNAME))
		fuzz_check(res->ai_canonname != NULL, "canonical name");
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fuzz_check(ai->ai_addr != NULL, "node has an address");
		fuzz_check(ai->ai_family == ai->ai_addr->sa_family,
			   "node family matches its address");
		if (ai->ai_family == AF_INET)
			fuzz_check(ai->ai_addrlen == sizeof(struct sockaddr_in),
				   "AF_INET address length");
		else if (ai->ai_family == AF_INET6)
			fuzz_check(ai->ai_addrlen ==
					   sizeof(struct sockaddr_in6),
				   "AF_INET6 address length");
		if (h && h->ai_family != AF_UNSPEC)
			fuzz_check(ai->ai_family == h->ai_family,
				   "family asked for");
		if (h && h->ai_socktype)
			fuzz_check(ai->ai_socktype == h->ai_socktype,
				   "socket type asked for");
	}
}

/* Whether every replica of c is answered from IP literals. */
static bool all_literal(const struct rlb_cluster *c)
{
	for (size_t i = 0; i < c->nreplicas; i++)
		if (!c->replicas[i].nliteral)
			return false;
	return true;
}

/* One node as "family/socktype/protocol address port", for messages. */
static const char *node_str(const struct addrinfo *ai, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *in;
	const struct sockaddr_in6 *in6;
	unsigned port = 0;

	if (!ai)
		return "nothing";
	in = (const void *)ai->ai_addr;
	in6 = (const void *)ai->ai_addr;
	if (ai->ai_family == AF_INET) {
		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		port = ntohs(in->sin_port);
	} else if (ai->ai_family == AF_INET6) {
		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%d/%d/%d %s port %u", ai->ai_family,
		 ai->ai_socktype, ai->ai_protocol, addr, port);
	return buf;
}

static bool same_node(const struct addrinfo *a, const struct addrinfo *b)
{
	return a->ai_family == b->ai_family &&
	       a->ai_socktype == b->ai_socktype &&
	       a->ai_protocol == b->ai_protocol &&
	       a->ai_addrlen == b->ai_addrlen &&
	       memcmp(a->ai_addr, b->ai_addr, a->ai_addrlen) == 0;
}

/*
 * Check that got starts with libc's answer to (host, sv, q), node by
 * node; returns the rest of got. Sets *any when libc answered.
 */
static const struct addrinfo *expect_libc(const char *host, const char *sv,
					  const struct addrinfo *q,
					  const struct addrinfo *got, bool *any)
{
	struct addrinfo *want = NULL;
	char b1[128], b2[128];

	if (real_getaddrinfo(host, sv, q, &want) != 0)
		return got;
	for (const struct addrinfo *w = want; w; w = w->ai_next) {
		if (!got || !same_node(got, w)) {
			fprintf(stderr,
				"fuzz: %s (service %s, flags %#x family %d "
				"socktype %d protocol %d): libc gives %s, the "
				"library %s\n",
				host, sv ? sv : "NULL", q->ai_flags,
				q->ai_family, q->ai_socktype, q->ai_protocol,
				node_str(w, b1, sizeof(b1)),
				node_str(got, b2, sizeof(b2)));
			fuzz_check(0, "literal answers as libc's");
		}
		got = got->ai_next;
		*any = true;
	}
	rlb_libc()->freeaddrinfo(want);
	return got;
}

/*
 * For an in_order cluster of IP literals (an order known in advance),
 * the list must be what libc gives for each replica's literals with its
 * port or the service, in selection order: the library's own answers
 * for literals (its fast path) must agree with libc's, whatever the
 * question.
 */
static void compare_with_libc(struct rlb_cluster *c, const char *service,
			      const struct addrinfo *hints, int rc,
			      const struct addrinfo *res)
{
	struct addrinfo q = {.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG};
	const struct addrinfo *got = res;
	struct rlb_selection *sel;
	bool any = false;
	char b[128];

	if (c->s.load_balancing != RLB_POLICY_IN_ORDER || !all_literal(c))
		return;
	sel = rlb_selection_new(c->nreplicas);
	if (!sel)
		return;
	if (hints) {
		q.ai_flags = hints->ai_flags & ~AI_CANONNAME;
		q.ai_family = hints->ai_family;
		q.ai_socktype = hints->ai_socktype;
		q.ai_protocol = hints->ai_protocol;
	}
	rlb_select(c, true, rlb_now(), sel);
	for (size_t k = 0; k < sel->n; k++) {
		const struct rlb_replica *r = &c->replicas[sel->order[k]];
		const char *sv = service;
		char port[8];

		if (r->port) {
			snprintf(port, sizeof(port), "%d", r->port);
			sv = port;
		}
		if (!r->npinned)
			got = expect_libc(r->host, sv, &q, got, &any);
		for (size_t a = 0; a < r->npinned; a++)
			got = expect_libc(r->pinned[a], sv, &q, got, &any);
	}
	free(sel);
	if (got)
		fprintf(stderr, "fuzz: the library also gives %s\n",
			node_str(got, b, sizeof(b)));
	fuzz_check(got == NULL, "no more answers than libc's");
	fuzz_check(any == (rc == 0), "success exactly when libc answers");
}

static void do_getaddrinfo(struct rlb_cluster *c, struct fuzz_input *in,
			   bool null_hints, bool null_service)
{
	static const int families[] = {AF_UNSPEC, AF_INET, AF_INET6, AF_UNIX};
	static const int types[] = {0, SOCK_STREAM, SOCK_DGRAM, SOCK_RAW,
				    SOCK_SEQPACKET};
	static const int protos[] = {0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP};
	struct addrinfo hints = {0}, *res = NULL;
	char *service;
	int rc;

	hints.ai_flags = fuzz_u16(in);
	hints.ai_family = pick(in, families, 4);
	hints.ai_socktype = pick(in, types, 5);
	hints.ai_protocol = pick(in, protos, 4);
	service = fuzz_string(in, 64);
	if (!service)
		return;
	rc = rlb_resolve_getaddrinfo(c, null_service ? NULL : service,
				     null_hints ? NULL : &hints, &res);
	compare_with_libc(c, null_service ? NULL : service,
			  null_hints ? NULL : &hints, rc, rc == 0 ? res : NULL);
	if (rc == 0) {
		check_list(res, null_hints ? NULL : &hints);
		/* glibc's own: the list must be in its layout. */
		rlb_libc()->freeaddrinfo(res);
	} else {
		fuzz_check(rc < 0, "an EAI_* code");
	}
	free(service);
}

static void do_gethostbyname(struct rlb_cluster *c, struct fuzz_input *in,
			     const char *name, bool static_too)
{
	static const int afs[] = {AF_INET, AF_INET6, AF_UNSPEC};
	size_t len = fuzz_u16(in), skew = fuzz_u8(in) % 8;
	int af = pick(in, afs, 3);
	struct hostent he, *result = &he;
	char *mem = malloc(skew + len);
	int herr = -12345, rc;

	if (!mem)
		return;
	rc = rlb_resolve_gethostbyname(c, name, af, &he, mem + skew, len,
				       &result, &herr);
	if (rc == 0 && result) {
		size_t n = 0;

		fuzz_check(result == &he, "result is ret");
		fuzz_check(he.h_addrtype == af, "h_addrtype");
		fuzz_check(he.h_length == (af == AF_INET6 ? 16 : 4),
			   "h_length");
		fuzz_check(strcmp(he.h_aliases[0], name) == 0 &&
				   !he.h_aliases[1],
			   "the name asked is the one alias");
		for (char **a = he.h_addr_list; *a; a++)
			n++;
		fuzz_check(n >= 1, "an address");
		fuzz_check(strlen(he.h_name) > 0, "h_name");
	} else if (rc == 0) {
		fuzz_check(herr != NETDB_SUCCESS, "h_errno on no result");
	} else {
		fuzz_check(result == NULL, "no result on error");
	}
	fuzz_check(herr != -12345, "h_errno set");
	free(mem);
	if (static_too) {
		struct hostent *h =
			rlb_resolve_gethostbyname_static(c, name, af);

		if (h)
			fuzz_check(h->h_addr_list[0] != NULL, "static address");
	}
}

/* connect_failover: the next address after some replicas failed. */
static void do_next_address(struct rlb_config *cfg, struct rlb_cluster *c,
			    struct fuzz_input *in)
{
	struct rlb_owner tried[RLB_MAX_OWNERS];
	size_t ntried = fuzz_u8(in) % (RLB_MAX_OWNERS + 1);
	struct sockaddr_storage failed = {0}, out;
	socklen_t len = sizeof(struct sockaddr_in), outlen = 0;
	uint8_t fam = fuzz_u8(in);

	for (size_t k = 0; k < ntried; k++) {
		tried[k].cluster = c->name_hash;
		tried[k].replica =
			c->replicas[fuzz_u8(in) % c->nreplicas].identity;
	}
	if (fam % 3 == 1) {
		failed.ss_family = AF_INET6;
		len = sizeof(struct sockaddr_in6);
	} else {
		failed.ss_family = fam % 3 ? AF_UNIX : AF_INET;
	}
	((struct sockaddr_in *)&failed)->sin_port = htons(fuzz_u16(in));
	if (rlb_resolve_next_address(cfg, tried, ntried,
				     (struct sockaddr *)&failed, len, &out,
				     &outlen)) {
		fuzz_check(out.ss_family == failed.ss_family,
			   "next address in the failed one's family");
		fuzz_check(outlen > 0 && outlen <= sizeof(out),
			   "next address length");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = {data, size};
	struct rlb_config *cfg = snap->cfg;
	struct rlb_cluster *c = &cfg->clusters[fuzz_u8(&in) % cfg->nclusters];
	char *name = spelling(c, fuzz_u8(&in));
	uint8_t what = fuzz_u8(&in);

	if (!name)
		return 0;
	/* Each input from a clean slate: no counts, nothing cached. */
	for (size_t i = 0; i < cfg->nclusters; i++)
		rlb_health_reset(&cfg->clusters[i], SIZE_MAX);
	rlb_dnscache_flush();

	fuzz_check(rlb_config_find(cfg, name) == c, "the name finds c");
	do_getaddrinfo(c, &in, what & 1, what & 2);
	do_gethostbyname(c, &in, name, what & 4);
	do_next_address(cfg, c, &in);
	free(name);
	return 0;
}
