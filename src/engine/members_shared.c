/* members_shared.c - the host's shared answer of a DNS cluster (design.md
 * §15.6): the members in force as one line of text each, written by the
 * process that asked DNS and read by every other, and checked field by
 * field when read, for the file is anyone's of the user to damage. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define SHARED_MAGIC	 "replicalb-members"
#define SHARED_FUTURE_MS 60000 /* a clock this far behind the writer's */

/* Address a as text into buf ("-" for none). */
static void addr_text(const struct rlb_addr *a, char *buf, size_t len)
{
	if (!inet_ntop(a->family, a->bytes, buf, (socklen_t)len))
		snprintf(buf, len, "-");
}

int rlb_members_encode(const struct rlb_members_answer *now, bool nxdomain,
		       uint64_t cluster, int64_t wall_ms, char **out,
		       size_t *outlen)
{
	size_t cap = 256 + now->n * (RLB_MAX_HOST + 64 +
				     (RLB_MAX_PINNED + 1) * INET6_ADDRSTRLEN);
	char *buf = malloc(cap), *body;
	size_t off = 0, head;
	int n;

	if (!buf)
		return -ENOMEM;
	/* The header is written last, once the body's hash is known; its
	 * room is kept first. */
	head = 128;
	off = head;
	for (size_t i = 0; i < now->n; i++) {
		const struct rlb_member *m = &now->m[i];
		char lit[INET6_ADDRSTRLEN] = "-";

		if (m->literal)
			addr_text(&m->addr, lit, sizeof(lit));
		n = snprintf(buf + off, cap - off, "m %c %d %u %u %u %s ",
			     m->source == RLB_SOURCE_SRV ? 's' : 'd', m->port,
			     m->priority, m->weight, m->view, lit);
		off += (size_t)n;
		for (size_t g = 0; g < m->nglue; g++) {
			char t[INET6_ADDRSTRLEN];

			addr_text(&m->glue[g], t, sizeof(t));
			off += (size_t)snprintf(buf + off, cap - off, "%s%s",
						g ? "," : "", t);
		}
		off += (size_t)snprintf(buf + off, cap - off, "%s %s\n",
					m->nglue ? "" : "-", m->host);
	}
	body = buf + head;
	n = snprintf(buf, head,
		     SHARED_MAGIC " 1 %016llx %lld %u %s %zu %016llx\n",
		     (unsigned long long)cluster, (long long)wall_ms, now->ttl,
		     nxdomain ? "nxdomain" : "records", now->n,
		     (unsigned long long)rlb_hash64(body, off - head, 0));
	if (n < 0 || (size_t)n >= head) {
		free(buf);
		return -EINVAL;
	}
	memmove(buf + n, body, off - head);
	*out = buf;
	*outlen = (size_t)n + off - head;
	return 0;
}

/* The address text [s, end) into a; false when it is none. */
static bool parse_addr(const char *s, const char *end, struct rlb_addr *a)
{
	char t[INET6_ADDRSTRLEN];
	size_t n = (size_t)(end - s);

	if (n == 0 || n >= sizeof(t))
		return false;
	memcpy(t, s, n);
	t[n] = '\0';
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, t, a->bytes) == 1)
		a->family = AF_INET;
	else if (inet_pton(AF_INET6, t, a->bytes) == 1)
		a->family = AF_INET6;
	else
		return false;
	return true;
}

/* One member line [s, end) into m (its host and glue malloc'd). */
static bool parse_member(const char *s, const char *end, struct rlb_member *m)
{
	char src, lit[64], glue[RLB_MAX_PINNED * (INET6_ADDRSTRLEN + 1)];
	char host[RLB_MAX_HOST + 1], fmt[64];
	unsigned port, prio, weight, view;
	char line[sizeof(lit) + sizeof(glue) + sizeof(host) + 64];
	size_t n = (size_t)(end - s);
	int used = 0;

	if (n >= sizeof(line))
		return false;
	memcpy(line, s, n);
	line[n] = '\0';
	snprintf(fmt, sizeof(fmt),
		 "m %%c %%u %%u %%u %%u %%63s %%%zus %%%zus%%n",
		 sizeof(glue) - 1, sizeof(host) - 1);
	if (sscanf(line, fmt, &src, &port, &prio, &weight, &view, lit, glue,
		   host, &used) != 8 ||
	    (size_t)used != n || (src != 's' && src != 'd') || port > 65535 ||
	    prio > 65535 || weight > 65535 || view > 2)
		return false;
	memset(m, 0, sizeof(*m));
	m->source = src == 's' ? RLB_SOURCE_SRV : RLB_SOURCE_DNS;
	m->port = (int)port;
	m->priority = (uint16_t)prio;
	m->weight = (uint16_t)weight;
	m->view = (uint8_t)view;
	if (strcmp(lit, "-") != 0) {
		if (m->source != RLB_SOURCE_DNS ||
		    !parse_addr(lit, lit + strlen(lit), &m->addr))
			return false;
		m->literal = true;
	} else if (m->source == RLB_SOURCE_DNS) {
		return false;
	}
	/* A host is a name, or (a dns member's) its address text. */
	if (!rlb_dns_name_valid(host) &&
	    !(m->literal &&
	      parse_addr(host, host + strlen(host), &(struct rlb_addr){0})))
		return false;
	if (m->source == RLB_SOURCE_SRV && !port)
		return false;
	if (strcmp(glue, "-") != 0) {
		const char *g = glue;

		if (m->source != RLB_SOURCE_SRV)
			return false;
		m->glue = calloc(RLB_MAX_PINNED, sizeof(*m->glue));
		if (!m->glue)
			return false;
		while (*g) {
			const char *e = strchr(g, ',');

			if (!e)
				e = g + strlen(g);
			if (m->nglue >= RLB_MAX_PINNED ||
			    !parse_addr(g, e, &m->glue[m->nglue++])) {
				free(m->glue);
				m->glue = NULL;
				return false;
			}
			g = *e ? e + 1 : e;
		}
	}
	m->host = strdup(host);
	if (!m->host) {
		free(m->glue);
		return false;
	}
	return true;
}

