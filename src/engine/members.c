/* members.c - replicas from DNS (design.md §15): asking a cluster's srv
 * and dns names, what the answer means for the membership in force (last
 * good kept on failure, NXDOMAIN held), and the config a snapshot is built
 * from, the loaded one plus the members. The asking is separate from the
 * applying so that no lock is held across a DNS query. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* Bytes of the largest answer asked for: all of a TCP answer. */
#define ANSWER_MAX 65535
/* A failing source is reported again after this long at the earliest. */
#define WARN_EVERY_MS (5 * 60 * 1000)

/* ------------------------------------------------------------------ */
/* One answer */

void rlb_members_answer_free(struct rlb_members_answer *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->m[i].host);
		free(a->m[i].glue);
	}
	free(a->m);
	memset(a, 0, sizeof(*a));
}

bool rlb_members_has(const struct rlb_members_answer *a, const char *host,
		     int port)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->m[i].port == port && strcmp(a->m[i].host, host) == 0)
			return true;
	return false;
}

static int add_member(struct rlb_members_answer *a, const struct rlb_member *m)
{
	struct rlb_member *grown;

	if (a->n >= RLB_MAX_REPLICAS || rlb_members_has(a, m->host, m->port))
		return 0;
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 8;

		grown = realloc(a->m, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		a->m = grown;
		a->cap = cap;
	}
	a->m[a->n] = *m;
	a->m[a->n].glue = NULL;
	a->m[a->n].nglue = 0;
	a->m[a->n].host = strdup(m->host);
	if (!a->m[a->n].host)
		return -ENOMEM;
	if (m->nglue) {
		a->m[a->n].glue = malloc(m->nglue * sizeof(*m->glue));
		if (!a->m[a->n].glue) {
			free(a->m[a->n].host);
			return -ENOMEM;
		}
		memcpy(a->m[a->n].glue, m->glue, m->nglue * sizeof(*m->glue));
		a->m[a->n].nglue = m->nglue;
	}
	a->n++;
	return 0;
}

/* What the answer to one question gave, in words for -v and warnings. */
static enum rlb_dns_outcome take_one(const struct rlb_dns_question *q,
				     struct rlb_dns_reply *reply,
				     struct rlb_dns_source_view *v)
{
	int rc;

	memset(reply, 0, sizeof(*reply));
	v->name = q->name;
	v->type = q->type;
	v->nrecords = 0;
	v->ttl = 0;
	if (q->len < 0) {
		v->outcome = RLB_DNS_FAILED;
		snprintf(v->why, sizeof(v->why), "no answer (%s)",
			 strerrordesc_np(q->err) ? strerrordesc_np(q->err)
						 : "?");
		return v->outcome;
	}
	rc = rlb_dns_parse(q->buf, (size_t)q->len, q->name, q->type, reply);
	if (rc == -ENOMEM) {
		v->outcome = RLB_DNS_FAILED;
		snprintf(v->why, sizeof(v->why), "out of memory");
	} else if (rc < 0) {
		v->outcome = RLB_DNS_MALFORMED;
		snprintf(v->why, sizeof(v->why), "malformed answer");
	} else if (reply->rcode == RLB_DNS_RCODE_NXDOMAIN) {
		v->outcome = RLB_DNS_NXDOMAIN;
		snprintf(v->why, sizeof(v->why), "NXDOMAIN");
	} else if (reply->rcode != RLB_DNS_RCODE_NOERROR) {
		v->outcome = RLB_DNS_FAILED;
		snprintf(v->why, sizeof(v->why), "server error (rcode %d)",
			 reply->rcode);
	} else if (reply->nanswer == 0) {
		v->outcome = RLB_DNS_EMPTY;
		snprintf(v->why, sizeof(v->why), "no records");
	} else {
		v->outcome = RLB_DNS_OK;
		v->nrecords = reply->nanswer;
		v->ttl = reply->min_ttl;
		snprintf(v->why, sizeof(v->why), "%zu records%s",
			 reply->nanswer,
			 reply->truncated ? " (truncated)" : "");
	}
	return v->outcome;
}

static bool failed(enum rlb_dns_outcome o)
{
	return o == RLB_DNS_FAILED || o == RLB_DNS_MALFORMED;
}

/*
 * The outcome of a refresh from those of two of its questions: any
 * answer makes it an answer (the members of a question that failed are
 * carried over from the last good ones, rlb_membership_apply()); then a
 * failure; NXDOMAIN only when every question says so.
 */
