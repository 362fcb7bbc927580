/* resolve.c - answers for virtual names: one selection, then each
 * replica's addresses (from a per-process cache over the real resolver)
 * in selection order, as an addrinfo list or a hostent. */
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

#define STACK_SELECTION 64 /* replicas selected without malloc */

/*
 * Whether a failed resolution of host is the replica's fault (design.md
 * §5.5): its name resolves in no family at all. Failing only in the
 * family the caller asked is not (an IPv4-only name has no IPv6 answer,
 * and with no DNS server in reach the IPv6 question fails with EAI_AGAIN
 * while /etc/hosts answers the plain one), nor failing only for the
 * service. Any question but the plain one is checked against the plain
 * one (AF_UNSPEC, no service), asked through the cache like any other.
 */
static bool resolution_counts(int rc, const char *host,
			      const struct addrinfo *q, int64_t ttl_s)
{
	struct addrinfo plain = {.ai_socktype = SOCK_STREAM};
	struct rlb_dns_answer *e;
	bool fresh, counts;

	if (rc != EAI_NONAME && rc != EAI_NODATA && rc != EAI_ADDRFAMILY &&
	    rc != EAI_AGAIN && rc != EAI_FAIL)
		return false;
	if (q->ai_family == AF_UNSPEC) {
		/* Every family was asked and none was answered. */
		if (rc == EAI_AGAIN || rc == EAI_FAIL)
			return true;
		/* EAI_NONAME can also mean a service that is not a number
		 * (AI_NUMERICSERV), or families not configured here. */
		if (!(q->ai_flags & (AI_NUMERICSERV | AI_ADDRCONFIG)))
			return rc == EAI_NONAME;
	}
	e = rlb_dnscache_ask(host, NULL, &plain, ttl_s, false, &fresh);
	if (!e)
		return false;
	counts = e->error == EAI_NONAME || e->error == EAI_AGAIN ||
		 e->error == EAI_FAIL;
	free(e);
	return counts;
}

/*
 * All addresses of replica r for question q (its port or `service`),
 * appended to *out and *nout (realloc'd). Returns 0 or the EAI_* failure.
 */
static int replica_addrs(struct rlb_cluster *c, size_t idx, const char *service,
			 const struct addrinfo *q, struct rlb_dns_addr **out,
			 size_t *nout)
{
	const struct rlb_replica *r = &c->replicas[idx];
	char port[8];
	struct addrinfo pq = *q;
	int last = 0;
	size_t added = 0;

	if (r->port) {
		snprintf(port, sizeof(port), "%d", r->port);
		service = port;
	}
	pq.ai_flags |= AI_NUMERICHOST;
	for (size_t k = 0; k < (r->npinned ? r->npinned : 1); k++) {
		const char *host = r->npinned ? r->pinned[k] : r->host;
		struct rlb_dns_answer *e;
		struct rlb_dns_addr *grown;
		bool fresh;

		e = rlb_dnscache_ask(host, service, r->npinned ? &pq : q,
				     c->s.dns_cache_ttl, r->npinned > 0,
				     &fresh);
		if (!e) {
			last = EAI_MEMORY;
			continue;
		}
		if (e->error) {
			last = e->error;
			if (fresh && !r->npinned &&
			    resolution_counts(e->error, host, q,
					      c->s.dns_cache_ttl)) {
				rlb_health_add_errors(c, idx, 1, rlb_now());
				rlb_log(RLB_LOG_DEBUG,
					"%s: replica %s: cannot resolve (%s): "
					"error counted",
					c->name, r->host,
					gai_strerror(e->error));
			}
			free(e);
			continue;
		}
		if (e->n == 0) {
			free(e);
			continue;
		}
		grown = realloc(*out, (*nout + e->n) * sizeof(**out));
		if (!grown) {
			free(e);
			last = EAI_MEMORY;
			continue;
		}
		*out = grown;
		memcpy(*out + *nout, e->addrs, e->n * sizeof(**out));
		*nout += e->n;
		added += e->n;
		free(e);
	}
	return added ? 0 : (last ? last : EAI_NONAME);
}

