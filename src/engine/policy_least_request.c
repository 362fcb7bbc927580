/* policy_least_request.c - least_request, after ClickHouse's proposal (PR
 * #109234) and Envoy's LEAST_REQUEST (design.md §3.4): priority 0 for
 * every replica, then, after the sort, the power of d choices on the
 * replicas' in-flight counts within the best tie class, and the rest of
 * each tie class by in-flight count. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* Runs up to this long are insertion sorted, up to STACK_RUN on the stack. */
#define SMALL_RUN 16
#define STACK_RUN 64

/*
 * The weight 1 / (in_flight + 1)^bias is strictly decreasing in in_flight
 * for any bias > 0, so the highest weight is the lowest count: counts are
 * compared as integers, exactly, with no pow() per replica and no two
 * counts that a tiny bias would round to one weight. (Envoy's bias acts
 * on host weights, which replicas do not have here.) A count too large
 * for 32 bits ranks as 2^32 - 1: a host holds nowhere near so many.
 */
static inline uint64_t load_of(const uint64_t *in_flight, uint32_t r)
{
	return in_flight[r] < UINT32_MAX ? in_flight[r] : UINT32_MAX;
}

static int by_packed(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* o[0 .. len), len > 1, stably by count: insertion. */
static void insertion_by_load(uint32_t *o, size_t len,
			      const uint64_t *in_flight)
{
	for (size_t i = 1; i < len; i++) {
		uint32_t r = o[i];
		uint64_t f = load_of(in_flight, r);
		size_t j = i;

		while (j > 0 && load_of(in_flight, o[j - 1]) > f) {
			o[j] = o[j - 1];
			j--;
		}
		o[j] = r;
	}
}

/*
 * o[0 .. len) stably by count, the counts lo .. lo + span - 1: a counting
 * sort (span small: the usual counts of a host). 0, or -1 without memory.
 */
static int counting_by_load(uint32_t *o, size_t len, const uint64_t *in_flight,
			    uint64_t lo, size_t span)
{
	uint32_t *count = malloc((span + 1 + len) * sizeof(*count));
	uint32_t *out = count + span + 1;

	if (!count)
		return -1;
	memset(count, 0, (span + 1) * sizeof(*count));
	for (size_t i = 0; i < len; i++)
		count[load_of(in_flight, o[i]) - lo + 1]++;
	for (size_t d = 1; d <= span; d++)
		count[d] += count[d - 1];
	for (size_t i = 0; i < len; i++)
		out[count[load_of(in_flight, o[i]) - lo]++] = o[i];
	memcpy(o, out, len * sizeof(*o));
	free(count);
	return 0;
}

/*
 * o[0 .. len) stably by in-flight count: equal counts keep their order,
 * which the sort made random. Equal counts everywhere (an idle host, or
 * no counts yet) cost one pass. A short run is insertion sorted; a long
 * one by counting when its counts span little, else as packed keys
 * (count, place), unique, so that any sort is stable on them. Without
 * memory the run keeps its random order (never a crash).
 */
static void by_load(uint32_t *o, size_t len, const uint64_t *in_flight)
{
	uint64_t stack_keys[STACK_RUN], *keys = stack_keys;
	uint32_t stack_order[STACK_RUN], *copy = stack_order;
	uint64_t lo = UINT64_MAX, hi = 0;

	for (size_t i = 0; i < len; i++) {
		uint64_t f = load_of(in_flight, o[i]);

		lo = f < lo ? f : lo;
		hi = f > hi ? f : hi;
	}
	if (len < 2 || lo == hi)
		return;
	if (len <= SMALL_RUN) {
		insertion_by_load(o, len, in_flight);
		return;
	}
	if (hi - lo < 4 * (uint64_t)len &&
	    counting_by_load(o, len, in_flight, lo, (size_t)(hi - lo + 1)) == 0)
		return;
	if (len > STACK_RUN) {
		keys = malloc(len * (sizeof(*keys) + sizeof(*copy)));
		if (!keys)
			return;
		copy = (uint32_t *)(keys + len);
	}
	for (size_t i = 0; i < len; i++) {
		keys[i] = load_of(in_flight, o[i]) << 32 | i;
		copy[i] = o[i];
	}
	qsort(keys, len, sizeof(*keys), by_packed);
	for (size_t i = 0; i < len; i++)
		o[i] = copy[keys[i] & UINT32_MAX];
	if (keys != stack_keys)
		free(keys);
}

/*
 * The sort left each tie class in a uniformly random order, so the first
 * d replicas of the best class are d distinct replicas drawn uniformly at
 * random from it: the choices. The first of them with the lowest count
 * is the pick (among equal counts, the first of a random order: a tie
 * broken at random) and goes to the front; the others of every class
 * follow by count. With bias 0 every weight is 1: the sort's random
 * order stands, and the counts play no part.
 */
static void least_request_pick(const struct rlb_cluster *c,
			       struct rlb_selection *sel, size_t n,
			       uint64_t ignored)
{
	uint32_t *o = sel->order, best;
	const uint64_t *f = sel->in_flight;
	size_t end, choices, at = 0;

	if (n < 2 || !(c->s.least_request_bias > 0))
		return;
	for (end = 1;
	     end < n && rlb_selection_tied(c, sel, ignored, o[0], o[end]);
	     end++)
		;
	choices = c->s.least_request_choices < 1 ? 1
		  : (uint64_t)c->s.least_request_choices < end
			  ? (size_t)c->s.least_request_choices
			  : end;
	for (size_t k = 1; k < choices; k++)
		if (load_of(f, o[k]) < load_of(f, o[at]))
			at = k;
	best = o[at];
	for (size_t k = at; k > 0; k--)
		o[k] = o[k - 1];
	o[0] = best;
	by_load(o + 1, end - 1, f);
	for (size_t lo = end, hi; lo < n; lo = hi) {
		for (hi = lo + 1; hi < n && rlb_selection_tied(c, sel, ignored,
							       o[lo], o[hi]);
		     hi++)
			;
		by_load(o + lo, hi - lo, f);
	}
}

const struct rlb_policy_ops rlb_policy_least_request_ops = {
	.needs_load = true,
	.static_classes = true,
	.priorities = rlb_policy_zero_priorities,
	.pick = least_request_pick,
};
