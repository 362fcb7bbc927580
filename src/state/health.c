/* health.c - the hot path of shared health (design.md §5, §12.5-§12.7):
 * decay, adds, reads, reset, the round-robin counter, recovery. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "state/health_internal.h"

/* ------------------------------------------------------------------ */
/* Decay arithmetic (clickhouse.md §5.3) */

/* Shift k that a selection at `now` applies when T is t; 64 means zero. */
static unsigned decay_shift(const struct rlb_cluster *c, int64_t t, int64_t now)
{
	int64_t hl = c->s.half_life;
	uint64_t delta, k;

	if (t == 0 || now < t)
		return 0;
	if (hl <= 0)
		return 64;
	/* Unsigned: T read from shared memory may be anything. */
	delta = (uint64_t)now - (uint64_t)t;
	/* Most selections come within a half-life of T: no division. */
	if (delta < (uint64_t)hl)
		return 0;
	k = delta / (uint64_t)hl;
	return k >= 64 ? 64 : (unsigned)k;
}

static uint64_t shift_errors(uint64_t e, unsigned k)
{
	return k >= 64 ? 0 : e >> k;
}

/* Halve a shared counter k times, atomically against concurrent adds. */
static void shift_counter(_Atomic uint64_t *v, unsigned k)
{
	uint64_t e = atomic_load(v);

	while (e && !atomic_compare_exchange_weak(v, &e, shift_errors(e, k)))
		;
}

/* ------------------------------------------------------------------ */
/* Hot path (design.md §12.5) */

/*
 * Claim replica i's slot again, lock-free, after another process pruned
 * it. NULL when the table has no room: a successor is made at the next
 * check, and no reclaim of this cluster is tried for HEALTH_RECLAIM_MS.
 */
static struct health_slot *reclaim(const struct rlb_cluster *c, struct store *s,
				   size_t i)
{
	struct rlb_health *h = c->health;
	int64_t now = rlb_monotonic_ms();
	long idx;

	if (s->readonly ||
	    now < atomic_load_explicit(&h->reclaim_ms, memory_order_relaxed))
		return NULL;
	idx = rlb_table_claim(s->map, s->nslots, c->replicas[i].identity);
	if (idx >= 0) {
		atomic_store(&s->slot[i], (uint32_t)idx);
		return &s->map->slots[idx];
	}
	atomic_store(&h->reclaim_ms, now + HEALTH_RECLAIM_MS);
	if (rlb_store_named(s)) {
		atomic_store(&h->grow_owed, true);
		atomic_store(&h->checked_ms, 0);
	}
	return NULL;
}

/* slot_of() when the slot replica i had is not its own any more. */
static struct health_slot *slot_moved(const struct rlb_cluster *c,
				      struct store *s, size_t i)
{
	if (s->readonly) {
		long found = rlb_table_find(s->map, s->nslots,
					    c->replicas[i].identity);

		return found < 0 ? NULL : &s->map->slots[found];
	}
	return reclaim(c, s, i);
}

/* Replica i's slot in s, checked to still hold its identity (one load). */
static inline struct health_slot *slot_of(const struct rlb_cluster *c,
					  struct store *s, size_t i)
{
	uint32_t idx;

	if (!s || i >= s->nreplicas || i >= c->nreplicas)
		return NULL;
	idx = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
	if (__builtin_expect(idx < s->nslots, 1) &&
	    __builtin_expect(atomic_load_explicit(&s->map->slots[idx].key,
						  memory_order_acquire) ==
				     c->replicas[i].identity,
			     1))
		return &s->map->slots[idx];
	return slot_moved(c, s, i);
}

/* The decay of a selection at `now` on store s (see rlb_health_decay()). */
static void decay_store(struct rlb_cluster *c, struct store *s, int64_t now)
{
	int64_t t;
	unsigned k;

	if (!s || s->readonly)
		return;
	t = atomic_load(&s->map->hdr.decay_time);
	if (t == 0) {
		atomic_compare_exchange_strong(&s->map->hdr.decay_time, &t,
					       now);
		return;
	}
	k = decay_shift(c, t, now);
	/* Only the process that moves T shifts, exactly once per move. */
	if (k == 0 ||
	    !atomic_compare_exchange_strong(&s->map->hdr.decay_time, &t, now))
		return;
	/*
	 * Every slot, not only this process's replicas: T is the segment's,
	 * so a replica another process knows (an apps.d overlay) or one
	 * that left the DNS membership for a while (design.md §15.4) must
	 * not keep counts from before the move.
	 */
	for (size_t j = 0; j < s->nslots; j++) {
		struct health_slot *slot = &s->map->slots[j];

		if (atomic_load_explicit(&slot->key, memory_order_relaxed) <=
		    HEALTH_KEY_DROPPED)
			continue;
		shift_counter(&slot->errors, k);
		shift_counter(&slot->slowdowns, k);
	}
}

