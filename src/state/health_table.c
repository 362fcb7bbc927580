/* health_table.c - the segment layout and the slot table (design.md §12.2,
 * §12.3): sizes, the header, claim, find, prune, and moving counts
 * between tables. */
#include "config.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/health_internal.h"

void rlb_table_add(_Atomic uint64_t *v, uint64_t n, uint64_t cap)
{
	uint64_t e = atomic_load(v), next;

	do {
		next = e + n < e ? UINT64_MAX : e + n;
		if (next > cap)
			next = cap;
		if (next == e)
			return;
	} while (!atomic_compare_exchange_weak(v, &e, next));
}

uint32_t rlb_table_slots(size_t n)
{
	uint32_t slots = HEALTH_MIN_SLOTS;

	while (slots < HEALTH_MAX_SLOTS && slots < 2 * n)
		slots *= 2;
	return slots;
}

static uint64_t header_check(const struct health_header *hdr)
{
	/* The fields before check, which are contiguous and unpadded. */
	return rlb_hash64(hdr, offsetof(struct health_header, check),
			  HEALTH_CHECK_SEED);
}

/* Hash of a state directory's path as the header keeps it. */
static uint64_t home_hash(const char *path, size_t len)
{
	return rlb_hash64(path, len, HEALTH_CHECK_SEED + 1);
}

uint32_t rlb_table_home_slots(const char *path)
{
	size_t len = path ? strlen(path) : 0;
	uint32_t slots = HEALTH_MIN_SLOTS;

	while (slots < HEALTH_MAX_SLOTS && (size_t)slots * 8 < len)
		slots *= 2;
	return slots;
}

/*
 * Keep the path of home in the home words of m's nslots slots, if it is
 * absolute and fits: the table has room for it, since
 * rlb_segment_create() sized it so with rlb_table_home_slots().
 */
static void home_put(struct health_map *m, uint32_t nslots,
		     const struct health_home *home)
{
	size_t len = home->path ? strlen(home->path) : 0;

	if (len == 0 || home->path[0] != '/' || len > (size_t)nslots * 8 ||
	    len > PATH_MAX)
		return;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t word = 0;

		memcpy(&word, home->path + i, len - i < 8 ? len - i : 8);
		m->slots[i / 8].home = word;
	}
	m->hdr.home_len = (uint32_t)len;
	m->hdr.home_hash = home_hash(home->path, len);
	m->hdr.home_mnt = home->mnt;
}

int rlb_table_home_get(const struct health_map *m, size_t size, char *buf,
		       size_t len)
{
	size_t n = m->hdr.home_len;

	if (n == 0 || n >= len || n > PATH_MAX || m->hdr.nslots == 0 ||
	    size < HEALTH_SIZE(m->hdr.nslots) || n > (size_t)m->hdr.nslots * 8)
		return -1;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t word = m->slots[i / 8].home;

		memcpy(buf + i, &word, n - i < 8 ? n - i : 8);
	}
	buf[n] = '\0';
	if (buf[0] != '/' || memchr(buf, '\0', n) ||
	    m->hdr.home_hash != home_hash(buf, n))
		return -1;
	return (int)n;
}

void rlb_table_header_init(struct health_map *m, uint32_t nslots,
			   uint64_t token, const struct health_home *home)
{
	struct health_header *hdr = &m->hdr;

	memset(hdr, 0, sizeof(*hdr));
	memcpy(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic));
	hdr->version = HEALTH_VERSION;
	hdr->nslots = nslots;
	hdr->token = token;
	hdr->name_hash = home->name_hash;
	hdr->dir_dev = home->dir_dev;
	hdr->dir_ino = home->dir_ino;
	hdr->created = rlb_now();
	atomic_store(&hdr->decay_time, 0);
	atomic_store(&hdr->rr_counter, 0);
	atomic_store(&hdr->successor, 0);
	hdr->check = header_check(hdr);
	home_put(m, nslots, home);
}

int rlb_table_header_validate(const struct health_header *hdr, size_t size,
			      uint64_t token, uint64_t name_hash, char *why,
			      size_t whylen)
{
	uint32_t n = hdr->nslots;

	if (memcmp(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic)) != 0)
		snprintf(why, whylen, "bad magic");
	else if (hdr->version != HEALTH_VERSION)
		snprintf(why, whylen, "version %u, expected %u", hdr->version,
			 HEALTH_VERSION);
	else if (n < HEALTH_MIN_SLOTS || n > HEALTH_MAX_SLOTS || (n & (n - 1)))
		snprintf(why, whylen, "%u slots", n);
	else if (size != HEALTH_SIZE(n))
		snprintf(why, whylen, "size %zu for %u slots", size, n);
	else if (hdr->check != header_check(hdr))
		snprintf(why, whylen, "bad header checksum");
	else if (hdr->token != token)
		snprintf(why, whylen, "another token");
	else if (hdr->name_hash != name_hash)
		snprintf(why, whylen, "another cluster's");
	else
		return 0;
	return -1;
}