static void log_selection(const struct rlb_cluster *c,
			  const struct rlb_selection *sel)
{
	char line[900];
	size_t off = 0;

	if (!rlb_log_enabled(RLB_LOG_DEBUG))
		return;
	line[0] = '\0';
	for (size_t k = 0; k < sel->n && off < sizeof(line) - 1; k++) {
		uint32_t i = sel->order[k];
		int n = snprintf(line + off, sizeof(line) - off,
				 "%s%s(errors=%llu)", k ? " " : "",
				 c->replicas[i].host,
				 (unsigned long long)sel->errors[i]);

		if (n < 0)
			break;
		off += (size_t)n;
	}
	rlb_log(RLB_LOG_DEBUG, "select %s (%s): %s", c->name,
		rlb_policy_name(c->s.load_balancing), line);
}

/*
 * Run one selection into sel (stack storage for small clusters, else
 * malloc'd into *heap). Returns false when out of memory.
 */
struct sel_storage {
	struct rlb_selection sel;
	uint32_t order[STACK_SELECTION];
	uint64_t errors[STACK_SELECTION];
	uint64_t slowdowns[STACK_SELECTION];
	int64_t policy_prio[STACK_SELECTION];
};

static struct rlb_selection *run_selection(struct rlb_cluster *c, bool peek,
					   struct sel_storage *st,
					   struct rlb_selection **heap)
{
	struct rlb_selection *sel = &st->sel;

	*heap = NULL;
	if (c->nreplicas > STACK_SELECTION) {
		*heap = rlb_selection_new(c->nreplicas);
		if (!*heap)
			return NULL;
		sel = *heap;
	} else {
		sel->order = st->order;
		sel->errors = st->errors;
		sel->slowdowns = st->slowdowns;
		sel->policy_prio = st->policy_prio;
		sel->n = c->nreplicas;
	}
	rlb_select(c, peek, rlb_now(), sel);
	if (!peek)
		log_selection(c, sel);
	return sel;
}

/*
 * The fast path: replicas whose addresses are IP literals (pinned, or
 * the host itself) are answered without asking libc, for the questions
 * whose answer libc gives for a numeric host is plain (checked against
 * libc in test_resolve). Anything unusual takes the general path.
 */
struct literal_question {
	int family;    /* AF_UNSPEC, AF_INET or AF_INET6 */
	uint16_t port; /* network order: the caller's service */
	size_t ntypes;
	int socktype[3];
	int protocol[3];
};

static bool literal_port(const char *service, uint16_t *port)
{
	unsigned long v = 0;
	size_t len;

	if (!service) {
		*port = 0;
		return true;
	}
	len = strnlen(service, 10);
	if (len > 9 || strspn(service, "0123456789") != len)
		return false;
	for (size_t i = 0; i < len; i++)
		v = v * 10 + (unsigned long)(service[i] - '0');
	/* libc takes a numeric service modulo 2^16, as strtoul would. */
	*port = htons((uint16_t)v);
	return true;
}

static bool literal_question_init(const struct addrinfo *q, const char *service,
				  struct literal_question *lq)
{
	const int plain = AI_CANONNAME | AI_NUMERICSERV | AI_PASSIVE |
			  AI_V4MAPPED | AI_ALL;
	int st = q->ai_socktype, pr = q->ai_protocol;