static enum rlb_dns_outcome combine(enum rlb_dns_outcome a,
				    enum rlb_dns_outcome b)
{
	if (a == RLB_DNS_OK || b == RLB_DNS_OK)
		return RLB_DNS_OK;
	if (failed(a) || failed(b))
		return RLB_DNS_FAILED;
	if (a == RLB_DNS_EMPTY || b == RLB_DNS_EMPTY)
		return RLB_DNS_EMPTY;
	return RLB_DNS_NXDOMAIN;
}

static void note_ttl(struct rlb_members_answer *a, uint32_t ttl)
{
	if (ttl < a->ttl)
		a->ttl = ttl;
}

/*
 * The addresses reply's additional section gives for target (at most
 * RLB_MAX_PINNED), into glue; how many. Their smallest TTL into *ttl.
 */
static size_t glue_of(const struct rlb_dns_reply *reply, const char *target,
		      struct rlb_addr *glue, uint32_t *ttl)
{
	size_t n = 0;

	for (size_t i = reply->nanswer; i < reply->n && n < RLB_MAX_PINNED;
	     i++) {
		const struct rlb_dns_record *r = &reply->records[i];

		if ((r->type != RLB_DNS_T_A && r->type != RLB_DNS_T_AAAA) ||
		    strcmp(r->name, target) != 0)
			continue;
		glue[n++] = r->addr;
		if (r->ttl < *ttl)
			*ttl = r->ttl;
	}
	return n;
}

/*
 * The srv source: each target with its port, priority and weight, and
 * the addresses the answer gives for it, so that a member needs no
 * question of its own (and stays reachable while DNS is down).
 */
static enum rlb_dns_outcome take_srv(const struct rlb_dns_question *q,
				     struct rlb_members_answer *a)
{
	struct rlb_dns_source_view *v = &a->views[a->nviews++];
	struct rlb_dns_reply reply;
	enum rlb_dns_outcome o;
	size_t targets = 0;

	struct rlb_addr glue[RLB_MAX_PINNED];
	uint32_t ttl = UINT32_MAX;

	o = take_one(q, &reply, v);
	for (size_t i = 0; o == RLB_DNS_OK && i < reply.nanswer; i++) {
		const struct rlb_dns_record *r = &reply.records[i];
		struct rlb_member m = {
			.glue = glue,
			.nglue = glue_of(&reply, r->name, glue, &ttl),
			.host = (char *)r->name,
			.port = r->port,
			.priority = r->priority,
			.weight = r->weight,
			.source = RLB_SOURCE_SRV,
			.view = (uint8_t)(v - a->views),
		};

		/* Target "." : the service is decidedly not here. */
		if (r->type != RLB_DNS_T_SRV || !r->name[0] || !r->port)
			continue;
		targets++;
		if (add_member(a, &m) < 0) {
			o = RLB_DNS_FAILED;
			snprintf(v->why, sizeof(v->why), "out of memory");
		}
	}
	if (o == RLB_DNS_OK && !targets) {
		o = v->outcome = RLB_DNS_EMPTY;
		snprintf(v->why, sizeof(v->why), "no usable targets");
	}
	if (o == RLB_DNS_OK) {
		note_ttl(a, reply.min_ttl);
		note_ttl(a, ttl);
	}
	rlb_dns_reply_free(&reply);
	return o;
}

/* The PTR question of address a: "4.3.2.1.in-addr.arpa." or nibbles. */
static void reverse_name(const struct rlb_addr *a, char *out, size_t len)
{
	size_t off = 0;

	if (a->family == AF_INET) {
		snprintf(out, len, "%u.%u.%u.%u.in-addr.arpa.", a->bytes[3],
			 a->bytes[2], a->bytes[1], a->bytes[0]);
		return;
	}
	for (int i = 15; i >= 0 && off + 4 < len; i--)
		off += (size_t)snprintf(out + off, len - off, "%x.%x.",
					a->bytes[i] & 0xf, a->bytes[i] >> 4);
	snprintf(out + off, len - off, "ip6.arpa.");
}

/* The dns source: every A and AAAA address, a replica each. q: the A
 * question's answer, then the AAAA's. */
