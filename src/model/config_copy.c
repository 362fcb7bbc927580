/* config_copy.c - copies of a config and the replicas added to one: what
 * DNS membership (design.md §15) builds each snapshot's config from, the
 * loaded one staying as it was read. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config_internal.h"

const char *rlb_replica_source_name(enum rlb_replica_source s)
{
	switch (s) {
	case RLB_SOURCE_SRV:
		return "srv";
	case RLB_SOURCE_DNS:
		return "dns";
	default:
		return "config";
	}
}

uint64_t rlb_replica_identity(const char *host, int port)
{
	char key[RLB_MAX_HOST + 16];
	size_t n;

	rlb_ascii_lower(key, host, RLB_MAX_HOST + 1);
	n = strlen(key);
	n += (size_t)snprintf(key + n, sizeof(key) - n, ":%d", port);
	return rlb_hash64(key, n, 0);
}

/* strdup() of s that may be NULL; *ok cleared when out of memory. */
static char *dup_or_null(const char *s, bool *ok)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

/* n elements of size each copied from src, NULL for none. */
static void *dup_array(const void *src, size_t n, size_t size, bool *ok)
{
	void *d;

	if (!n || !src)
		return NULL;
	d = malloc(n * size);
	if (!d) {
		*ok = false;
		return NULL;
	}
	memcpy(d, src, n * size);
	return d;
}

void rlb_replica_clear(struct rlb_replica *r)
{
	for (size_t k = 0; k < r->npinned; k++)
		free(r->pinned[k]);
	free(r->pinned);
	free(r->literal);
	free(r->host);
	memset(r, 0, sizeof(*r));
}

int rlb_replica_copy(struct rlb_replica *dst, const struct rlb_replica *src)
{
	bool ok = true;

	*dst = *src;
	dst->host = dup_or_null(src->host, &ok);
	dst->literal = dup_array(src->literal, src->nliteral,
				 sizeof(*src->literal), &ok);
	dst->pinned = NULL;
	dst->npinned = 0;
	if (src->npinned) {
		dst->pinned = calloc(src->npinned, sizeof(*dst->pinned));
		if (!dst->pinned)
			ok = false;
		for (size_t k = 0; dst->pinned && k < src->npinned; k++) {
			dst->pinned[k] = dup_or_null(src->pinned[k], &ok);
			dst->npinned++;
		}
	}
	if (!ok) {
		rlb_replica_clear(dst);
		return -ENOMEM;
	}
	return 0;
}

/* Deep copy of cluster src, its first nreplicas replicas only. */
static int cluster_copy(struct rlb_cluster *dst, const struct rlb_cluster *src,
			size_t nreplicas)
{
	bool ok = true;

	*dst = *src;
	/* Both are the snapshot's that src belongs to. */
	dst->view = NULL;
	dst->health = NULL;
	dst->name = dup_or_null(src->name, &ok);
	dst->local_hostname = dup_or_null(src->local_hostname, &ok);
	dst->srv = dup_or_null(src->srv, &ok);
	dst->dns = dup_or_null(src->dns, &ok);
	dst->health_path = dup_or_null(src->health_path, &ok);
	dst->file = dup_or_null(src->file, &ok);
	dst->nreplicas = 0;
	dst->replicas = NULL;
	if (nreplicas) {
		dst->replicas = calloc(nreplicas, sizeof(*dst->replicas));
		if (!dst->replicas)
			ok = false;
		for (size_t i = 0; dst->replicas && i < nreplicas; i++) {
			if (rlb_replica_copy(&dst->replicas[i],
					     &src->replicas[i]) < 0) {
				ok = false;
				break;
			}
			dst->nreplicas++;
		}
	}
	return ok ? 0 : -ENOMEM;
}

struct rlb_config *rlb_config_clone(const struct rlb_config *cfg, bool statics)
{
	struct rlb_config *copy = calloc(1, sizeof(*copy));
	bool ok = copy != NULL;

	if (!copy)
		goto fail;
	*copy = *cfg;
	copy->index = NULL;
	copy->clusters = NULL;
	copy->nclusters = 0;
	copy->local_hostname = dup_or_null(cfg->local_hostname, &ok);
	copy->state_dir = dup_or_null(cfg->state_dir, &ok);
	for (size_t i = 0; i < cfg->files.n; i++) {
		copy->files.stamps[i].path =
			dup_or_null(cfg->files.stamps[i].path, &ok);
		if (!copy->files.stamps[i].path)
			copy->files.n = i;
	}
	if (cfg->nclusters) {
		copy->clusters =
			calloc(cfg->nclusters, sizeof(*copy->clusters));
		if (!copy->clusters)
			ok = false;
	}
	for (size_t i = 0; ok && i < cfg->nclusters; i++) {
		const struct rlb_cluster *c = &cfg->clusters[i];

		copy->nclusters++;
		if (cluster_copy(&copy->clusters[i], c,
				 statics ? c->nstatic : c->nreplicas) < 0)
			ok = false;
		if (statics)
			copy->clusters[i].nstatic = copy->clusters[i].nreplicas;
	}
	if (!ok)
		goto fail;
	rlb_config_index(copy);
	return copy;
fail:
	rlb_config_free(copy);
	errno = ENOMEM;
	return NULL;
}

int rlb_cluster_append(struct rlb_cluster *c, struct rlb_replica *r, size_t n)
{
	struct rlb_replica *grown;

	if (!n)
		return 0;
	if (c->nreplicas + n > RLB_MAX_REPLICAS)
		n = RLB_MAX_REPLICAS - c->nreplicas;
	grown = realloc(c->replicas, (c->nreplicas + n) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	c->replicas = grown;
	memcpy(c->replicas + c->nreplicas, r, n * sizeof(*r));
	memset(r, 0, n * sizeof(*r));
	c->nreplicas += n;
	return 0;
}
