/* policy_random.c - random, the default: every replica's policy priority
 * is 0, so the key's fresh random number alone orders each tie class. */
#include "config.h"

#include <string.h>

#include "engine/engine.h"

void rlb_policy_zero_priorities(const struct rlb_cluster *c,
				const struct rlb_cluster_view *v, uint64_t turn,
				int64_t *out, size_t n, int64_t *min,
				int64_t *max)
{
	memset(out, 0, n * sizeof(*out));
	*min = *max = 0;
}

const struct rlb_policy_ops rlb_policy_random_ops = {
	.static_classes = true,
	.priorities = rlb_policy_zero_priorities,
};