static enum rlb_dns_outcome take_addrs(const struct rlb_cluster *c,
				       const struct rlb_dns_question *q,
				       struct rlb_members_answer *a)
{
	static const uint16_t types[2] = {RLB_DNS_T_A, RLB_DNS_T_AAAA};
	enum rlb_dns_outcome all = RLB_DNS_NXDOMAIN;

	for (size_t t = 0; t < 2; t++) {
		struct rlb_dns_source_view *v = &a->views[a->nviews++];
		struct rlb_dns_reply reply;
		enum rlb_dns_outcome o;

		o = take_one(&q[t], &reply, v);
		for (size_t i = 0; o == RLB_DNS_OK && i < reply.nanswer; i++) {
			const struct rlb_dns_record *r = &reply.records[i];
			char text[INET6_ADDRSTRLEN];
			struct rlb_member m = {
				.host = text,
				.port = c->port,
				.literal = true,
				.addr = r->addr,
				.source = RLB_SOURCE_DNS,
				.view = (uint8_t)(v - a->views),
			};

			if (r->type != types[t] ||
			    !inet_ntop(r->addr.family, r->addr.bytes, text,
				       sizeof(text)))
				continue;
			if (add_member(a, &m) < 0) {
				o = RLB_DNS_FAILED;
				snprintf(v->why, sizeof(v->why),
					 "out of memory");
			}
		}
		if (o == RLB_DNS_OK)
			note_ttl(a, reply.min_ttl);
		rlb_dns_reply_free(&reply);
		/* An IPv4-only name has no AAAA: that is no failure. */
		all = t == 0 ? o : combine(all, o);
	}
	return all;
}

/* ------------------------------------------------------------------ */
/* The second round: SRV targets' addresses, dns members' names */

/* Reverse lookups for the hostname policies, at most this many a refresh. */
#define PTR_MAX 64
/* Bytes of one answer about a target or a reverse name; a larger one
 * leaves the target to the replica path. */
#define DETAIL_MAX 4096
/* Questions of the second round asked together (their buffers' bound). */
#define DETAIL_CHUNK 256

/* One question of the second round: about member `member`. */
struct detail {
	size_t member;
	struct rlb_dns_question q;
	char name[80]; /* a PTR question's name */
};

/*
 * The name a reverse lookup gave address member m, into its host, when
 * there is one; else its host stays the address text. Only what the
 * hostname policies compare needs it; its identity stays the address.
 */
static void take_ptr(const struct rlb_dns_question *q, struct rlb_member *m)
{
	struct rlb_dns_reply reply;
	char *name;

	if (q->len < 0 || rlb_dns_parse(q->buf, (size_t)q->len, q->name,
					RLB_DNS_T_PTR, &reply) < 0)
		return;
	if (reply.rcode == RLB_DNS_RCODE_NOERROR && reply.nanswer &&
	    reply.records[0].name[0] &&
	    (name = strdup(reply.records[0].name))) {
		free(m->host);
		m->host = name;
	}
	rlb_dns_reply_free(&reply);
}

/*
 * The addresses of SRV member m's target from one of its questions,
 * appended to its glue. Whether the question had an answer at all (a
 * server that says NXDOMAIN or NODATA answered; one that failed did not).
 */
static bool take_target(const struct rlb_dns_question *q, struct rlb_member *m,
			struct rlb_members_answer *a)
{
	struct rlb_dns_reply reply;
	struct rlb_addr *grown;
	bool answered;

	if (q->len < 0 ||
	    rlb_dns_parse(q->buf, (size_t)q->len, q->name, q->type, &reply) < 0)
		return false;
	answered = reply.rcode == RLB_DNS_RCODE_NOERROR ||
		   reply.rcode == RLB_DNS_RCODE_NXDOMAIN;
	if (reply.rcode == RLB_DNS_RCODE_NOERROR && reply.nanswer) {
		grown = realloc(m->glue,
				(m->nglue + reply.nanswer) * sizeof(*m->glue));
		for (size_t i = 0;
		     grown && i < reply.nanswer && m->nglue < RLB_MAX_PINNED;
		     i++)
			if (reply.records[i].type == q->type)
				grown[m->nglue++] = reply.records[i].addr;
		if (grown)
			m->glue = grown;
		else
			answered = false;
		note_ttl(a, reply.min_ttl);
	}
	rlb_dns_reply_free(&reply);
	return answered;
}

/*
 * The questions of the second round into d[] (at most DETAIL_CHUNK), from
 * member *from on; *from moves past the members they are about. How
 * many.
 */
