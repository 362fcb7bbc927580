/* select.c - one selection: the ordering key of SPEC 3 and its sort. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rlb.h"

/* Keys for up to this many replicas live on the stack. */
#define STACK_KEYS 64
/* Ranges up to this size are left to the final insertion sort. */
#define SMALL_RANGE 16

struct rlb_selection *rlb_selection_new(size_t n)
{
	struct rlb_selection *sel;
	size_t per = sizeof(uint64_t) + sizeof(int64_t) + sizeof(uint32_t);

	if (n > (SIZE_MAX - sizeof(*sel)) / per)
		return NULL;
	sel = malloc(sizeof(*sel) + n * per);
	if (!sel)
		return NULL;
	/* 8-byte arrays first so that every array is naturally aligned. */
	sel->n = n;
	sel->errors = (uint64_t *)(sel + 1);
	sel->policy_prio = (int64_t *)(sel->errors + n);
	sel->order = (uint32_t *)(sel->policy_prio + n);
	return sel;
}

static inline bool key_less(const struct rlb_select_key *a,
			    const struct rlb_select_key *b)
{
	if (a->errors != b->errors)
		return a->errors < b->errors;
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (a->policy_prio != b->policy_prio)
		return a->policy_prio < b->policy_prio;
	if (a->random != b->random)
		return a->random < b->random;
	return a->index < b->index;
}

static inline void key_swap(struct rlb_select_key *a, struct rlb_select_key *b)
{
	struct rlb_select_key t = *a;

	*a = *b;
	*b = t;
}

static void insertion_sort(struct rlb_select_key *k, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct rlb_select_key v = k[i];
		size_t j = i;

		while (j > 0 && key_less(&v, &k[j - 1])) {
			k[j] = k[j - 1];
			j--;
		}
		k[j] = v;
	}
}

static void sift_down(struct rlb_select_key *k, size_t root, size_t n)
{
	for (;;) {
		size_t child = 2 * root + 1;

		if (child >= n)
			return;
		if (child + 1 < n && key_less(&k[child], &k[child + 1]))
			child++;
		if (!key_less(&k[root], &k[child]))
			return;
		key_swap(&k[root], &k[child]);
		root = child;
	}
}

static void heap_sort(struct rlb_select_key *k, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(k, i, n);
	for (size_t end = n; end-- > 1;) {
		key_swap(&k[0], &k[end]);
		sift_down(k, 0, end);
	}
}

/*
 * Hoare partition of k[lo..hi] (inclusive) around the median of three;
 * returns p with lo <= p < hi such that k[lo..p] <= k[p+1..hi].
 */
static size_t partition(struct rlb_select_key *k, size_t lo, size_t hi)
{
	size_t mid = lo + (hi - lo) / 2;
	struct rlb_select_key pivot;
	size_t i = lo, j = hi;

	if (key_less(&k[mid], &k[lo]))
		key_swap(&k[mid], &k[lo]);
	if (key_less(&k[hi], &k[mid])) {
		key_swap(&k[hi], &k[mid]);
		if (key_less(&k[mid], &k[lo]))
			key_swap(&k[mid], &k[lo]);
	}
	pivot = k[mid];
	/* k[lo] <= pivot <= k[hi] act as sentinels for both scans. */
	for (;;) {
		do
			i++;
		while (key_less(&k[i], &pivot));
		do
			j--;
		while (key_less(&pivot, &k[j]));
		if (i >= j)
			return j;
		key_swap(&k[i], &k[j]);
	}
}

/*
 * Introsort without recursion: quicksort that always continues with the
 * smaller side (so the explicit stack stays below log2 n), heapsort when a
 * range goes too deep, and one insertion sort pass over the nearly sorted
 * whole at the end.
 */
void rlb_select_sort(struct rlb_select_key *keys, size_t n)
{
	struct {
		size_t lo, hi;
		unsigned depth;
	} stack[64];
	size_t top = 0, lo = 0, hi;
	unsigned depth = 0;

	if (n < 2)
		return;
	for (size_t m = n; m > 1; m >>= 1)
		depth += 2;
	hi = n - 1;
	for (;;) {
		while (hi - lo + 1 > SMALL_RANGE) {
			size_t p, ln, rn;

			if (depth == 0) {
				heap_sort(keys + lo, hi - lo + 1);
				break;
			}
			depth--;
			p = partition(keys, lo, hi);
			ln = p - lo + 1;
			rn = hi - p;
			if (ln < rn) {
				stack[top].lo = p + 1;
				stack[top].hi = hi;
				stack[top].depth = depth;
				top++;
				hi = p;
			} else {
				stack[top].lo = lo;
				stack[top].hi = p;
				stack[top].depth = depth;
				top++;
				lo = p + 1;
			}
		}
		if (top == 0)
			break;
		top--;
		lo = stack[top].lo;
		hi = stack[top].hi;
		depth = stack[top].depth;
	}
	insertion_sort(keys, n);
}

void rlb_select(struct rlb_cluster *c, bool peek, int64_t now,
		struct rlb_selection *sel)
{
	struct rlb_select_key stack_keys[STACK_KEYS];
	struct rlb_select_key *keys = stack_keys;
	size_t n = c->nreplicas < sel->n ? c->nreplicas : sel->n;
	uint64_t ignored, rr_last = 0;

	if (n == 0)
		return;
	if (!peek)
		rlb_health_decay(c, now);
	ignored = c->s.max_ignored_errors > 0 ?
			  (uint64_t)c->s.max_ignored_errors : 0;
	/* Only round_robin selections consume a turn of the counter. */
	if (c->s.load_balancing == RLB_POLICY_ROUND_ROBIN)
		rr_last = (peek ? rlb_health_rr_peek(c) :
				  rlb_health_rr_next(c)) % c->nreplicas;
	if (n > STACK_KEYS) {
		keys = malloc(n * sizeof(*keys));
		/* Out of memory: still report counts, in config order. */
		if (!keys) {
			for (size_t i = 0; i < n; i++) {
				sel->errors[i] = rlb_health_errors(c, i, now,
								   peek);
				sel->policy_prio[i] =
					rlb_policy_priority(c, i, rr_last);
				sel->order[i] = (uint32_t)i;
			}
			return;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t e = rlb_health_errors(c, i, now, peek);
		int64_t pp = rlb_policy_priority(c, i, rr_last);

		sel->errors[i] = e;
		sel->policy_prio[i] = pp;
		keys[i].errors = e > ignored ? e - ignored : 0;
		keys[i].priority = c->replicas[i].priority;
		keys[i].policy_prio = pp;
		keys[i].random = rlb_random_u32();
		keys[i].index = (uint32_t)i;
	}
	rlb_select_sort(keys, n);
	for (size_t i = 0; i < n; i++)
		sel->order[i] = keys[i].index;
	if (keys != stack_keys)
		free(keys);
}
