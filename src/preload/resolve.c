/* resolve.c - the preload library's answers for virtual names, formatted
 * from the engine's (rlb_answer(), over the per-process DNS cache): an
 * addrinfo list, a hostent, the next replica to fail over to. Every
 * address is recorded as handed out, for connect tracking. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

void rlb_resolve_near_miss(const struct rlb_config *cfg, const char *name)
{
	const char *close = rlb_config_near_miss(cfg, name);

	if (close)
		rlb_log(RLB_LOG_DEBUG,
			"%s: not a virtual name, passed through; did you mean "
			"%s?",
			name, close);
}

/*
 * Something is wrong when no replica of a cluster resolves: say so at
 * warning level, at most every 10 s per process so as not to flood.
 */
static void warn_unresolvable(const struct rlb_cluster *c, int rc)
{
	static atomic_llong next_ms;
	long long now = rlb_monotonic_ms(),
		  next = atomic_load_explicit(&next_ms, memory_order_relaxed);

	if (now < next ||
	    !atomic_compare_exchange_strong(&next_ms, &next, now + 10000))
		return;
	rlb_log(RLB_LOG_WARNING,
		"%s: no replica could be resolved (%s); each counted an error",
		c->name, gai_strerror(rc));
}

/*
 * The one allocator of result nodes: an addrinfo in glibc's layout (node
 * and a sockaddr of len bytes in one malloc, so libc's freeaddrinfo()
 * frees it), its header filled and the sockaddr left to the caller, and
 * linked at *tail. NULL when out of memory. Only the header is zeroed:
 * one memset of the whole would be made a calloc(), which glibc serves
 * without its thread cache.
 */
static inline __attribute__((always_inline)) struct addrinfo *
node_new(int family, int socktype, int protocol, socklen_t len,
	 struct addrinfo ***tail)
{
	struct addrinfo *ai = malloc(sizeof(*ai) + len);

	if (!ai)
		return NULL;
	memset(ai, 0, sizeof(*ai));
	ai->ai_family = family;
	ai->ai_socktype = socktype;
	ai->ai_protocol = protocol;
	ai->ai_addrlen = len;
	ai->ai_addr = (struct sockaddr *)(ai + 1);
	**tail = ai;
	*tail = &ai->ai_next;
	return ai;
}

/* A node of sockaddr sa, handed out for replica idx of c (tracked for
 * error attribution). Returns false when out of memory. */
static bool append_node(struct rlb_cluster *c, size_t idx, int family,
			int socktype, int protocol, const void *sa,
			socklen_t len, struct addrinfo ***tail)
{
	struct addrinfo *ai = node_new(family, socktype, protocol, len, tail);

	if (!ai)
		return false;
	memcpy(ai->ai_addr, sa, len);
	rlb_track_handout(c, idx, ai->ai_addr, len);
	return true;
}

/*
 * A node of literal bytes of family (4 or 16 of them) with port
 * (network order), the sockaddr written field by field (not built
 * elsewhere and copied: read back wider than its stores, a failed store
 * forward). Returns false when out of memory.
 */
static inline __attribute__((always_inline)) bool
literal_node(int family, const uint8_t *bytes, uint16_t port, int socktype,
	     int protocol, struct addrinfo ***tail)
{
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in)
					  : sizeof(struct sockaddr_in6);
	struct addrinfo *ai = node_new(family, socktype, protocol, len, tail);

	if (!ai)
		return false;
	if (family == AF_INET) {
		struct sockaddr_in *in = (void *)ai->ai_addr;

		memset(in, 0, sizeof(*in));
		in->sin_family = AF_INET;
		in->sin_port = port;
		memcpy(&in->sin_addr, bytes, 4);
	} else {
		struct sockaddr_in6 *in6 = (void *)ai->ai_addr;

		memset(in6, 0, sizeof(*in6));
		in6->sin6_family = AF_INET6;
		in6->sin6_port = port;
		memcpy(&in6->sin6_addr, bytes, 16);
	}
	return true;
}

