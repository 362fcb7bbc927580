/* config_internal.h - shared by config.c, config_parse.c, config_load.c. */
#ifndef RLB_CONFIG_INTERNAL_H
#define RLB_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "rlb.h"

/* Settings that one scope (a file's top level, a cluster) gives itself. */
struct rlb_cfg_given {
	struct rlb_settings s; /* values of the keys present */
	unsigned set;	       /* which (config_parse.c bits) */
	char *local_hostname;  /* or NULL */
};

/* A cluster as parsed, with the settings written inside it. */
struct rlb_cfg_cluster {
	struct rlb_cluster c;
	struct rlb_cfg_given own;
	int name_line; /* line of its name, for duplicate messages */
};

/* What one file says, before the main and the app file are merged. */
struct rlb_cfg_layer {
	struct rlb_cfg_given top;
	char *state_dir;
	bool has_log_level;
	enum rlb_log_level log_level;
	bool has_log_target;
	enum rlb_log_target log_target;
	bool parsed; /* syntax was fine and the keys were read */
	bool has_clusters;
	struct rlb_cfg_cluster *clusters;
	size_t nclusters;
};

/* Error collection of one load. */
struct rlb_cfg_parser {
	const char *file;      /* name for messages of the file being read */
	const char *text;      /* its text, or NULL */
	const char *dir;       /* its directory, for @include'd names */
	struct rlb_diag *diag; /* may be NULL: count errors only */
	unsigned errors;
	bool nomem;
};

/* ------------------------------------------------------------------ */
/* config.c */

/* Free everything l owns and zero it; l itself is the caller's. */
void rlb_cfg_layer_free(struct rlb_cfg_layer *l);

/* ------------------------------------------------------------------ */
/* config_parse.c */

/*
 * Parse libconfig text (never NULL) into l, an empty layer, as the file
 * p->file; @include'd names are relative to dir (NULL: the working
 * directory). Every error goes to p; l holds what was readable.
 */
void rlb_cfg_parse_text(struct rlb_cfg_parser *p, const char *text,
			const char *dir, struct rlb_cfg_layer *l);
/* One error "file:line: message"; line <= 0 leaves the line out. */
void rlb_cfg_report_at(struct rlb_cfg_parser *p, const char *file, int line,
		       const char *fmt, ...) RLB_PRINTF(4, 5);
/* Report value of environment variable var as an unknown policy. */
void rlb_cfg_bad_env_policy(struct rlb_cfg_parser *p, const char *var,
			    const char *value);
/* strdup() that marks p out of memory when it fails. */
char *rlb_cfg_strdup(struct rlb_cfg_parser *p, const char *s);
/* Overlay the settings that g gives onto dst. */
void rlb_cfg_given_apply(struct rlb_settings *dst,
			 const struct rlb_cfg_given *g);

#endif /* RLB_CONFIG_INTERNAL_H */
