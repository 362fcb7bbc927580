/* policies.c - the policies' ops table (design.md §3.4) and what a view
 * derives from a cluster's policy: hostname priorities and the classes of
 * equal priority. Each policy's own code is in its family's file. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define RLB_POLICY_OPS_ROW(id, name, ops)                                      \
	[RLB_POLICY_##id] = &rlb_policy_##ops##_ops,
static const struct rlb_policy_ops *const policy_ops[RLB_POLICY_COUNT] = {
	RLB_POLICY_LIST(RLB_POLICY_OPS_ROW)};
#undef RLB_POLICY_OPS_ROW

const struct rlb_policy_ops *rlb_policy_ops(enum rlb_policy p)
{
	if ((unsigned)p >= RLB_POLICY_COUNT)
		return &rlb_policy_random_ops;
	return policy_ops[p];
}

/* A replica's policy priority and index, sorted by both. */
struct prio_index {
	int64_t prio;
	uint32_t index;
};

static int by_prio_then_index(const void *a, const void *b)
{
	const struct prio_index *x = a, *y = b;

	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * The replicas of c by their policy priority, ties by index, and where
 * each class of equal priority ends: v->class_order and v->class_ends.
 */
static int prepare_classes(struct rlb_cluster_view *v,
			   const struct rlb_cluster *c)
{
	size_t n = c->nreplicas;
	struct prio_index *pi = malloc(n * sizeof(*pi));
	int64_t *prio = malloc(n * sizeof(*prio));
	int64_t min, max;

	v->class_order = malloc(n * sizeof(*v->class_order));
	v->class_ends = malloc(n * sizeof(*v->class_ends));
	v->nclasses = 0;
	if (!pi || !prio || !v->class_order || !v->class_ends) {
		free(pi);
		free(prio);
		return -ENOMEM;
	}
	v->policy->priorities(c, v, 0, prio, n, &min, &max);
	for (size_t i = 0; i < n; i++) {
		pi[i].prio = prio[i];
		pi[i].index = (uint32_t)i;
	}
	qsort(pi, n, sizeof(*pi), by_prio_then_index);
	for (size_t k = 0; k < n; k++) {
		v->class_order[k] = pi[k].index;
		if (k + 1 == n || pi[k + 1].prio != pi[k].prio)
			v->class_ends[v->nclasses++] = (uint32_t)(k + 1);
	}
	free(pi);
	free(prio);
	return 0;
}

/* Each replica's hostname priority against local, and their range. */
static int prepare_hostnames(struct rlb_cluster_view *v,
			     const struct rlb_cluster *c, const char *local)
{
	int64_t *prio = malloc(c->nreplicas * sizeof(*prio));

	if (!prio)
		return -ENOMEM;
	v->host_prio_min = INT64_MAX;
	v->host_prio_max = INT64_MIN;
	for (size_t i = 0; i < c->nreplicas; i++) {
		const char *host = c->replicas[i].host;

		prio[i] = v->policy->host_priority(local, host ? host : "");
		if (prio[i] < v->host_prio_min)
			v->host_prio_min = prio[i];
		if (prio[i] > v->host_prio_max)
			v->host_prio_max = prio[i];
	}
	v->host_prio = prio;
	return 0;
}

int rlb_policy_prepare(struct rlb_cluster_view *v, const struct rlb_cluster *c,
		       const char *local)
{
	v->policy = rlb_policy_ops(c->s.load_balancing);
	if (c->nreplicas == 0)
		return 0;
	if (v->policy->needs_hostname &&
	    prepare_hostnames(v, c, local ? local : "") < 0)
		return -ENOMEM;
	if (v->policy->static_classes && prepare_classes(v, c) < 0) {
		free(v->class_order);
		v->class_order = NULL;
		free(v->class_ends);
		v->class_ends = NULL;
		free(v->host_prio);
		v->host_prio = NULL;
		return -ENOMEM;
	}
	return 0;
}

void rlb_policy_priorities(const struct rlb_cluster *c, uint64_t turn,
			   int64_t *out, size_t n, int64_t *min, int64_t *max)
{
	static const struct rlb_cluster_view none;
	const struct rlb_cluster_view *v = c->view ? c->view : &none;
	const struct rlb_policy_ops *ops =
		v->policy ? v->policy : rlb_policy_ops(c->s.load_balancing);

	if (n > c->nreplicas)
		n = c->nreplicas;
	*min = *max = 0;
	if (n == 0)
		return;
	ops->priorities(c, v, turn, out, n, min, max);
}
