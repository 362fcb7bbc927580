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
	free(c->file);
}

/* Free everything cfg owns, but not cfg itself. */
static void config_clear(struct rlb_config *cfg)
{
	for (size_t i = 0; i < cfg->nclusters; i++)
		cluster_free(&cfg->clusters[i]);
	free(cfg->clusters);
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

struct rlb_cluster *rlb_config_find(const struct rlb_config *cfg,
				    const char *name)
{
	size_t len;

	if (!cfg || !name)
		return NULL;
	len = strlen(name);
	if (len && name[len - 1] == '.')
		len--;
	/* Stored names are lowercase: fold only the query, ASCII only (a
	 * locale's strncasecmp could fold 'I' to a dotless i). */
	for (size_t i = 0; i < cfg->nclusters; i++) {
		const char *cn = cfg->clusters[i].name;
		size_t k;

		for (k = 0; k < len; k++) {
			unsigned char ch = (unsigned char)name[k];

			if (ch >= 'A' && ch <= 'Z')
				ch += 'a' - 'A';
			if ((unsigned char)cn[k] != ch)
				break;
		}
		if (k == len && cn[len] == '\0')
			return &cfg->clusters[i];
	}
	return NULL;
}

bool rlb_config_changed(const struct rlb_config *cfg)
{
	return cfg && rlb_config_files_changed(&cfg->files);
}
