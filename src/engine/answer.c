/* answer.c - the answer for a virtual name, built once for every consumer
 * (as musl's __lookup_name): one selection, then each replica's addresses
 * in selection order, from the consumer's resolver, handed to the
 * consumer's sink to format (an addrinfo list, a hostent, the next replica
 * to fail over to). A replica whose name resolves nowhere counts one error
 * (design.md §4, §5.5). */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

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
static bool resolution_counts(const struct rlb_resolver *res, int rc,
			      const char *host, const struct addrinfo *q,
			      int64_t ttl_s)
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
	e = res->ask(host, NULL, &plain, ttl_s, false, &fresh);
	if (!e)
		return false;
	counts = e->error == EAI_NONAME || e->error == EAI_AGAIN ||
		 e->error == EAI_FAIL;
	free(e);
	return counts;
}

/*
 * All addresses of replica r for question q (its port or `service`),
 * appended to *out and *nout (realloc'd). A name that resolves in no
 * family counts one error, unless peek (a peek writes nothing). Returns 0
 * or the EAI_* failure.
 */
static int replica_addrs(const struct rlb_resolver *res, struct rlb_cluster *c,
			 size_t idx, const char *service,
			 const struct addrinfo *q, bool peek,
			 struct rlb_dns_addr **out, size_t *nout)
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

		e = res->ask(host, service, r->npinned ? &pq : q,
			     c->s.dns_cache_ttl, r->npinned > 0, &fresh);
		if (!e) {
			last = EAI_MEMORY;
			continue;
		}
		if (e->error) {
			last = e->error;
			if (fresh && !r->npinned && !peek &&
			    resolution_counts(res, e->error, host, q,
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
 * Run one selection into sel (stack storage for small clusters, else the
 * thread's scratch memory, *heap, given back by put_selection()). Returns
 * NULL when out of memory.
 */
struct sel_storage {
	struct rlb_selection sel;
	uint32_t order[STACK_SELECTION];
	uint64_t errors[STACK_SELECTION];
	uint64_t slowdowns[STACK_SELECTION];
	int64_t policy_prio[STACK_SELECTION];
	uint64_t in_flight[STACK_SELECTION];
};

static struct rlb_selection *run_selection(struct rlb_cluster *c, bool peek,
					   struct sel_storage *st,
					   struct rlb_selection **heap,
					   size_t *cap)
{
	struct rlb_selection *sel = &st->sel;

	*heap = NULL;
	if (c->nreplicas > STACK_SELECTION) {
		size_t len = rlb_selection_size(c->nreplicas);
		void *mem = len ? rlb_scratch_take(len, cap) : NULL;

		if (!mem)
			return NULL;
		sel = *heap = rlb_selection_at(mem, c->nreplicas);
	} else {
		sel->order = st->order;
		sel->errors = st->errors;
		sel->slowdowns = st->slowdowns;
		sel->policy_prio = st->policy_prio;
		sel->in_flight = st->in_flight;
		sel->n = c->nreplicas;
	}
	rlb_select(c, peek, rlb_op_now(), sel);
	if (!peek)
		log_selection(c, sel);
	return sel;
}

static void put_selection(struct rlb_selection *heap, size_t cap)
{
	if (heap)
		rlb_scratch_put(heap, cap);
}

/*
 * The fast path: replicas whose addresses are IP literals (pinned, or
 * the host itself) are answered without asking libc, for the questions
 * whose answer libc gives for a numeric host is plain (checked against
 * libc in test_resolve). Anything unusual takes the general path.
 */

static bool literal_port(const char *service, uint16_t *port)
{
	unsigned long v = 0;

	if (!service) {
		*port = 0;
		return true;
	}
	/* At most 9 digits, and nothing else. */
	for (size_t i = 0; service[i]; i++) {
		if (i == 9 || service[i] < '0' || service[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(service[i] - '0');
	}
	/* libc takes a numeric service modulo 2^16, as strtoul would. */
	*port = htons((uint16_t)v);
	return true;
}

static bool literal_question_init(const struct addrinfo *q, const char *service,
				  struct rlb_literal_question *lq)
{
	const int plain = AI_CANONNAME | AI_NUMERICSERV | AI_PASSIVE |
			  AI_V4MAPPED | AI_ALL;
	/*
	 * Each field in a load of its own: the caller has just stored them
	 * one by one, and the one wide load the compiler would make of two
	 * of them waits for both stores to reach the cache (a failed store
	 * forward, about 4 ns).
	 */
	int flags = __atomic_load_n(&q->ai_flags, __ATOMIC_RELAXED);
	int family = __atomic_load_n(&q->ai_family, __ATOMIC_RELAXED);
	int st = __atomic_load_n(&q->ai_socktype, __ATOMIC_RELAXED);
	int pr = __atomic_load_n(&q->ai_protocol, __ATOMIC_RELAXED);

	if (flags & ~plain)
		return false;
	if (family != AF_UNSPEC && family != AF_INET && family != AF_INET6)
		return false;
	/* IPv4 literals mapped into AF_INET6 answers: leave it to libc. */
	if (family == AF_INET6 && (flags & AI_V4MAPPED))
		return false;
	lq->family = family;
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

/* The sockaddr of literal lit with port (network order); its length. */
static socklen_t literal_sockaddr(const struct rlb_addr *lit, uint16_t port,
				  struct sockaddr_storage *ss)
{
	/* Only the bytes of the sockaddr itself are set: the length says
	 * how many are read. */
	if (lit->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		memset(in, 0, sizeof(*in));
		in->sin_family = AF_INET;
		in->sin_port = port;
		memcpy(&in->sin_addr, lit->bytes, 4);
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		memset(in6, 0, sizeof(*in6));
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
			  const struct rlb_literal_question *lq)
{
	if (lq->family != AF_INET)
		return false;
	for (size_t a = 0; a < r->nliteral; a++)
		if (rlb_addr_v4_mapped(&r->literal[a]))
			return true;
	return false;
}

/*
 * Hand the addresses of literal replica idx for question lq to sink, until
 * it says anything but MORE (in *next). Returns 0, or EAI_ADDRFAMILY when
 * the replica has no address of the family asked.
 */
static int literal_addrs(struct rlb_cluster *c, size_t idx,
			 const struct rlb_literal_question *lq,
			 const struct rlb_answer_sink *sink,
			 enum rlb_answer_next *next)
{
	const struct rlb_replica *r = &c->replicas[idx];
	uint16_t port = r->port ? htons((uint16_t)r->port) : lq->port;
	struct rlb_dns_addr a;
	int added = 0;

	*next = RLB_ANSWER_MORE;
	for (size_t k = 0; k < r->nliteral; k++) {
		const struct rlb_addr *lit = &r->literal[k];

		if (lq->family != AF_UNSPEC && lq->family != lit->family)
			continue;
		a.family = lit->family;
		a.addrlen = literal_sockaddr(lit, port, &a.addr);
		for (size_t t = 0; t < lq->ntypes; t++) {
			a.socktype = lq->socktype[t];
			a.protocol = lq->protocol[t];
			added++;
			*next = sink->address(sink->ctx, c, idx, &a);
			if (*next != RLB_ANSWER_MORE)
				return 0;
		}
	}
	return added ? 0 : EAI_ADDRFAMILY;
}

/* Whether replica r answers lq from its literals alone. */
static inline bool literal_answers(const struct rlb_replica *r,
				   const struct rlb_literal_question *lq)
{
	return r->nliteral && !mapped_for_v4(r, lq);
}

int rlb_answer(struct rlb_cluster *c, const char *service,
	       const struct addrinfo *q, bool peek,
	       const struct rlb_resolver *res,
	       const struct rlb_answer_sink *sink, const char **first)
{
	struct sel_storage st;
	struct rlb_selection *sel, *heap;
	size_t cap = 0;
	struct rlb_dns_addr *addrs = NULL;
	struct rlb_literal_question lq = {0};
	int rc, last = 0;
	bool fast = literal_question_init(q, service, &lq), done = false;

	*first = NULL;
	/* A DNS cluster with no members (design.md §15.2). */
	if (c->nreplicas == 0)
		return c->no_members_eai ? c->no_members_eai : EAI_NONAME;
	sel = run_selection(c, peek, &st, &heap, &cap);
	if (!sel)
		return EAI_MEMORY;
	for (size_t k = 0; k < sel->n && !done; k++) {
		uint32_t idx = sel->order[k];
		const struct rlb_replica *r = &c->replicas[idx];
		size_t n = 0;

		if (sink->skip && sink->skip(sink->ctx, c, idx))
			continue;
		if (fast && sink->literals && literal_answers(r, &lq)) {
			/* The run of literal replicas from here, at once. */
			size_t end = k + 1, answered;

			/* A sink that skips replicas gets them one by one;
			 * the snapshot knows when they all are literal. */
			if (!sink->skip && c->view && c->view->all_literal)
				end = sel->n;
			while (!sink->skip && end < sel->n &&
			       literal_answers(&c->replicas[sel->order[end]],
					       &lq))
				end++;
			if (sink->literals(sink->ctx, c, sel->order + k,
					   end - k, &lq,
					   &answered) == RLB_ANSWER_NOMEM) {
				last = EAI_MEMORY;
				goto out;
			}
			if (answered < end - k && !*first)
				*first = c->replicas[sel->order[k + answered]]
						 .host;
			else if (answered == end - k)
				last = EAI_ADDRFAMILY;
			k = end - 1;
			continue;
		}
		if (fast && literal_answers(r, &lq)) {
			enum rlb_answer_next next;

			rc = literal_addrs(c, idx, &lq, sink, &next);
			if (next == RLB_ANSWER_NOMEM) {
				last = EAI_MEMORY;
				goto out;
			}
			if (rc)
				last = rc;
			else if (!*first)
				*first = r->host;
			done = next == RLB_ANSWER_ENOUGH;
			continue;
		}
		rc = replica_addrs(res, c, idx, service, q, peek, &addrs, &n);
		if (rc) {
			last = rc;
			continue;
		}
		if (n && !*first)
			*first = r->host;
		for (size_t j = 0; j < n && !done; j++) {
			enum rlb_answer_next next =
				sink->address(sink->ctx, c, idx, &addrs[j]);

			if (next == RLB_ANSWER_NOMEM) {
				last = EAI_MEMORY;
				goto out;
			}
			done = next == RLB_ANSWER_ENOUGH;
		}
		free(addrs);
		addrs = NULL;
	}
	if (*first)
		last = 0;
out:
	free(addrs);
	put_selection(heap, cap);
	return *first && last != EAI_MEMORY ? 0 : (last ? last : EAI_NONAME);
}