/*
 * The hot path's builder: the nodes of literal replicas order[0 .. n)
 * for lq, written from the snapshot's bytes (see rlb_answer_sink), in one
 * loop that the compiler sees whole.
 */
static enum rlb_answer_next gai_literals(void *ctx, struct rlb_cluster *c,
					 const uint32_t *order, size_t n,
					 const struct rlb_literal_question *lq,
					 size_t *answered)
{
	/* The caller's tail in a local while nodes are linked. */
	struct addrinfo ***tailp = ctx, **tail = *tailp;
	const int family = lq->family;
	const size_t ntypes = lq->ntypes;
	const uint64_t *fast_v4 = c->view ? c->view->fast_v4 : NULL;
	enum rlb_answer_next nx = RLB_ANSWER_MORE;

	*answered = n;
	for (size_t j = 0; j < n; j++) {
		const struct rlb_replica *r;
		uint16_t port;
		/* Most replicas: one IPv4 literal, one socket type asked; the
		 * snapshot's word for them, not the replica (a miss each, in
		 * the selection's random order). */
		uint64_t v4 = fast_v4 ? fast_v4[order[j]] : 0;

		if ((v4 & RLB_FAST_V4) && ntypes == 1 && family != AF_INET6) {
			uint32_t addr = (uint32_t)v4;

			port = (uint16_t)(v4 >> 32) ? (uint16_t)(v4 >> 32)
						    : lq->port;
			if (!literal_node(AF_INET, (const uint8_t *)&addr, port,
					  lq->socktype[0], lq->protocol[0],
					  &tail)) {
				nx = RLB_ANSWER_NOMEM;
				goto out;
			}
			if (*answered == n)
				*answered = j;
			rlb_track_handout_v4(c, order[j], addr, port);
			continue;
		}
		r = &c->replicas[order[j]];
		port = r->port ? htons((uint16_t)r->port) : lq->port;
		for (size_t k = 0; k < r->nliteral; k++) {
			const struct rlb_addr *lit = &r->literal[k];

			if (family != AF_UNSPEC && family != lit->family)
				continue;
			for (size_t t = 0; t < ntypes; t++) {
				if (!literal_node(lit->family, lit->bytes, port,
						  lq->socktype[t],
						  lq->protocol[t], &tail)) {
					nx = RLB_ANSWER_NOMEM;
					goto out;
				}
				if (*answered == n)
					*answered = j;
			}
			/* Each literal once, not once per type. */
			if (ntypes)
				rlb_track_handout_literal(c, order[j], lit,
							  port);
		}
	}
out:
	*tailp = tail;
	return nx;
}

static void free_list(struct addrinfo *ai)
{
	while (ai) {
		struct addrinfo *next = ai->ai_next;

		free(ai->ai_canonname);
		free(ai);
		ai = next;
	}
}

/* The preload library resolves replica hosts through its DNS cache. */
static const struct rlb_resolver dns_cache = {.ask = rlb_dnscache_ask};

/* getaddrinfo's sink: one node per address, linked at *tail. */
static enum rlb_answer_next gai_address(void *ctx, struct rlb_cluster *c,
					size_t idx,
					const struct rlb_dns_addr *a)
{
	struct addrinfo ***tail = ctx;

	return append_node(c, idx, a->family, a->socktype, a->protocol,
			   &a->addr, a->addrlen, tail)
		       ? RLB_ANSWER_MORE
		       : RLB_ANSWER_NOMEM;
}