static size_t detail_questions(const struct rlb_cluster *c,
			       struct rlb_members_answer *a, size_t *from,
			       size_t *ptrs, struct detail *d, uint8_t *bufs)
{
	bool names = rlb_policy_ops(c->s.load_balancing)->needs_hostname;
	size_t n = 0;

	for (; *from < a->n && n + 2 <= DETAIL_CHUNK; (*from)++) {
		struct rlb_member *m = &a->m[*from];
		struct detail *x = &d[n];

		if (m->source == RLB_SOURCE_DNS && names && *ptrs < PTR_MAX) {
			reverse_name(&m->addr, x->name, sizeof(x->name));
			x->q = (struct rlb_dns_question){.name = x->name,
							 .type = RLB_DNS_T_PTR};
			x->member = *from;
			n++;
			(*ptrs)++;
		} else if (m->source == RLB_SOURCE_SRV && !m->nglue &&
			   rlb_dns_name_valid(m->host)) {
			for (size_t t = 0; t < 2; t++) {
				d[n].q = (struct rlb_dns_question){
					.name = m->host,
					.type = t ? RLB_DNS_T_AAAA
						  : RLB_DNS_T_A};
				d[n++].member = *from;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		d[i].q.buf = bufs + i * DETAIL_MAX;
		d[i].q.cap = DETAIL_MAX;
	}
	return n;
}

/*
 * The second round, together and by deadline_ms: each SRV target the
 * answer gave no address for is asked A and AAAA (so that the program's
 * own lookups never wait for a target: issue 20), each dns member its
 * reverse name when the policy compares host names. A target whose
 * questions failed, or were not asked in time, is marked glue_failed.
 */
static void ask_details(const struct rlb_cluster *c,
			const struct rlb_dns_client *dns, int64_t deadline_ms,
			struct rlb_members_answer *a)
{
	struct detail *d = malloc(DETAIL_CHUNK * sizeof(*d));
	uint8_t *bufs = malloc((size_t)DETAIL_CHUNK * DETAIL_MAX);
	size_t from = 0, asked = 0, ptrs = 0, n;

	while (d && bufs && rlb_monotonic_ms() < deadline_ms &&
	       (n = detail_questions(c, a, &from, &ptrs, d, bufs)) > 0) {
		struct rlb_dns_question q[DETAIL_CHUNK];

		for (size_t i = 0; i < n; i++)
			q[i] = d[i].q;
		dns->ask(q, n, deadline_ms);
		for (size_t i = 0; i < n; i++) {
			struct rlb_member *m = &a->m[d[i].member];

			if (q[i].type == RLB_DNS_T_PTR) {
				take_ptr(&q[i], m);
				continue;
			}
			/* A and AAAA of one target come in a pair: it
			 * failed when neither was answered. */
			bool v4 = take_target(&q[i], m, a);
			bool v6 = take_target(&q[i + 1], m, a);

			if (!v4 && !v6)
				m->glue_failed = true;
			i++;
		}
		asked = from;
	}
	/* What was not asked (out of time or of memory) is as failed. */
	for (size_t i = asked; i < a->n; i++)
		if (a->m[i].source == RLB_SOURCE_SRV && !a->m[i].nglue)
			a->m[i].glue_failed = true;
	free(bufs);
	free(d);
}

int rlb_members_ask(const struct rlb_cluster *c,
		    const struct rlb_dns_client *dns, int64_t deadline_ms,
		    struct rlb_members_answer *a)
{
	uint8_t *buf = malloc(3 * (size_t)ANSWER_MAX);
	enum rlb_dns_outcome o = RLB_DNS_NXDOMAIN;
	struct rlb_dns_question q[3];
	size_t nq = 0, k = 0;
	int saved = errno;

	memset(a, 0, sizeof(*a));
	a->ttl = UINT32_MAX;
	if (!buf) {
		a->outcome = RLB_DNS_FAILED;
		return -ENOMEM;
	}
	/* The cluster's questions together, as glibc asks A and AAAA. */
	if (c->srv)
		q[nq++] = (struct rlb_dns_question){.name = c->srv,
						    .type = RLB_DNS_T_SRV};
	if (c->dns) {
		q[nq++] = (struct rlb_dns_question){.name = c->dns,
						    .type = RLB_DNS_T_A};
		q[nq++] = (struct rlb_dns_question){.name = c->dns,
						    .type = RLB_DNS_T_AAAA};
	}
	for (size_t i = 0; i < nq; i++) {
		q[i].buf = buf + i * ANSWER_MAX;
		q[i].cap = ANSWER_MAX;
	}
	dns->ask(q, nq, INT64_MAX);
	if (c->srv)
		o = take_srv(&q[k++], a);
	if (c->dns)
		o = c->srv ? combine(o, take_addrs(c, &q[k], a))
			   : take_addrs(c, &q[k], a);
	free(buf);
	if (o == RLB_DNS_OK)
		ask_details(c, dns, deadline_ms, a);
	a->outcome = o;
	errno = saved;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The membership in force */

/* Seconds until the next refresh after an answer with TTL ttl. */
static int64_t refresh_ms(const struct rlb_cluster *c, uint32_t ttl)
{
	int64_t ms = c->s.dns_cache_ttl * 1000;

	if (ttl != UINT32_MAX && (int64_t)ttl * 1000 < ms)
		ms = (int64_t)ttl * 1000;
	return ms < c->s.dns_refresh_floor_ms ? c->s.dns_refresh_floor_ms : ms;
}

void rlb_membership_init(struct rlb_membership *ms, const struct rlb_cluster *c)
{
	memset(ms, 0, sizeof(*ms));
	ms->cluster = c->name_hash;
	ms->outcome = RLB_DNS_NONE;
}

void rlb_membership_clear(struct rlb_membership *ms)
{
	rlb_members_answer_free(&ms->now);
	memset(ms, 0, sizeof(*ms));
}

/*
 * Canonical order of members: by source, then address (dns) or target
 * and port (srv). A server that rotates its records (BIND's cyclic
 * rrset-order) then gives the same members, and in_order a stable order.
 */
static int member_cmp(const void *pa, const void *pb)
{
	const struct rlb_member *a = pa, *b = pb;
	int d;

	if (a->source != b->source)
		return a->source < b->source ? -1 : 1;
	if (a->literal && b->literal) {
		if (a->addr.family != b->addr.family)
			return a->addr.family == AF_INET ? -1 : 1;
		d = memcmp(a->addr.bytes, b->addr.bytes,
			   a->addr.family == AF_INET ? 4 : 16);
		if (d)
			return d;
	}
	d = strcmp(a->host, b->host);
	if (d)
		return d;
	return (a->port > b->port) - (a->port < b->port);
}

/* Whether answer a names the same members as ms holds. */
static bool same_members(const struct rlb_membership *ms,
			 const struct rlb_members_answer *a)
{
	if (ms->now.n != a->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct rlb_member *x = &ms->now.m[i], *y = &a->m[i];

		if (x->port != y->port || x->priority != y->priority ||
		    x->weight != y->weight || strcmp(x->host, y->host) != 0 ||
		    x->nglue != y->nglue ||
		    (x->nglue && memcmp(x->glue, y->glue,
					x->nglue * sizeof(*x->glue)) != 0))
			return false;
	}
	return true;
}

/* One warning for a source that fails, again only after a while. */
static void warn_failing(struct rlb_membership *ms, const struct rlb_cluster *c,
			 const struct rlb_members_answer *a, int64_t now_ms,
			 const char *what)
{
	char line[400];
	size_t off = 0;

	if (ms->warned_ms && now_ms - ms->warned_ms < WARN_EVERY_MS &&
	    ms->warned_outcome == a->outcome)
		return;
	ms->warned_ms = now_ms;
	ms->warned_outcome = a->outcome;
	line[0] = '\0';
	for (size_t i = 0; i < a->nviews && off < sizeof(line); i++) {
		int n = snprintf(line + off, sizeof(line) - off, "%s%s: %s",
				 i ? "; " : "", a->views[i].name,
				 a->views[i].why);

		if (n < 0)
			break;
		off += (size_t)n;
	}
	rlb_log(RLB_LOG_WARNING, "%s: DNS membership: %s; %s", c->name, line,
		what);
}

/*
 * The wait after `failures` failed refreshes in a row: the floor, doubled
 * each time, at most max(floor, dns_cache_ttl). A server that is down is
 * asked less and less often, in the background (design.md §15.2).
 */
static int64_t backoff_ms(const struct rlb_cluster *c, unsigned failures)
{
	int64_t floor = c->s.dns_refresh_floor_ms, cap = c->s.dns_cache_ttl;
	int64_t ms = floor;

	cap = cap * 1000 > floor ? cap * 1000 : floor;
	for (unsigned i = 1; i < failures && ms < cap; i++)
		ms *= 2;
	return ms < cap ? ms : cap;
}

/*
 * SRV members of answer a whose target's own questions failed take the
 * addresses the same member has in force: DNS down for the targets keeps
 * them reachable, as it keeps the members.
 */
static void keep_glue(const struct rlb_membership *ms,
		      struct rlb_members_answer *a)
{
	for (size_t i = 0; i < a->n; i++) {
		struct rlb_member *m = &a->m[i];

		if (!m->glue_failed || m->nglue)
			continue;
		for (size_t j = 0; j < ms->now.n; j++) {
			const struct rlb_member *was = &ms->now.m[j];

			if (was->source != RLB_SOURCE_SRV || !was->nglue ||
			    was->port != m->port || strcmp(was->host, m->host))
				continue;
			m->glue = malloc(was->nglue * sizeof(*m->glue));
			if (m->glue) {
				memcpy(m->glue, was->glue,
				       was->nglue * sizeof(*m->glue));
				m->nglue = was->nglue;
			}
			break;
		}
	}
}

bool rlb_membership_apply(struct rlb_membership *ms,
			  const struct rlb_cluster *c,
			  struct rlb_members_answer *a, int64_t now_ms)
{
	bool changed = false;

	ms->asked_ms = now_ms;
	ms->outcome = a->outcome;
	memcpy(ms->views, a->views, sizeof(ms->views));
	ms->nviews = a->nviews;
	switch (a->outcome) {
	case RLB_DNS_OK:
		/* A question that failed keeps the members it gave last. */
		for (size_t i = 0; i < ms->now.n; i++) {
			const struct rlb_member *m = &ms->now.m[i];

			if (m->view < a->nviews &&
			    failed(a->views[m->view].outcome) &&
			    add_member(a, m) < 0)
				break;
		}
		keep_glue(ms, a);
		if (a->n > 1)
			qsort(a->m, a->n, sizeof(*a->m), member_cmp);
		changed = !ms->answered || !same_members(ms, a);
		rlb_members_answer_free(&ms->now);
		ms->now = *a;
		memset(a, 0, sizeof(*a));
		ms->answered = true;
		ms->answered_ms = now_ms;
		ms->shared = false;
		ms->nx_since_ms = 0;
		ms->warned_ms = 0;
		ms->failures = 0;
		ms->due_ms = now_ms + refresh_ms(c, ms->now.ttl);
		return changed;
	case RLB_DNS_NXDOMAIN:
		if (!ms->nx_since_ms)
			ms->nx_since_ms = now_ms;
		if (now_ms - ms->nx_since_ms >= c->s.dns_hold_nx * 1000) {
			changed = ms->now.n > 0 || !ms->answered;
			rlb_members_answer_free(&ms->now);
			ms->answered = true;
			ms->answered_ms = now_ms;
			warn_failing(ms, c, a, now_ms,
				     "no members (held for dns_hold_nx)");
		} else {
			int64_t left = ms->nx_since_ms +
				       c->s.dns_hold_nx * 1000 - now_ms;
			int64_t next = refresh_ms(c, ms->now.ttl);

			warn_failing(ms, c, a, now_ms,
				     ms->answered ? "keeping the last good "
						    "members for dns_hold_nx"
						  : "no members yet");
			/* Come back when the hold ends, not a TTL later. */
			ms->due_ms = now_ms + (left < next ? left : next);
			if (ms->due_ms < now_ms + c->s.dns_refresh_floor_ms)
				ms->due_ms = now_ms + c->s.dns_refresh_floor_ms;
			rlb_members_answer_free(a);
			return false;
		}
		break;
	default:
		ms->nx_since_ms = 0;
		warn_failing(ms, c, a, now_ms,
			     ms->answered ? "keeping the last good members"
					  : "no members yet");
		if (failed(a->outcome)) {
			ms->failures++;
			ms->due_ms = now_ms + backoff_ms(c, ms->failures);
			rlb_members_answer_free(a);
			return changed;
		}
		break;
	}
	ms->due_ms = now_ms + refresh_ms(c, ms->now.ttl);
	rlb_members_answer_free(a);
	return changed;
}

/* ------------------------------------------------------------------ */
/* The config of a snapshot */

/* Replica form of member m of cluster c. */
static int member_replica(const struct rlb_cluster *c,
			  const struct rlb_member *m, struct rlb_replica *r)
{
	memset(r, 0, sizeof(*r));
	r->host = strdup(m->host);
	if (!r->host)
		return -ENOMEM;
	r->port = m->port ? m->port : c->port;
	r->priority = m->priority;
	r->weight = m->weight;
	r->source = m->source;
	r->line = c->line;
	if (m->literal || m->nglue) {
		size_t n = m->literal ? 1 : m->nglue;

		r->literal = malloc(n * sizeof(*r->literal));
		if (!r->literal) {
			free(r->host);
			return -ENOMEM;
		}
		if (m->literal)
			r->literal[0] = m->addr;
		else
			memcpy(r->literal, m->glue, n * sizeof(*r->literal));
		r->nliteral = n;
	}
	if (m->literal) {
		/* A dns member is its address, whatever its name. */
		char text[INET6_ADDRSTRLEN];

		inet_ntop(m->addr.family, m->addr.bytes, text, sizeof(text));
		r->identity = rlb_replica_identity(text, r->port);
	} else {
		r->identity = rlb_replica_identity(r->host, r->port);
	}
	return 0;
}

/* Whether replica identity id is already one of c's. */
static bool has_identity(const struct rlb_cluster *c, uint64_t id)
{
	for (size_t i = 0; i < c->nreplicas; i++)
		if (c->replicas[i].identity == id)
			return true;
	return false;
}

int rlb_members_add(struct rlb_cluster *c, const struct rlb_membership *ms)
{
	struct rlb_replica r;

	c->weighted = false;
	/* No answer yet is a temporary failure; programs may try again. */
	c->no_members_eai = ms && ms->answered ? 0 : EAI_AGAIN;
	for (size_t i = 0; ms && i < ms->now.n; i++) {
		if (c->nreplicas >= RLB_MAX_REPLICAS)
			break;
		if (member_replica(c, &ms->now.m[i], &r) < 0)
			return -ENOMEM;
		/* A member the config names already is the config's. */
		if (has_identity(c, r.identity)) {
			rlb_replica_clear(&r);
			continue;
		}
		if (r.weight)
			c->weighted = true;
		if (rlb_cluster_append(c, &r, 1) < 0) {
			rlb_replica_clear(&r);
			return -ENOMEM;
		}
	}
	return 0;
}

const char *rlb_dns_outcome_name(enum rlb_dns_outcome o)
{
	switch (o) {
	case RLB_DNS_OK:
		return "answered";
	case RLB_DNS_EMPTY:
		return "no records";
	case RLB_DNS_NXDOMAIN:
		return "NXDOMAIN";
	case RLB_DNS_FAILED:
		return "failed";
	case RLB_DNS_MALFORMED:
		return "malformed";
	default:
		return "not asked";
	}
}

/* ------------------------------------------------------------------ */
/* The shared answer (design.md §15.6; its file: members_shared.c) */

int64_t rlb_membership_fresh_ms(const struct rlb_cluster *c, uint32_t ttl)
{
	return refresh_ms(c, ttl);
}

void rlb_membership_adopt(struct rlb_membership *ms,
			  const struct rlb_cluster *c,
			  struct rlb_members_answer *a, int64_t now_ms,
			  int64_t age_ms)
{
	bool nx = a->outcome == RLB_DNS_NXDOMAIN;

	if (age_ms < 0)
		age_ms = 0;
	if (nx) {
		/* DNS said there are none, after its hold: so are they
		 * here, until the next refresh. */
		rlb_members_answer_free(&ms->now);
		rlb_members_answer_free(a);
		ms->answered = true;
		ms->outcome = RLB_DNS_NXDOMAIN;
		ms->due_ms = now_ms + refresh_ms(c, UINT32_MAX) - age_ms;
	} else {
		if (a->n > 1)
			qsort(a->m, a->n, sizeof(*a->m), member_cmp);
		rlb_members_answer_free(&ms->now);
		ms->now = *a;
		memset(a, 0, sizeof(*a));
		ms->answered = true;
		ms->outcome = RLB_DNS_OK;
		ms->nx_since_ms = 0;
		ms->failures = 0;
		ms->due_ms = now_ms + refresh_ms(c, ms->now.ttl) - age_ms;
	}
	ms->answered_ms = now_ms - age_ms;
	ms->asked_ms = now_ms;
	ms->nviews = 0;
	ms->shared = true;
}