void rlb_health_decay(struct rlb_cluster *c, int64_t now)
{
	decay_store(c, rlb_attach_check(c), now);
}

/* T of store s (0 if unset or none). */
static int64_t decay_time_of(const struct store *s)
{
	return s ? atomic_load(&s->map->hdr.decay_time) : 0;
}

/*
 * Counts without decay are read within an operation that has checked the
 * state already (a selection after its decay, a log line after an add);
 * with decay, from replicalbctl, on their own.
 */
void rlb_health_counts(const struct rlb_cluster *c, size_t i, int64_t now,
		       bool decayed, uint64_t *errors, uint64_t *slowdowns)
{
	struct store *s = decayed ? rlb_attach_check(c) : rlb_attach_now(c);
	struct health_slot *slot = slot_of(c, s, i);
	unsigned k = decayed ? decay_shift(c, decay_time_of(s), now) : 0;

	*errors = slot ? shift_errors(atomic_load(&slot->errors), k) : 0;
	*slowdowns = slot ? shift_errors(atomic_load(&slot->slowdowns), k) : 0;
}

bool rlb_health_select_counts(struct rlb_cluster *c, size_t n, int64_t now,
			      bool peek, uint64_t *errors, uint64_t *slowdowns)
{
	struct store *s = rlb_attach_check(c);
	uint64_t ignored = c->s.max_ignored_errors > 0
				   ? (uint64_t)c->s.max_ignored_errors
				   : 0;
	uint64_t max_errors = 0, any_slowdowns = 0;
	unsigned k = 0;

	if (peek)
		k = decay_shift(c, decay_time_of(s), now);
	else
		decay_store(c, s, now);

	/*
	 * Nearly always: every replica in the store, each slot still its
	 * own, no decay owed. One loop of loads and compares for that; the
	 * first replica that is not so goes the careful way.
	 */
	size_t i = 0;

	if (s && k == 0 && n <= s->nreplicas && n <= c->nreplicas) {
		const struct rlb_replica *r = c->replicas;
		struct health_slot *slots = s->map->slots;
		uint32_t nslots = s->nslots;

		for (; i < n; i++) {
			uint32_t idx = atomic_load_explicit(
				&s->slot[i], memory_order_relaxed);
			struct health_slot *slot = &slots[idx];
			uint64_t e, sd;

			if (idx >= nslots ||
			    atomic_load_explicit(&slot->key,
						 memory_order_acquire) !=
				    r[i].identity)
				break;
			e = atomic_load(&slot->errors);
			sd = atomic_load(&slot->slowdowns);
			errors[i] = e;
			slowdowns[i] = sd;
			max_errors = e > max_errors ? e : max_errors;
			any_slowdowns |= sd;
		}
	}
	for (; i < n; i++) {
		struct health_slot *slot = slot_of(c, s, i);
		uint64_t e =
			slot ? shift_errors(atomic_load(&slot->errors), k) : 0;
		uint64_t sd =
			slot ? shift_errors(atomic_load(&slot->slowdowns), k)
			     : 0;

		errors[i] = e;
		slowdowns[i] = sd;
		max_errors = e > max_errors ? e : max_errors;
		any_slowdowns |= sd;
	}
	return max_errors <= ignored && !any_slowdowns;
}

uint64_t rlb_health_errors(const struct rlb_cluster *c, size_t i, int64_t now,
			   bool decayed)
{
	uint64_t e, sd;

	rlb_health_counts(c, i, now, decayed, &e, &sd);
	return e;
}

uint64_t rlb_health_slowdowns(const struct rlb_cluster *c, size_t i,
			      int64_t now, bool decayed)
{
	uint64_t e, sd;

	rlb_health_counts(c, i, now, decayed, &e, &sd);
	return sd;
}

int64_t rlb_health_decay_time(const struct rlb_cluster *c)
{
	return decay_time_of(rlb_attach_check(c));
}

/*
 * Add n to one of replica i's counters, capped at cap, at `now`. Adding
 * first applies the decay owed up to now, as a selection would: a
 * failure seen long after the last selection counts in full instead of
 * being halved away by the next one (design.md §5). A half-life of 0
 * earns nothing here: "forget at the next selection" must not let one
 * failure wipe another that no selection has seen yet. An add that lands
 * in a store this process or another has just moved away from is moved
 * after it (design.md §12.3).
 */
