/* dnscache.c - the per-process cache of the real resolver's answers for
 * replica host names (design.md §4), bounded in entries and in bytes. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

#define CACHE_BUCKETS	  1024
#define CACHE_MAX_ENTRIES 8192
#define CACHE_MAX_BYTES	  (4u << 20) /* host, service and answers */
#define SERVICE_MAX	  32	     /* NI_MAXSERV: longer is no service */

/*
 * The answer of the real getaddrinfo for one (host, service, hints)
 * question, or its error, until it expires.
 */
struct cache_entry {
	struct cache_entry *next; /* bucket chain */
	uint64_t hash;
	char *host;
	char *service; /* NULL: none */
	int family, socktype, protocol, flags;
	int64_t expires_ms;	    /* monotonic; INT64_MAX: never */
	size_t bytes;		    /* what the entry costs, all told */
	struct rlb_dns_answer *ans; /* owned */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cache_entry *buckets[CACHE_BUCKETS];
static size_t cache_entries, cache_bytes;

void rlb_dnscache_fork_lock(void)
{
	pthread_mutex_lock(&cache_lock);
}

void rlb_dnscache_fork_unlock(void)
{
	pthread_mutex_unlock(&cache_lock);
}

static size_t answer_size(size_t n)
{
	return sizeof(struct rlb_dns_answer) + n * sizeof(struct rlb_dns_addr);
}

static void entry_free(struct cache_entry *e)
{
	free(e->host);
	free(e->service);
	free(e->ans);
	free(e);
}

/* Call with cache_lock held. */
static void cache_clear_locked(bool only_expired, int64_t now_ms)
{
	for (size_t b = 0; b < CACHE_BUCKETS; b++) {
		struct cache_entry **pp = &buckets[b];

		while (*pp) {
			struct cache_entry *e = *pp;

			if (only_expired && e->expires_ms > now_ms) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			cache_entries--;
			cache_bytes -= e->bytes;
			entry_free(e);
		}
	}
}

void rlb_dnscache_flush(void)
{
	pthread_mutex_lock(&cache_lock);
	cache_clear_locked(false, 0);
	pthread_mutex_unlock(&cache_lock);
}

size_t rlb_dnscache_bytes(void)
{
	size_t bytes;

	pthread_mutex_lock(&cache_lock);
	bytes = cache_bytes;
	pthread_mutex_unlock(&cache_lock);
	return bytes;
}

static uint64_t question_hash(const char *host, const char *service,
			      const struct addrinfo *q)
{
	uint64_t h = rlb_hash64(host, strlen(host), 0);
	int ints[4] = {q->ai_family, q->ai_socktype, q->ai_protocol,
		       q->ai_flags};

	if (service)
		h = rlb_hash64(service, strlen(service), h);
	return rlb_hash64(ints, sizeof(ints), h);
}

static bool same_question(const struct cache_entry *e, uint64_t hash,
			  const char *host, const char *service,
			  const struct addrinfo *q)
{
	return e->hash == hash && e->family == q->ai_family &&
	       e->socktype == q->ai_socktype && e->protocol == q->ai_protocol &&
	       e->flags == q->ai_flags && strcmp(e->host, host) == 0 &&
	       (e->service == service ||
		(e->service && service && strcmp(e->service, service) == 0));
}

/*
 * Whether a question is worth keeping: a service that no real service
 * name or port looks like (too long, or not printable ASCII) is asked
 * every time instead, so that hostile strings cannot fill the cache.
 */
static bool cacheable_service(const char *service)
{
	size_t n = 0;

	if (!service)
		return true;
	for (; service[n]; n++)
		if (n >= SERVICE_MAX || service[n] <= ' ' || service[n] > '~')
			return false;
	return true;
}

/* A copy of a cached answer, owned by the caller (free()). */
static struct rlb_dns_answer *cache_get(uint64_t hash, const char *host,
					const char *service,
					const struct addrinfo *q,
					int64_t now_ms)
{
	struct rlb_dns_answer *copy = NULL;
	struct cache_entry *e;

	pthread_mutex_lock(&cache_lock);
	for (e = buckets[hash % CACHE_BUCKETS]; e; e = e->next) {
		if (!same_question(e, hash, host, service, q))
			continue;
		if (e->expires_ms > now_ms) {
			size_t size = answer_size(e->ans->n);

			copy = malloc(size);
			if (copy)
				memcpy(copy, e->ans, size);
		}
		break;
	}
	pthread_mutex_unlock(&cache_lock);
	return copy;
}

/* Store a copy of answer a to question q (replacing an older answer). */
static void cache_put(const struct rlb_dns_answer *a, uint64_t hash,
		      const char *host, const char *service,
		      const struct addrinfo *q, int64_t expires_ms,
		      int64_t now_ms)
{
	size_t asize = answer_size(a->n);
	struct cache_entry *e = calloc(1, sizeof(*e)), **pp;

	if (!e)
		return;
	e->hash = hash;
	e->family = q->ai_family;
	e->socktype = q->ai_socktype;
	e->protocol = q->ai_protocol;
	e->flags = q->ai_flags;
	e->expires_ms = expires_ms;
	e->host = strdup(host);
	e->service = service ? strdup(service) : NULL;
	e->ans = malloc(asize);
	if (!e->host || (service && !e->service) || !e->ans) {
		entry_free(e);
		return;
	}
	memcpy(e->ans, a, asize);
	e->bytes = sizeof(*e) + strlen(host) + 1 +
		   (service ? strlen(service) + 1 : 0) + asize;
	pthread_mutex_lock(&cache_lock);
	for (pp = &buckets[hash % CACHE_BUCKETS]; *pp; pp = &(*pp)->next) {
		struct cache_entry *old = *pp;

		if (same_question(old, hash, host, service, q)) {
			*pp = old->next;
			cache_entries--;
			cache_bytes -= old->bytes;
			entry_free(old);
			break;
		}
	}
	if (cache_entries >= CACHE_MAX_ENTRIES ||
	    cache_bytes + e->bytes > CACHE_MAX_BYTES)
		cache_clear_locked(true, now_ms);
	if (cache_entries >= CACHE_MAX_ENTRIES ||
	    cache_bytes + e->bytes > CACHE_MAX_BYTES)
		cache_clear_locked(false, now_ms);
	e->next = buckets[hash % CACHE_BUCKETS];
	buckets[hash % CACHE_BUCKETS] = e;
	cache_entries++;
	cache_bytes += e->bytes;
	pthread_mutex_unlock(&cache_lock);
}

struct rlb_dns_answer *rlb_dnscache_ask(const char *host, const char *service,
					const struct addrinfo *q, int64_t ttl_s,
					bool pinned, bool *fresh)
{
	int64_t now_ms = rlb_monotonic_ms();
	bool keep = (pinned || ttl_s > 0) && cacheable_service(service);
	/* A service never kept is not even read past its first bytes. */
	uint64_t hash = keep ? question_hash(host, service, q) : 0;
	struct addrinfo *res = NULL, *ai;
	struct rlb_dns_answer *a;
	size_t n = 0;
	int rc;

	*fresh = false;
	if (keep && (a = cache_get(hash, host, service, q, now_ms)))
		return a;
	/* The real resolver: never our own getaddrinfo hook. */
	rc = rlb_libc()->getaddrinfo(host, service, q, &res);
	*fresh = true;
	for (ai = rc == 0 ? res : NULL; ai; ai = ai->ai_next)
		n++;
	a = calloc(1, answer_size(n));
	if (!a) {
		if (rc == 0)
			rlb_libc()->freeaddrinfo(res);
		return NULL;
	}
	a->error = rc;
	for (ai = rc == 0 ? res : NULL; ai; ai = ai->ai_next) {
		struct rlb_dns_addr *d = &a->addrs[a->n];

		if (ai->ai_addrlen > sizeof(d->addr) || !ai->ai_addr)
			continue;
		d->family = ai->ai_family;
		d->socktype = ai->ai_socktype;
		d->protocol = ai->ai_protocol;
		d->addrlen = ai->ai_addrlen;
		memcpy(&d->addr, ai->ai_addr, ai->ai_addrlen);
		a->n++;
	}
	if (rc == 0)
		rlb_libc()->freeaddrinfo(res);
	/* EAI_SYSTEM and EAI_MEMORY are passing troubles: don't keep them. */
	if (keep && rc != EAI_SYSTEM && rc != EAI_MEMORY)
		cache_put(a, hash, host, service, q,
			  pinned ? INT64_MAX : now_ms + ttl_s * 1000, now_ms);
	return a;
}