int rlb_resolve_getaddrinfo(struct rlb_cluster *c, const char *service,
			    const struct addrinfo *hints, struct addrinfo **res)
{
	struct addrinfo q = {0}, *head = NULL, **tail = &head;
	struct rlb_answer_sink sink = {
		.address = gai_address, .literals = gai_literals, .ctx = &tail};
	const char *canon;
	int last;

	if (hints) {
		q.ai_flags = hints->ai_flags & ~AI_CANONNAME;
		q.ai_family = hints->ai_family;
		q.ai_socktype = hints->ai_socktype;
		q.ai_protocol = hints->ai_protocol;
	} else {
		/* POSIX: NULL hints mean AF_UNSPEC, any type, these flags. */
		q.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG;
	}
	rlb_track_sweep();
	last = rlb_answer(c, service, &q, false, &dns_cache, &sink, &canon);
	if (last || !head)
		goto out_fail;
	if (hints && (hints->ai_flags & AI_CANONNAME)) {
		head->ai_canonname = strdup(canon);
		if (!head->ai_canonname) {
			last = EAI_MEMORY;
			goto out_fail;
		}
	}
	*res = head;
	return 0;
out_fail:
	free_list(head);
	if (!last)
		last = EAI_NONAME;
	/* A cluster with no members says so itself (members.c). */
	if (c->nreplicas &&
	    (last == EAI_NONAME || last == EAI_AGAIN || last == EAI_FAIL))
		warn_unresolvable(c, last);
	if (last == EAI_SYSTEM && errno == 0)
		errno = EIO;
	return last;
}

/* Tracking observes what an answer hands out (rlb_observed_sink()). */
static void track_observe(void *ctx, struct rlb_cluster *c, size_t idx,
			  const struct rlb_dns_addr *a)
{
	(void)ctx;
	rlb_track_handout(c, idx, (const struct sockaddr *)&a->addr,
			  a->addrlen);
}

int rlb_resolve_gethostbyname(struct rlb_cluster *c, const char *name, int af,
			      struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop)
{
	/* Most answers fit here: no allocation for them. */
	struct rlb_dns_addr inline_addrs[8];
	struct rlb_addr_list got = RLB_ADDR_LIST_IN(inline_addrs);
	struct rlb_answer_sink collect = rlb_collect_sink(&got), sink;
	struct rlb_observed tracked = {&collect, track_observe, NULL};
	struct addrinfo q = {0};
	const char *hname = NULL;
	int rc = 0;

	*result = NULL;
	if (af != AF_INET && af != AF_INET6) {
		/* What glibc's resolver modules answer for any other family. */
		*h_errnop = NO_DATA;
		errno = EAFNOSUPPORT;
		return EAFNOSUPPORT;
	}
	q.ai_family = af;
	q.ai_socktype = SOCK_STREAM;
	sink = rlb_observed_sink(&tracked);
	rlb_track_sweep();
	rc = rlb_answer(c, NULL, &q, false, &dns_cache, &sink, &hname);
	if (rc == EAI_MEMORY) {
		*h_errnop = NETDB_INTERNAL;
		errno = ENOMEM;
		rc = ENOMEM;
		goto out_free;
	}
	if (rlb_addr_list_unique(&got, af) == 0) {
		/* A DNS cluster whose DNS never answered: try again. */
		*h_errnop = c->nreplicas == 0 && rc == EAI_AGAIN
				    ? TRY_AGAIN
				    : HOST_NOT_FOUND;
		rc = 0;
		goto out_free;
	}
	rc = rlb_format_hostent(&got, af, hname, name, ret, buf, buflen);
	if (rc == ERANGE) {
		*h_errnop = NETDB_INTERNAL;
		errno = ERANGE;
		goto out_free;
	}
	*result = ret;
	*h_errnop = NETDB_SUCCESS;
out_free:
	rlb_addr_list_free(&got);
	return rc;
}

/*
 * The non-reentrant variants share one static result, as glibc's do; the
 * buffer grows as needed and is only touched under its lock.
 */
static pthread_mutex_t static_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hostent static_host;
static char *static_buf;
static size_t static_len;

void rlb_resolve_fork_lock(void)
{
	pthread_mutex_lock(&static_lock);
}

void rlb_resolve_fork_unlock(void)
{
	pthread_mutex_unlock(&static_lock);
}

