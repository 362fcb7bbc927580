/* snapshot.c - a config made ready for selection: the parsed model, the
 * engine's view of each cluster (what its policy and the hot path derive
 * from it) and its attached health state, built and freed in one place
 * and shared by reference count. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* The local hostname cluster c compares against (design.md §3.2). */
static const char *cluster_local(const struct rlb_config *cfg,
				 const struct rlb_cluster *c,
				 const char *(*fqdn)(void))
{
	if (c->local_hostname)
		return c->local_hostname;
	if (cfg->local_hostname)
		return cfg->local_hostname;
	return fqdn ? fqdn() : "";
}

void rlb_view_free(struct rlb_cluster_view *v)
{
	free(v->host_prio);
	free(v->class_order);
	free(v->class_ends);
	free(v->fast_v4);
	free((void *)v->track_stamps);
	free((void *)v->track_hints);
	memset(v, 0, sizeof(*v));
}

/* The hot path's words of c's replicas (rlb_cluster_view.fast_v4). */
static int prepare_fast(struct rlb_cluster_view *v, const struct rlb_cluster *c)
{
	size_t n = c->nreplicas ? c->nreplicas : 1;

	v->fast_v4 = calloc(n, sizeof(*v->fast_v4));
	v->track_stamps = calloc(n, sizeof(*v->track_stamps));
	v->track_hints = calloc(n, sizeof(*v->track_hints));
	if (!v->fast_v4 || !v->track_stamps || !v->track_hints)
		return -ENOMEM;
	v->all_literal = c->nreplicas > 0;
	v->one_priority = true;
	for (size_t i = 0; i < c->nreplicas; i++) {
		const struct rlb_replica *r = &c->replicas[i];
		uint32_t a;

		if (r->priority != c->replicas[0].priority)
			v->one_priority = false;
		if (r->nliteral == 0)
			v->all_literal = false;
		for (size_t k = 0; k < r->nliteral; k++)
			if (rlb_addr_v4_mapped(&r->literal[k]))
				v->all_literal = false;
		if (r->nliteral != 1 || r->literal[0].family != AF_INET ||
		    r->port < 0 || r->port > 65535)
			continue;
		memcpy(&a, r->literal[0].bytes, 4);
		v->fast_v4[i] = RLB_FAST_V4 |
				(uint64_t)htons((uint16_t)r->port) << 32 | a;
	}
	return 0;
}

int rlb_view_build(struct rlb_cluster_view *v, const struct rlb_cluster *c,
		   const char *local)
{
	memset(v, 0, sizeof(*v));
	if (rlb_policy_prepare(v, c, local ? local : "") < 0 ||
	    prepare_fast(v, c) < 0) {
		rlb_view_free(v);
		return -ENOMEM;
	}
	return 0;
}

/* Free snap and what it owns: cfg, the views, the health handles. */
static void snapshot_free(struct rlb_snapshot *snap)
{
	struct rlb_config *cfg = snap->cfg;

	for (size_t i = 0; i < cfg->nclusters; i++) {
		rlb_health_detach(cfg->clusters[i].health);
		if (snap->views)
			rlb_view_free(&snap->views[i]);
	}
	free(snap->views);
	rlb_config_free(cfg);
	free(snap);
}

struct rlb_snapshot *rlb_snapshot_new(struct rlb_config *cfg,
				      const char *(*fqdn)(void),
				      enum rlb_state_mode mode, bool prune)
{
	struct rlb_snapshot *snap = calloc(1, sizeof(*snap));

	if (!snap) {
		rlb_config_free(cfg);
		errno = ENOMEM;
		return NULL;
	}
	snap->cfg = cfg;
	atomic_init(&snap->refs, 1);
	if (cfg->nclusters) {
		snap->views = calloc(cfg->nclusters, sizeof(*snap->views));
		if (!snap->views)
			goto out_free_snap;
	}
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];
		const char *local = "";

		/* Only a hostname policy pays for the FQDN lookup. */
		if (rlb_policy_ops(c->s.load_balancing)->needs_hostname)
			local = cluster_local(cfg, c, fqdn);
		if (rlb_view_build(&snap->views[i], c, local) < 0)
			goto out_free_snap;
		c->view = &snap->views[i];
	}
	rlb_health_attach_all(cfg, mode, prune && mode == RLB_STATE_COUNT);
	return snap;

out_free_snap:
	snapshot_free(snap);
	errno = ENOMEM;
	return NULL;
}

void rlb_snapshot_get(struct rlb_snapshot *snap)
{
	atomic_fetch_add_explicit(&snap->refs, 1, memory_order_relaxed);
}

