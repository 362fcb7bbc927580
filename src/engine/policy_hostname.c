/* policy_hostname.c - the four hostname policies (design.md §3.1):
 * nearest_hostname, hostname_levenshtein_distance,
 * hostname_longest_common_prefix and _suffix. Each replica's priority is
 * a distance from the local hostname (model's pure functions), static as
 * in ClickHouse: computed once per snapshot into the view. */
#include "config.h"

#include <string.h>

#include "engine/engine.h"

static int64_t nearest(const char *local, const char *host)
{
	return (int64_t)rlb_prefix_distance(local, host);
}

static int64_t levenshtein(const char *local, const char *host)
{
	return (int64_t)rlb_levenshtein(local, host);
}

static int64_t longest_prefix(const char *local, const char *host)
{
	return -(int64_t)rlb_common_prefix(local, host);
}

static int64_t longest_suffix(const char *local, const char *host)
{
	return -(int64_t)rlb_common_suffix(local, host);
}

/* The smallest and largest of p[0..n) into *min and *max. */
static void range_of(const int64_t *p, size_t n, int64_t *min, int64_t *max)
{
	*min = INT64_MAX;
	*max = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		*min = p[i] < *min ? p[i] : *min;
		*max = p[i] > *max ? p[i] : *max;
	}
}

/*
 * The view's precomputed priorities. Without them (a parsed config, not
 * yet a snapshot) every replica has 0: the policy degrades to random.
 * The ranges come from the view, not from out[]: read back so soon after
 * its stores, it would cost more than it computes.
 */
static void host_priorities(const struct rlb_cluster *c,
			    const struct rlb_cluster_view *v, uint64_t turn,
			    int64_t *out, size_t n, int64_t *min, int64_t *max)
{
	if (!v->host_prio) {
		rlb_policy_zero_priorities(c, v, turn, out, n, min, max);
		return;
	}
	memcpy(out, v->host_prio, n * sizeof(*out));
	if (n == c->nreplicas) {
		*min = v->host_prio_min;
		*max = v->host_prio_max;
	} else {
		range_of(v->host_prio, n, min, max);
	}
}

#define HOSTNAME_POLICY(fn)                                                    \
	{                                                                      \
		.needs_hostname = true, .static_classes = true,                \
		.host_priority = fn, .priorities = host_priorities,            \
	}

const struct rlb_policy_ops rlb_policy_nearest_hostname_ops =
	HOSTNAME_POLICY(nearest);
const struct rlb_policy_ops rlb_policy_levenshtein_ops =
	HOSTNAME_POLICY(levenshtein);
const struct rlb_policy_ops rlb_policy_lcp_ops =
	HOSTNAME_POLICY(longest_prefix);
const struct rlb_policy_ops rlb_policy_lcs_ops =
	HOSTNAME_POLICY(longest_suffix);
