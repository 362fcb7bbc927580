/* config.c - the config model: freeing it, finding a virtual name in it,
 * telling whether its files changed. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "model/config_internal.h"

static void cluster_free(struct rlb_cluster *c)
{
	for (size_t i = 0; c->replicas && i < c->nreplicas; i++) {
		struct rlb_replica *r = &c->replicas[i];

		for (size_t k = 0; k < r->npinned; k++)
			free(r->pinned[k]);
		free(r->pinned);
		free(r->literal);
		free(r->host);
	}
	free(c->replicas);
	free(c->name);
	free(c->local_hostname);
	free(c->srv);
	free(c->dns);
	free(c->health_path);
	free(c->file);
}

/* Free everything cfg owns, but not cfg itself. */
static void config_clear(struct rlb_config *cfg)
{
	for (size_t i = 0; i < cfg->nclusters; i++)
		cluster_free(&cfg->clusters[i]);
	free(cfg->clusters);
	free(cfg->index);
	free(cfg->local_hostname);
	free(cfg->state_dir);
	rlb_config_files_free(&cfg->files);
}

void rlb_config_free(struct rlb_config *cfg)
{
	if (!cfg)
		return;
	config_clear(cfg);
	free(cfg);
}

void rlb_cfg_layer_free(struct rlb_cfg_layer *l)
{
	for (size_t i = 0; i < l->nclusters; i++)
		cluster_free(&l->clusters[i].c);
	free(l->clusters);
	config_clear(&l->top);
	memset(l, 0, sizeof(*l));
}

void rlb_config_index(struct rlb_config *cfg)
{
	size_t size = 16;

	free(cfg->index);
	cfg->index = NULL;
	while (size < 2 * cfg->nclusters)
		size *= 2;
	if (cfg->nclusters > UINT32_MAX - 1 ||
	    !(cfg->index = calloc(size, sizeof(*cfg->index))))
		return;
	cfg->index_mask = size - 1;
	for (size_t i = 0; i < cfg->nclusters; i++) {
		size_t h = cfg->clusters[i].name_hash & cfg->index_mask;

		while (cfg->index[h])
			h = (h + 1) & cfg->index_mask;
		cfg->index[h] = (uint32_t)i + 1;
	}
}

/* Whether stored name cn is the query (len bytes, any ASCII case). */
static bool name_is(const char *cn, const char *name, size_t len)
{
	size_t k;

	for (k = 0; k < len; k++) {
		unsigned char ch = (unsigned char)name[k];

		if (ch >= 'A' && ch <= 'Z')
			ch += 'a' - 'A';
		if ((unsigned char)cn[k] != ch)
			return false;
	}
	return cn[len] == '\0';
}

static const char *cluster_name(void *cfg, size_t i)
{
	return ((const struct rlb_config *)cfg)->clusters[i].name;
}

const char *rlb_config_near_miss(const struct rlb_config *cfg, const char *name)
{
	if (!cfg || !name)
		return NULL;
	return rlb_closest_word(name, cluster_name, (void *)cfg, cfg->nclusters,
				true);
}

struct rlb_cluster *rlb_config_find(const struct rlb_config *cfg,
				    const char *name)
{
	char folded[RLB_MAX_HOST + 1];
	size_t len, h;

	if (!cfg || !name)
		return NULL;
	/*
	 * A few names, and most queries are one of them exactly: a first
	 * byte and strcmp() tell without the query's length. Only a query
	 * that may match in another case or with a trailing dot goes on.
	 */
	if (!cfg->index || cfg->nclusters <= 8) {
		unsigned char c0 = (unsigned char)name[0];
		bool unsure = false;

		if (c0 >= 'A' && c0 <= 'Z')
			c0 += 'a' - 'A';
		for (size_t i = 0; i < cfg->nclusters; i++) {
			const char *cn = cfg->clusters[i].name;

			if ((unsigned char)cn[0] != c0)
				continue;
			if (strcmp(cn, name) == 0)
				return &cfg->clusters[i];
			unsure = true;
		}
		if (!unsure)
			return NULL;
	}
	len = strnlen(name, RLB_MAX_HOST + 2);
	if (len && name[len - 1] == '.')
		len--;
	if (len > RLB_MAX_HOST)
		return NULL; /* longer than any virtual name can be */
	/* Stored names are lowercase: fold only the query, ASCII only (a
	 * locale's strncasecmp could fold 'I' to a dotless i). */
	/* A few names compare faster than one hash of the query. */
	if (!cfg->index || cfg->nclusters <= 8) {
		for (size_t i = 0; i < cfg->nclusters; i++)
			if (name_is(cfg->clusters[i].name, name, len))
				return &cfg->clusters[i];
		return NULL;
	}
	rlb_ascii_lower(folded, name, len + 1);
	folded[len] = '\0';
	h = rlb_hash64(folded, len, 0) & cfg->index_mask;
	for (; cfg->index[h]; h = (h + 1) & cfg->index_mask) {
		struct rlb_cluster *c = &cfg->clusters[cfg->index[h] - 1];

		if (strcmp(c->name, folded) == 0)
			return c;
	}
	return NULL;
}

bool rlb_config_changed(const struct rlb_config *cfg)
{
	return cfg && rlb_config_files_changed(&cfg->files);
}
