/* format.c - answers in the shapes glibc's callers take, built from the
 * engine's (design.md §4.3): the addresses of an answer collected in
 * selection order (a sink), a sink a product observes (the preload's
 * connect tracking records every address handed out), a hostent laid out
 * in the caller's buffer as glibc lays it out, and the gaih_addrtuple
 * list of an NSS module's gethostbyname4_r. No lock, no allocation but
 * the collector's, errno untouched. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <nss.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* ------------------------------------------------------------------ */
/* Sinks */

static enum rlb_answer_next collect_address(void *ctx, struct rlb_cluster *c,
					    size_t idx,
					    const struct rlb_dns_addr *a)
{
	struct rlb_addr_list *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct rlb_dns_addr *grown =
			l->on_heap ? realloc(l->addrs, cap * sizeof(*grown))
				   : malloc(cap * sizeof(*grown));

		if (!grown)
			return RLB_ANSWER_NOMEM;
		/* Out of the caller's storage: what it holds comes along. */
		if (!l->on_heap && l->n)
			memcpy(grown, l->addrs, l->n * sizeof(*grown));
		l->addrs = grown;
		l->cap = cap;
		l->on_heap = true;
	}
	l->addrs[l->n++] = *a;
	return RLB_ANSWER_MORE;
}

struct rlb_answer_sink rlb_collect_sink(struct rlb_addr_list *l)
{
	return (struct rlb_answer_sink){.address = collect_address, .ctx = l};
}

void rlb_addr_list_free(struct rlb_addr_list *l)
{
	if (l->on_heap)
		free(l->addrs);
	*l = (struct rlb_addr_list){0};
}

static bool observed_skip(void *ctx, const struct rlb_cluster *c, size_t idx)
{
	const struct rlb_observed *o = ctx;

	return o->inner->skip(o->inner->ctx, c, idx);
}

static enum rlb_answer_next observed_address(void *ctx, struct rlb_cluster *c,
					     size_t idx,
					     const struct rlb_dns_addr *a)
{
	const struct rlb_observed *o = ctx;
	enum rlb_answer_next next = o->inner->address(o->inner->ctx, c, idx, a);

	/* Only what the consumer took is handed out. */
	if (next != RLB_ANSWER_NOMEM)
		o->observe(o->ctx, c, idx, a);
	return next;
}

struct rlb_answer_sink rlb_observed_sink(struct rlb_observed *o)
{
	return (struct rlb_answer_sink){
		.skip = o->inner->skip ? observed_skip : NULL,
		.address = observed_address,
		.ctx = o,
	};
}

/* ------------------------------------------------------------------ */
/* hostent */

/* The address bytes (in_addr or in6_addr) of a resolved address. */
static const void *addr_bytes(const struct rlb_dns_addr *a)
{
	if (a->family == AF_INET6)
		return &((const struct sockaddr_in6 *)&a->addr)->sin6_addr;
	return &((const struct sockaddr_in *)&a->addr)->sin_addr;
}

static size_t family_len(int af)
{
	return af == AF_INET6 ? sizeof(struct in6_addr)
			      : sizeof(struct in_addr);
}

size_t rlb_addr_list_unique(struct rlb_addr_list *l, int af)
{
	size_t nuniq = 0;

	for (size_t j = 0; j < l->n; j++) {
		size_t u;

		if (af != AF_UNSPEC && l->addrs[j].family != af)
			continue;
		for (u = 0; u < nuniq; u++)
			if (l->addrs[u].family == l->addrs[j].family &&
			    memcmp(addr_bytes(&l->addrs[u]),
				   addr_bytes(&l->addrs[j]),
				   family_len(l->addrs[j].family)) == 0)
				break;
		if (u == nuniq)
			l->addrs[nuniq++] = l->addrs[j];
	}
	l->n = nuniq;
	return nuniq;
}

/* Bytes from buf to its first pointer-aligned byte. */
static size_t align_pad(const char *buf)
{
	return (alignof(char *) - (uintptr_t)buf % alignof(char *)) %
	       alignof(char *);
}

size_t rlb_hostent_size(size_t n, int af, const char *hname, const char *alias,
			const char *buf)
{
	return align_pad(buf) + (n + 1 + 2) * sizeof(char *) +
	       n * family_len(af) + strlen(hname) + 1 + strlen(alias) + 1;
}

int rlb_format_hostent(const struct rlb_addr_list *l, int af, const char *hname,
		       const char *alias, struct hostent *ret, char *buf,
		       size_t buflen)
{
	size_t alen = family_len(af), hlen = strlen(hname) + 1,
	       nlen = strlen(alias) + 1,
	       need = rlb_hostent_size(l->n, af, hname, alias, buf);
	char **aliases, **list, *p;

	if (buflen < need)
		return ERANGE;
	/*
	 * Layout in buf, as glibc's: from its first pointer-aligned byte
	 * (the caller's buffer may start anywhere), the address list and
	 * the aliases, then the addresses (so aligned too), the name and
	 * the alias.
	 */
	list = (char **)(void *)(buf + align_pad(buf));
	aliases = list + l->n + 1;
	p = (char *)(aliases + 2);
	for (size_t j = 0; j < l->n; j++) {
		list[j] = memcpy(p, addr_bytes(&l->addrs[j]), alen);
		p += alen;
	}
	list[l->n] = NULL;
	ret->h_name = memcpy(p, hname, hlen);
	p += hlen;
	aliases[0] = memcpy(p, alias, nlen);
	aliases[1] = NULL;
	ret->h_aliases = aliases;
	ret->h_addrtype = af;
	ret->h_length = (int)alen;
	ret->h_addr_list = list;
	return 0;
}

/* ------------------------------------------------------------------ */
/* gaih_addrtuple (NSS gethostbyname4_r) */

size_t rlb_gaih_size(size_t n, const char *name, bool have_first,
		     const char *buf)
{
	size_t tuples = n - (have_first && n ? 1 : 0);

	return align_pad(buf) + tuples * sizeof(struct gaih_addrtuple) +
	       strlen(name) + 1;
}

int rlb_format_gaih(const struct rlb_addr_list *l, const char *name,
		    struct gaih_addrtuple **pat, char *buf, size_t buflen)
{
	bool have_first = *pat != NULL;
	size_t need = rlb_gaih_size(l->n, name, have_first, buf),
	       nlen = strlen(name) + 1;
	struct gaih_addrtuple *t, *prev = NULL, *first = NULL;
	char *p, *hname;

	if (l->n == 0)
		return ENOENT;
	if (buflen < need)
		return ERANGE;
	/* The tuples first (aligned), then the name they share. */
	t = (struct gaih_addrtuple *)(void *)(buf + align_pad(buf));
	p = (char *)(t + (l->n - (have_first ? 1 : 0)));
	hname = memcpy(p, name, nlen);
	for (size_t j = 0; j < l->n; j++) {
		const struct rlb_dns_addr *a = &l->addrs[j];
		struct gaih_addrtuple *cur = j == 0 && have_first ? *pat : t++;

		memset(cur, 0, sizeof(*cur));
		cur->name = hname;
		cur->family = a->family;
		memcpy(cur->addr, addr_bytes(a), family_len(a->family));
		if (a->family == AF_INET6)
			cur->scopeid = ((const struct sockaddr_in6 *)&a->addr)
					       ->sin6_scope_id;
		if (prev)
			prev->next = cur;
		else
			first = cur;
		prev = cur;
	}
	*pat = first;
	return 0;
}