static void add_to(struct rlb_cluster *c, size_t i, uint64_t id, uint64_t n,
		   int64_t now, bool slowdowns, uint64_t cap)
{
	struct rlb_health *h = c->health;
	struct health_slot *slot;
	struct store *s;
	long idx;

	s = rlb_attach_check(c);
	if (!s || s->readonly || !rlb_health_counting(c))
		return;
	if (c->s.half_life > 0)
		rlb_health_decay(c, now);
	if (i != SIZE_MAX) {
		slot = slot_of(c, s, i);
	} else {
		/* By identity: a replica the cluster no longer has. */
		idx = rlb_table_find(s->map, s->nslots, id);
		if (idx < 0)
			idx = rlb_table_claim(s->map, s->nslots, id);
		slot = idx < 0 ? NULL : &s->map->slots[idx];
	}
	if (!slot)
		return;
	rlb_table_add(slowdowns ? &slot->slowdowns : &slot->errors, n, cap);
	if (!rlb_store_named(s))
		return;
	if (rlb_attach_successor_due(h, s) && atomic_load(&h->cur) == s) {
		int saved = errno;

		rlb_attach_slow(h, c, s, rlb_monotonic_ms(), true);
		errno = saved;
	}
	if (atomic_load(&h->cur) != s) {
		struct store *cur = atomic_load(&h->cur);

		rlb_table_move(s->map, s->nslots, cur->map, cur->nslots,
			       rlb_table_cap(c));
		s = cur;
	}
	if (s->kind == STORE_MEMFD)
		rlb_saved_changed(s);
}

void rlb_health_add_errors(struct rlb_cluster *c, size_t i, uint64_t n,
			   int64_t now)
{
	add_to(c, i, 0, n, now, false, rlb_table_cap(c));
}

void rlb_health_add_slowdowns(struct rlb_cluster *c, size_t i, uint64_t n,
			      int64_t now)
{
	add_to(c, i, 0, n, now, true, UINT64_MAX);
}

void rlb_health_add_by_identity(struct rlb_cluster *c, uint64_t identity,
				uint64_t n, int64_t now, bool slowdowns)
{
	if (identity > HEALTH_KEY_DROPPED)
		add_to(c, SIZE_MAX, identity, n, now, slowdowns,
		       slowdowns ? UINT64_MAX : rlb_table_cap(c));
}

void rlb_health_reset(struct rlb_cluster *c, size_t i)
{
	struct store *s = rlb_attach_check(c);
	size_t first = i, last = i;

	if (!s || s->readonly || !rlb_health_counting(c))
		return;
	if (i == SIZE_MAX) {
		first = 0;
		last = c->nreplicas ? c->nreplicas - 1 : 0;
	}
	for (size_t j = first; j <= last && j < c->nreplicas; j++) {
		struct health_slot *slot = slot_of(c, s, j);

		if (slot) {
			atomic_store(&slot->errors, 0);
			atomic_store(&slot->slowdowns, 0);
		}
	}
	if (s->kind == STORE_MEMFD)
		rlb_saved_changed(s);
}

/* Within a selection, after its decay has checked the state. */
uint64_t rlb_health_rr_next(struct rlb_cluster *c)
{
	struct store *s = rlb_attach_now(c);

	if (!s)
		return 0;
	if (s->readonly) /* the turn it would take, not taken */
		return atomic_load_explicit(&s->map->hdr.rr_counter,
					    memory_order_relaxed);
	/* A memfd's counter is saved at exit (design.md §12.12). */
	if (s->kind == STORE_MEMFD)
		atomic_store_explicit(&s->dirty, true, memory_order_relaxed);
	return atomic_fetch_add_explicit(&s->map->hdr.rr_counter, 1,
					 memory_order_relaxed);
}

uint64_t rlb_health_rr_peek(const struct rlb_cluster *c)
{
	struct store *s = rlb_attach_check(c);

	return s ? atomic_load_explicit(&s->map->hdr.rr_counter,
					memory_order_relaxed)
		 : 0;
}

int64_t rlb_health_recovery_seconds(const struct rlb_cluster *c, size_t i,
				    int64_t now)
{
	int64_t hl = c->s.half_life;
	int64_t total, elapsed, left, t;
	uint64_t e, sd;

	rlb_health_counts(c, i, now, false, &e, &sd);
	t = rlb_health_decay_time(c);

	if (sd > e)
		e = sd; /* recovery of max(errors, slowdowns) */
	if (hl <= 0 || e == 0)
		return 0;
	if (__builtin_mul_overflow((int64_t)(64 - __builtin_clzll(e)), hl,
				   &total))
		return INT64_MAX;
	if (t == 0)
		return total;
	if (__builtin_sub_overflow(now, t, &elapsed))
		return now < t ? INT64_MAX : 0;
	if (__builtin_sub_overflow(total, elapsed, &left))
		return elapsed < 0 ? INT64_MAX : 0;
	return left > 0 ? left : 0;
}
