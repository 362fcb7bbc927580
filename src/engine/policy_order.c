/* policy_order.c - the policies that rank by config order (design.md
 * §3.1): in_order (the index), first_or_random (the offset's replica,
 * then the rest at random) and round_robin (a rotation by the cluster's
 * shared counter, the one policy whose priorities turn per selection). */
#include "config.h"

#include "engine/engine.h"

static void in_order_priorities(const struct rlb_cluster *c,
				const struct rlb_cluster_view *v, uint64_t turn,
				int64_t *out, size_t n, int64_t *min,
				int64_t *max)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (int64_t)i;
	*min = 0;
	*max = (int64_t)n - 1;
}

size_t rlb_policy_first_index(const struct rlb_cluster *c)
{
	int64_t n = (int64_t)c->nreplicas, off = c->s.first_offset;

	if (n <= 0)
		return 0;
	/* Mathematical modulo: the config rejects negative offsets, but
	 * one that slips through still names a valid index. */
	if (off < 0 || off >= n) {
		off %= n;
		if (off < 0)
			off += n;
	}
	return (size_t)off;
}

/* 0 for replica[offset mod N], 1 for the others. */
static void first_or_random_priorities(const struct rlb_cluster *c,
				       const struct rlb_cluster_view *v,
				       uint64_t turn, int64_t *out, size_t n,
				       int64_t *min, int64_t *max)
{
	size_t off = rlb_policy_first_index(c);

	for (size_t i = 0; i < n; i++)
		out[i] = i != off;
	*min = off < n ? 0 : 1;
	*max = n > 1 || off >= n ? 1 : 0;
}

/*
 * (i - L - 1) mod N, unsigned: N - 1 - L for i = 0, then up by one,
 * wrapping to 0 after N - 1. turn is L, reduced mod N here.
 */
static void round_robin_priorities(const struct rlb_cluster *c,
				   const struct rlb_cluster_view *v,
				   uint64_t turn, int64_t *out, size_t n,
				   int64_t *min, int64_t *max)
{
	uint64_t nr = c->nreplicas;
	uint64_t l = turn < nr ? turn : turn % nr;

	for (size_t i = 0; i < n; i++) {
		uint64_t p = i + nr - 1 - l;

		out[i] = (int64_t)(p >= nr ? p - nr : p);
	}
	/* All of them: a permutation of 0 .. N - 1. */
	if (n == nr) {
		*min = 0;
		*max = (int64_t)n - 1;
		return;
	}
	*min = INT64_MAX;
	*max = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		*min = out[i] < *min ? out[i] : *min;
		*max = out[i] > *max ? out[i] : *max;
	}
}

const struct rlb_policy_ops rlb_policy_in_order_ops = {
	.static_classes = true,
	.priorities = in_order_priorities,
};

const struct rlb_policy_ops rlb_policy_first_or_random_ops = {
	.static_classes = true,
	.priorities = first_or_random_priorities,
};

const struct rlb_policy_ops rlb_policy_round_robin_ops = {
	.needs_counter = true,
	.priorities = round_robin_priorities,
};