int rlb_members_decode(const char *buf, size_t len, uint64_t cluster,
		       int64_t now_wall_ms, struct rlb_members_answer *a,
		       bool *nxdomain, int64_t *wall_ms)
{
	unsigned long long hash, check;
	long long wall;
	unsigned ttl;
	char kind[16], head[160];
	const char *p, *end = buf + len, *eol;
	size_t n, hl;
	int used = 0;

	memset(a, 0, sizeof(*a));
	eol = memchr(buf, '\n', len);
	if (!eol || (hl = (size_t)(eol - buf)) >= sizeof(head))
		return -EINVAL;
	memcpy(head, buf, hl);
	head[hl] = '\0';
	if (sscanf(head, SHARED_MAGIC " 1 %16llx %lld %u %15s %zu %16llx%n",
		   &hash, &wall, &ttl, kind, &n, &check, &used) != 6 ||
	    (size_t)used != hl || hash != cluster ||
	    wall > now_wall_ms + SHARED_FUTURE_MS || wall <= 0 ||
	    n > RLB_MAX_REPLICAS ||
	    (strcmp(kind, "records") != 0 && strcmp(kind, "nxdomain") != 0) ||
	    check != rlb_hash64(eol + 1, (size_t)(end - eol - 1), 0))
		return -EINVAL;
	*nxdomain = strcmp(kind, "nxdomain") == 0;
	if (*nxdomain && n)
		return -EINVAL;
	a->m = n ? calloc(n, sizeof(*a->m)) : NULL;
	if (n && !a->m)
		return -ENOMEM;
	a->cap = n;
	for (p = eol + 1; p < end; p = eol + 1) {
		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol || a->n >= n || !parse_member(p, eol, &a->m[a->n]) ||
		    rlb_members_has(a, a->m[a->n].host, a->m[a->n].port)) {
			if (a->n < n && a->m[a->n].host) {
				free(a->m[a->n].host);
				free(a->m[a->n].glue);
			}
			rlb_members_answer_free(a);
			return -EINVAL;
		}
		a->n++;
	}
	if (a->n != n) {
		rlb_members_answer_free(a);
		return -EINVAL;
	}
	a->ttl = ttl;
	a->outcome = *nxdomain ? RLB_DNS_NXDOMAIN : RLB_DNS_OK;
	*wall_ms = wall;
	return 0;
}

uint64_t rlb_members_shared_key(uint64_t name_hash, const char *srv,
				const char *dns)
{
	uint64_t key =
		rlb_hash64(srv ? srv : "", srv ? strlen(srv) : 0, name_hash);

	return rlb_hash64(dns ? dns : "", dns ? strlen(dns) : 0, key);
}

void rlb_members_shared_read(const char *dir, const char *name, uint64_t key,
			     bool set_aside, struct rlb_shared_answer *sh)
{
	char *buf = malloc(RLB_SHARED_MAX_BYTES);
	int64_t now = rlb_now() * 1000;
	ssize_t n;

	memset(sh, 0, sizeof(*sh));
	if (!buf)
		return;
	n = rlb_health_side_read(dir, name, RLB_SHARED_EXT, buf,
				 RLB_SHARED_MAX_BYTES);
	if (n > 0) {
		int rc = rlb_members_decode(buf, (size_t)n, key, now, &sh->a,
					    &sh->nx, &sh->wall_ms);

		sh->ok = rc == 0;
		if (rc == -EINVAL && set_aside)
			rlb_health_side_set_aside(dir, name, RLB_SHARED_EXT,
						  "not a valid shared answer");
		sh->age_ms = now - sh->wall_ms;
	}
	free(buf);
}

enum rlb_shared_use rlb_shared_answer_use(const struct rlb_shared_answer *sh,
					  const struct rlb_cluster *c,
					  int64_t had_wall_ms, bool answered)
{
	if (!sh->ok)
		return RLB_SHARED_NONE;
	if (sh->wall_ms > had_wall_ms &&
	    sh->age_ms < rlb_membership_fresh_ms(c, sh->a.ttl))
		return RLB_SHARED_FRESH;
	if (!answered && sh->age_ms < RLB_SHARED_MAX_AGE_MS)
		return RLB_SHARED_STALE;
	return RLB_SHARED_NONE;
}