struct hostent *rlb_resolve_gethostbyname_static(struct rlb_cluster *c,
						 const char *name, int af)
{
	struct hostent *result = NULL;
	int herr = NETDB_INTERNAL, saved = errno, cancel;
	size_t len;

	/* Never cancelled holding static_lock (every later call and every
	 * fork() would wait for it). */
	cancel = rlb_cancel_off();
	pthread_mutex_lock(&static_lock);
	for (len = static_len ? static_len : 1024; len <= (1u << 22);
	     len *= 2) {
		if (len != static_len) {
			free(static_buf);
			static_buf = malloc(len);
			static_len = static_buf ? len : 0;
			if (!static_buf) {
				errno = ENOMEM;
				herr = NETDB_INTERNAL;
				break;
			}
		}
		if (rlb_resolve_gethostbyname(c, name, af, &static_host,
					      static_buf, static_len, &result,
					      &herr) != ERANGE)
			break;
	}
	pthread_mutex_unlock(&static_lock);
	rlb_cancel_restore(cancel);
	/* A retry with a larger buffer leaves no ERANGE behind. */
	if (result)
		errno = saved;
	h_errno = herr;
	return result;
}

/* Whether replica i of c is among the tried owners. */
static bool was_tried(const struct rlb_cluster *c, size_t i,
		      const struct rlb_owner *tried, size_t ntried)
{
	for (size_t k = 0; k < ntried; k++)
		if (tried[k].cluster == c->name_hash &&
		    tried[k].replica == c->replicas[i].identity)
			return true;
	return false;
}

/* The cluster of cfg that the first tried replica belongs to, of those
 * that fail over or hedge. */
static struct rlb_cluster *failover_cluster(struct rlb_config *cfg,
					    const struct rlb_owner *tried,
					    size_t ntried)
{
	for (size_t k = 0; k < ntried; k++)
		for (size_t ci = 0; ci < cfg->nclusters; ci++)
			if (cfg->clusters[ci].name_hash == tried[k].cluster &&
			    (cfg->clusters[ci].s.connect_failover ||
			     cfg->clusters[ci].s.use_hedged_requests))
				return &cfg->clusters[ci];
	return NULL;
}

/* The failover sink: the first address in the family of the failure,
 * of a replica not tried yet. */
struct next_pick {
	const struct rlb_owner *tried;
	size_t ntried;
	int family;
	struct sockaddr_storage *out;
	socklen_t *outlen;
	bool found;
};

static bool next_skip(void *ctx, const struct rlb_cluster *c, size_t idx)
{
	const struct next_pick *np = ctx;

	return was_tried(c, idx, np->tried, np->ntried);
}

static enum rlb_answer_next next_address(void *ctx, struct rlb_cluster *c,
					 size_t idx,
					 const struct rlb_dns_addr *a)
{
	struct next_pick *np = ctx;

	if (a->family != np->family || a->addrlen > sizeof(*np->out))
		return RLB_ANSWER_MORE;
	memcpy(np->out, &a->addr, a->addrlen);
	*np->outlen = a->addrlen;
	rlb_track_handout(c, idx, (struct sockaddr *)np->out, *np->outlen);
	np->found = true;
	return RLB_ANSWER_ENOUGH;
}

bool rlb_resolve_next_address(struct rlb_config *cfg,
			      const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen)
{
	struct rlb_cluster *c = failover_cluster(cfg, tried, ntried);
	struct addrinfo q = {.ai_socktype = SOCK_STREAM};
	struct next_pick np = {tried, ntried, 0, out, outlen, false};
	struct rlb_answer_sink sink = {
		.skip = next_skip, .address = next_address, .ctx = &np};
	const char *first;
	char service[8];
	uint16_t port;

	if (!c || !failed ||
	    (failed->sa_family != AF_INET && failed->sa_family != AF_INET6))
		return false;
	port = failed->sa_family == AF_INET
		       ? ((const struct sockaddr_in *)failed)->sin_port
		       : ((const struct sockaddr_in6 *)failed)->sin6_port;
	snprintf(service, sizeof(service), "%u", ntohs(port));
	np.family = failed->sa_family;
	q.ai_family = failed->sa_family;
	q.ai_flags = AI_NUMERICSERV |
		     (failed->sa_family == AF_INET6 ? AI_V4MAPPED : 0);
	rlb_answer(c, service, &q, true, &dns_cache, &sink, &first);
	return np.found;
}