long rlb_table_claim(struct health_map *m, uint32_t nslots, uint64_t id)
{
	size_t home = id & (nslots - 1);

	for (size_t n = 0; n < nslots; n++) {
		size_t idx = (home + n) & (nslots - 1);
		uint64_t key = atomic_load(&m->slots[idx].key);

		if (key == HEALTH_KEY_EMPTY &&
		    atomic_compare_exchange_strong(&m->slots[idx].key, &key,
						   id))
			return (long)idx;
		if (key == id)
			return (long)idx;
	}
	return -1;
}

long rlb_table_find(const struct health_map *m, uint32_t nslots, uint64_t id)
{
	size_t home = id & (nslots - 1);

	for (size_t n = 0; n < nslots; n++) {
		size_t idx = (home + n) & (nslots - 1);
		uint64_t key = atomic_load(&m->slots[idx].key);

		if (key == id)
			return (long)idx;
		if (key == HEALTH_KEY_EMPTY)
			return -1;
	}
	return -1;
}

size_t rlb_table_used(const struct health_map *m, uint32_t nslots)
{
	size_t n = 0;

	for (size_t i = 0; i < nslots; i++)
		n += atomic_load_explicit(&m->slots[i].key,
					  memory_order_relaxed) !=
		     HEALTH_KEY_EMPTY;
	return n;
}

size_t rlb_table_live(const struct health_map *m, uint32_t nslots)
{
	size_t n = 0;

	for (size_t i = 0; i < nslots; i++)
		n += atomic_load_explicit(&m->slots[i].key,
					  memory_order_relaxed) >
		     HEALTH_KEY_DROPPED;
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorted identities of c's replicas (malloc'd), or NULL on ENOMEM. */
static uint64_t *sorted_identities(const struct rlb_cluster *c)
{
	uint64_t *ids =
		malloc((c->nreplicas ? c->nreplicas : 1) * sizeof(*ids));

	if (!ids)
		return NULL;
	for (size_t i = 0; i < c->nreplicas; i++)
		ids[i] = c->replicas[i].identity;
	qsort(ids, c->nreplicas, sizeof(*ids), cmp_u64);
	return ids;
}

void rlb_table_prune(struct health_map *m, uint32_t nslots,
		     const struct rlb_cluster *c)
{
	uint64_t *ids = sorted_identities(c);

	if (!ids)
		return;
	for (size_t i = 0; i < nslots; i++) {
		uint64_t key = atomic_load(&m->slots[i].key);

		if (key <= HEALTH_KEY_DROPPED ||
		    bsearch(&key, ids, c->nreplicas, sizeof(*ids), cmp_u64))
			continue;
		atomic_compare_exchange_strong(&m->slots[i].key, &key,
					       HEALTH_KEY_DROPPED);
	}
	free(ids);
}

void rlb_table_move(struct health_map *from, uint32_t from_slots,
		    struct health_map *to, uint32_t to_slots, uint64_t cap)
{
	for (size_t i = 0; i < from_slots; i++) {
		struct health_slot *s = &from->slots[i];
		uint64_t key = atomic_load(&s->key), e, sd, cn, fl, inf;
		long idx;

		if (key <= HEALTH_KEY_DROPPED)
			continue;
		e = atomic_exchange(&s->errors, 0);
		sd = atomic_exchange(&s->slowdowns, 0);
		cn = atomic_exchange(&s->connects, 0);
		fl = atomic_exchange(&s->failures, 0);
		inf = atomic_exchange(&s->in_flight, 0);
		if (!e && !sd && !cn && !fl && !inf)
			continue;
		idx = rlb_table_claim(to, to_slots, key);
		if (idx < 0) {
			rlb_table_add(&s->errors, e, UINT64_MAX);
			rlb_table_add(&s->slowdowns, sd, UINT64_MAX);
			atomic_fetch_add(&s->connects, cn);
			atomic_fetch_add(&s->failures, fl);
			atomic_fetch_add(&s->in_flight, inf);
			continue;
		}
		rlb_table_add(&to->slots[idx].errors, e, cap);
		rlb_table_add(&to->slots[idx].slowdowns, sd, UINT64_MAX);
		atomic_fetch_add(&to->slots[idx].connects, cn);
		atomic_fetch_add(&to->slots[idx].failures, fl);
		atomic_fetch_add(&to->slots[idx].in_flight, inf);
	}
	rlb_ledger_move(from, from_slots, to, to_slots);
}

bool rlb_table_header_v3(const struct health_header *hdr, size_t size)
{
	uint32_t n = hdr->nslots;

	return memcmp(hdr->magic, HEALTH_MAGIC, sizeof(hdr->magic)) == 0 &&
	       hdr->version == 3 && n >= HEALTH_MIN_SLOTS &&
	       n <= HEALTH_MAX_SLOTS && !(n & (n - 1)) &&
	       size == HEALTH_V3_SIZE(n) && hdr->check == header_check(hdr);
}

uint64_t rlb_table_cap(const struct rlb_cluster *c)
{
	return c->s.error_cap > 0 ? (uint64_t)c->s.error_cap : 0;
}