	if (q->ai_flags & ~plain)
		return false;
	if (q->ai_family != AF_UNSPEC && q->ai_family != AF_INET &&
	    q->ai_family != AF_INET6)
		return false;
	/* IPv4 literals mapped into AF_INET6 answers: leave it to libc. */
	if (q->ai_family == AF_INET6 && (q->ai_flags & AI_V4MAPPED))
		return false;
	lq->family = q->ai_family;
	lq->ntypes = 0;
	if (st == 0 && pr == 0) {
		lq->ntypes = 3;
		lq->socktype[0] = SOCK_STREAM;
		lq->protocol[0] = IPPROTO_TCP;
		lq->socktype[1] = SOCK_DGRAM;
		lq->protocol[1] = IPPROTO_UDP;
		lq->socktype[2] = SOCK_RAW;
		lq->protocol[2] = 0;
	} else if ((st == SOCK_STREAM || st == 0) &&
		   (pr == 0 || pr == IPPROTO_TCP)) {
		lq->ntypes = 1;
		lq->socktype[0] = SOCK_STREAM;
		lq->protocol[0] = IPPROTO_TCP;
	} else if ((st == SOCK_DGRAM || st == 0) &&
		   (pr == 0 || pr == IPPROTO_UDP)) {
		lq->ntypes = 1;
		lq->socktype[0] = SOCK_DGRAM;
		lq->protocol[0] = IPPROTO_UDP;
	} else {
		return false;
	}
	return literal_port(service, &lq->port);
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
 * The one builder of result nodes: an addrinfo in glibc's layout (node
 * and sockaddr in one malloc, so libc's freeaddrinfo() frees it), handed
 * out for replica idx of c (tracked for error attribution) and linked at
 * *tail. Returns false when out of memory.
 */
static bool append_node(struct rlb_cluster *c, size_t idx, int family,
			int socktype, int protocol, const void *sa,
			socklen_t len, struct addrinfo ***tail)
{
	struct addrinfo *ai = malloc(sizeof(*ai) + len);

	if (!ai)
		return false;
	memset(ai, 0, sizeof(*ai));
	ai->ai_family = family;
	ai->ai_socktype = socktype;
	ai->ai_protocol = protocol;
	ai->ai_addrlen = len;
	ai->ai_addr = (struct sockaddr *)(ai + 1);
	memcpy(ai->ai_addr, sa, len);
	rlb_track_handout(c, idx, ai->ai_addr, len);
	**tail = ai;
	*tail = &ai->ai_next;
	return true;
}

/* The sockaddr of literal lit with port (network order); its length. */
static socklen_t literal_sockaddr(const struct rlb_addr *lit, uint16_t port,
				  struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (lit->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = port;
		memcpy(&in->sin_addr, lit->bytes, 4);
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = port;
		memcpy(&in6->sin6_addr, lit->bytes, 16);
		return sizeof(*in6);
	}
}

/*
 * Whether an AF_INET question meets an IPv4-mapped IPv6 literal of r:
 * glibc answers it with the IPv4 address, which the fast path does not
 * build; the general path asks libc.
 */
static bool mapped_for_v4(const struct rlb_replica *r,
			  const struct literal_question *lq)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};

	if (lq->family != AF_INET)
		return false;
	for (size_t a = 0; a < r->nliteral; a++)
		if (r->literal[a].family == AF_INET6 &&
		    memcmp(r->literal[a].bytes, prefix, sizeof(prefix)) == 0)
			return true;
	return false;
}

/*
 * Append the nodes of literal replica idx for question lq at *tail.
 * Returns 0, EAI_ADDRFAMILY (no address of the family asked) or
 * EAI_MEMORY.
 */
static int literal_nodes(struct rlb_cluster *c, size_t idx,
			 const struct literal_question *lq,
			 struct addrinfo ***tail)
{
	const struct rlb_replica *r = &c->replicas[idx];
	uint16_t port = r->port ? htons((uint16_t)r->port) : lq->port;
	int added = 0;