void rlb_snapshot_put(struct rlb_snapshot *snap)
{
	if (!snap || atomic_fetch_sub_explicit(&snap->refs, 1,
					       memory_order_acq_rel) != 1)
		return;
	snapshot_free(snap);
}

/* Charge replica i of c for f, where f's age allows (design.md §5). */
static void charge_replica(struct rlb_cluster *c, size_t i,
			   const struct rlb_failure *f)
{
	if (f->slowdown) {
		rlb_health_add_slowdowns(c, i, 1, rlb_now());
		rlb_log(RLB_LOG_DEBUG,
			"%s: replica %s: abandoned for another replica: "
			"slowdown counted",
			c->name, c->replicas[i].host);
		return;
	}
	rlb_health_add_errors(c, i, 1, rlb_now());
	rlb_log(RLB_LOG_DEBUG,
		"%s: replica %s: connect failed (%s): error counted, "
		"errors now %llu",
		c->name, c->replicas[i].host, strerror(f->err),
		(unsigned long long)rlb_health_errors(c, i, 0, false));
}

/* Charge every replica of c with identity id; whether there was one. */
static bool charge_identity(struct rlb_cluster *c, const struct rlb_failure *f,
			    uint64_t id)
{
	bool found = false;

	for (size_t i = 0; i < c->nreplicas; i++) {
		if (c->replicas[i].identity == id) {
			charge_replica(c, i, f);
			found = true;
		}
	}
	return found;
}

void rlb_snapshot_charge(struct rlb_snapshot *snap, const struct rlb_failure *f)
{
	struct rlb_config *cfg = snap->cfg;
	int saved = errno;

	for (size_t k = 0; k < f->n; k++) {
		for (size_t ci = 0; ci < cfg->nclusters; ci++) {
			struct rlb_cluster *c = &cfg->clusters[ci];

			if (c->name_hash != f->owners[k].cluster)
				continue;
			if (f->age_ms >= 0 &&
			    f->age_ms < c->s.connect_timeout_ms)
				continue;
			if (!charge_identity(c, f, f->owners[k].replica) &&
			    (c->srv || c->dns)) {
				/* A member that left after its address
				 * was handed out (design.md §15.4). */
				rlb_health_add_by_identity(
					c, f->owners[k].replica, 1, rlb_now(),
					f->slowdown);
				rlb_log(RLB_LOG_DEBUG,
					"%s: a replica that left the DNS "
					"membership: %s counted",
					c->name,
					f->slowdown ? "slowdown" : "error");
			}
		}
	}
	errno = saved;
}

void rlb_snapshot_traffic(struct rlb_snapshot *snap,
			  const struct rlb_owner *owners, size_t n,
			  uint64_t ino, enum rlb_conn_event ev)
{
	struct rlb_config *cfg = snap->cfg;
	int saved = errno;

	for (size_t k = 0; k < n; k++) {
		for (size_t ci = 0; ci < cfg->nclusters; ci++) {
			struct rlb_cluster *c = &cfg->clusters[ci];
			size_t i;

			if (c->name_hash != owners[k].cluster)
				continue;
			if (ev == RLB_CONN_DROP) {
				rlb_health_conn_drop(c, ino);
				continue;
			}
			if (ev == RLB_CONN_SENT) {
				rlb_health_conn_send(c, ino);
				continue;
			}
			if (ev == RLB_CONN_FORK || ev == RLB_CONN_FORKED ||
			    ev == RLB_CONN_CHILD) {
				rlb_health_conn_fork(c, ino,
						     ev - RLB_CONN_FORK);
				continue;
			}
			for (i = 0; i < c->nreplicas; i++)
				if (c->replicas[i].identity ==
				    owners[k].replica)
					break;
			if (i == c->nreplicas)
				continue; /* a member that left: not counted */
			if (ev == RLB_CONN_TAKE)
				rlb_health_conn_take(c, i, ino);
			else
				rlb_health_count_connect(
					c, i, ev == RLB_CONN_ESTABLISHED);
		}
	}
	errno = saved;
}

size_t rlb_snapshot_receive(struct rlb_snapshot *snap, uint64_t ino,
			    struct rlb_owner *owners)
{
	struct rlb_config *cfg = snap->cfg;
	size_t n = 0;
	int saved = errno;

	for (size_t ci = 0; ci < cfg->nclusters && n < RLB_MAX_OWNERS; ci++) {
		struct rlb_cluster *c = &cfg->clusters[ci];
		uint64_t replica;

		if (rlb_health_conn_receive(c, ino, &replica))
			owners[n++] = (struct rlb_owner){c->name_hash, replica};
	}
	errno = saved;
	return n;
}