	for (size_t a = 0; a < r->nliteral; a++) {
		const struct rlb_addr *lit = &r->literal[a];
		struct sockaddr_storage ss;
		socklen_t alen;

		if (lq->family != AF_UNSPEC && lq->family != lit->family)
			continue;
		alen = literal_sockaddr(lit, port, &ss);
		for (size_t t = 0; t < lq->ntypes; t++) {
			if (!append_node(c, idx, lit->family, lq->socktype[t],
					 lq->protocol[t], &ss, alen, tail))
				return EAI_MEMORY;
			added++;
		}
	}
	return added ? 0 : EAI_ADDRFAMILY;
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

int rlb_resolve_getaddrinfo(struct rlb_cluster *c, const char *service,
			    const struct addrinfo *hints, struct addrinfo **res)
{
	struct sel_storage st;
	struct rlb_selection *sel, *heap;
	struct addrinfo q = {0}, *head = NULL, **tail = &head;
	struct rlb_dns_addr *addrs = NULL;
	struct literal_question lq = {0};
	const char *canon = NULL;
	int rc, last = 0;
	bool fast;

	if (hints) {
		q.ai_flags = hints->ai_flags & ~AI_CANONNAME;
		q.ai_family = hints->ai_family;
		q.ai_socktype = hints->ai_socktype;
		q.ai_protocol = hints->ai_protocol;
	} else {
		/* POSIX: NULL hints mean AF_UNSPEC, any type, these flags. */
		q.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG;
	}
	fast = literal_question_init(&q, service, &lq);
	rlb_track_sweep();
	sel = run_selection(c, false, &st, &heap);
	if (!sel)
		return EAI_MEMORY;
	for (size_t k = 0; k < sel->n; k++) {
		uint32_t idx = sel->order[k];
		const struct rlb_replica *r = &c->replicas[idx];
		size_t n = 0;

		if (fast && r->nliteral && !mapped_for_v4(r, &lq)) {
			rc = literal_nodes(c, idx, &lq, &tail);
			if (rc == 0 && !canon)
				canon = r->host;
			if (rc == EAI_MEMORY)
				goto out_fail;
			if (rc)
				last = rc;
			continue;
		}
		rc = replica_addrs(c, idx, service, &q, &addrs, &n);
		if (rc) {
			last = rc;
			continue;
		}
		for (size_t j = 0; j < n; j++) {
			const struct rlb_dns_addr *a = &addrs[j];

			if (!append_node(c, idx, a->family, a->socktype,
					 a->protocol, &a->addr, a->addrlen,
					 &tail)) {
				last = EAI_MEMORY;
				goto out_fail;
			}
		}
		if (n && !canon)
			canon = c->replicas[idx].host;
	}
	if (!head)
		goto out_fail;
	if (hints && (hints->ai_flags & AI_CANONNAME)) {
		head->ai_canonname = strdup(canon);
		if (!head->ai_canonname) {
			last = EAI_MEMORY;
			goto out_fail;
		}
	}
	free(addrs);
	free(heap);
	*res = head;
	return 0;
out_fail:
	free_list(head);
	free(addrs);
	free(heap);
	if (last == EAI_NONAME || last == EAI_AGAIN || last == EAI_FAIL)
		warn_unresolvable(c, last);
	if (last == EAI_SYSTEM && errno == 0)
		errno = EIO;
	return last ? last : EAI_NONAME;
}

/* The address bytes (in_addr or in6_addr) of a resolved address. */
static const void *addr_bytes(const struct rlb_dns_addr *a)
{
	if (a->family == AF_INET6)
		return &((const struct sockaddr_in6 *)&a->addr)->sin6_addr;
	return &((const struct sockaddr_in *)&a->addr)->sin_addr;
}

/*
 * Keep, in order, the first of each distinct address of family af in
 * addrs (a hostent has no ports); returns how many are left.
 */
static size_t unique_addrs(struct rlb_dns_addr *addrs, size_t n, int af,
			   size_t alen)
{
	size_t nuniq = 0;

	for (size_t j = 0; j < n; j++) {
		size_t u;

		if (addrs[j].family != af)
			continue;
		for (u = 0; u < nuniq; u++)
			if (memcmp(addr_bytes(&addrs[u]), addr_bytes(&addrs[j]),
				   alen) == 0)
				break;
		if (u == nuniq)
			addrs[nuniq++] = addrs[j];
	}
	return nuniq;
}

int rlb_resolve_gethostbyname(struct rlb_cluster *c, const char *name, int af,
			      struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop)
{
	size_t alen = af == AF_INET6 ? sizeof(struct in6_addr)
				     : sizeof(struct in_addr);
	struct sel_storage st;
	struct rlb_selection *sel, *heap;
	struct addrinfo q = {0};
	struct rlb_dns_addr *addrs = NULL;
	size_t naddrs = 0, nuniq, pad, hlen, nlen;
	const char *hname = NULL;
	char **aliases, **list, *p;
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
	rlb_track_sweep();
	sel = run_selection(c, false, &st, &heap);
	if (!sel) {
		*h_errnop = NETDB_INTERNAL;
		errno = ENOMEM;
		return ENOMEM;
	}
	for (size_t k = 0; k < sel->n; k++) {
		size_t before = naddrs;

		if (replica_addrs(c, sel->order[k], NULL, &q, &addrs,
				  &naddrs) == 0 &&
		    naddrs > before && !hname)
			hname = c->replicas[sel->order[k]].host;
		for (size_t j = before; j < naddrs; j++)
			rlb_track_handout(c, sel->order[k],
					  (struct sockaddr *)&addrs[j].addr,
					  addrs[j].addrlen);
	}
	nuniq = unique_addrs(addrs, naddrs, af, alen);
	if (nuniq == 0) {
		*h_errnop = HOST_NOT_FOUND;
		goto out_free;
	}
	/*
	 * Layout in buf, as glibc's: from its first pointer-aligned byte
	 * (the caller's buffer may start anywhere), the address list and
	 * the aliases, then the addresses (so aligned too), the name and
	 * the alias.
	 */
	pad = (alignof(char *) - (uintptr_t)buf % alignof(char *)) %
	      alignof(char *);
	hlen = strlen(hname) + 1;
	nlen = strlen(name) + 1;
	if (buflen < pad || buflen - pad < (nuniq + 1 + 2) * sizeof(char *) +
						   nuniq * alen + hlen + nlen) {
		*h_errnop = NETDB_INTERNAL;
		errno = ERANGE;
		rc = ERANGE;
		goto out_free;
	}
	list = (char **)(void *)(buf + pad);
	aliases = list + nuniq + 1;
	p = (char *)(aliases + 2);
	for (size_t j = 0; j < nuniq; j++) {
		list[j] = memcpy(p, addr_bytes(&addrs[j]), alen);
		p += alen;
	}
	list[nuniq] = NULL;
	ret->h_name = memcpy(p, hname, hlen);
	p += hlen;
	aliases[0] = memcpy(p, name, nlen);
	aliases[1] = NULL;
	ret->h_aliases = aliases;
	ret->h_addrtype = af;
	ret->h_length = (int)alen;
	ret->h_addr_list = list;
	*result = ret;
	*h_errnop = NETDB_SUCCESS;
out_free:
	free(addrs);
	free(heap);
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
	int herr = NETDB_INTERNAL, saved = errno;
	size_t len;

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

/* The cluster of cfg that the first tried replica in one belongs to. */
static struct rlb_cluster *failover_cluster(struct rlb_config *cfg,
					    const struct rlb_owner *tried,
					    size_t ntried)
{
	for (size_t k = 0; k < ntried; k++)
		for (size_t ci = 0; ci < cfg->nclusters; ci++)
			if (cfg->clusters[ci].name_hash == tried[k].cluster &&
			    cfg->clusters[ci].s.connect_failover)
				return &cfg->clusters[ci];
	return NULL;
}

bool rlb_resolve_next_address(struct rlb_config *cfg,
			      const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen)
{
	struct rlb_cluster *c = failover_cluster(cfg, tried, ntried);
	struct addrinfo q = {.ai_socktype = SOCK_STREAM};
	struct rlb_selection *sel, *heap;
	struct sel_storage st;
	char service[8];
	bool found = false;
	uint16_t port;

	if (!c || !failed ||
	    (failed->sa_family != AF_INET && failed->sa_family != AF_INET6))
		return false;
	port = failed->sa_family == AF_INET
		       ? ((const struct sockaddr_in *)failed)->sin_port
		       : ((const struct sockaddr_in6 *)failed)->sin6_port;
	snprintf(service, sizeof(service), "%u", ntohs(port));
	q.ai_family = failed->sa_family;
	q.ai_flags = AI_NUMERICSERV |
		     (failed->sa_family == AF_INET6 ? AI_V4MAPPED : 0);
	sel = run_selection(c, true, &st, &heap);
	if (!sel)
		return false;
	for (size_t k = 0; k < sel->n && !found; k++) {
		uint32_t idx = sel->order[k];
		struct rlb_dns_addr *addrs = NULL;
		size_t n = 0;

		if (was_tried(c, idx, tried, ntried) ||
		    replica_addrs(c, idx, service, &q, &addrs, &n) != 0)
			continue;
		for (size_t j = 0; j < n && !found; j++) {
			if (addrs[j].family != failed->sa_family ||
			    addrs[j].addrlen > sizeof(*out))
				continue;
			memcpy(out, &addrs[j].addr, addrs[j].addrlen);
			*outlen = addrs[j].addrlen;
			rlb_track_handout(c, idx, (struct sockaddr *)out,
					  *outlen);
			found = true;
		}
		free(addrs);
	}
	free(heap);
	return found;
}
