/* config_internal.h - shared by config.c, config_parse.c, config_load.c. */
#ifndef RLB_CONFIG_INTERNAL_H
#define RLB_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/*
 * What one file says, before the main and the app file are merged. The
 * `given` masks have one bit per key of config_parse.c's table: which
 * values the file (or the cluster) writes itself.
 */

/* A cluster as parsed. */
struct rlb_cfg_cluster {
	struct rlb_cluster c; /* c.s holds only the settings it gives */
	uint64_t given;	      /* which ones */
	int name_line;	      /* line of its name, for duplicate messages */
};

struct rlb_cfg_layer {
	struct rlb_config top; /* top-level values; no clusters, no files */
	uint64_t given;	       /* which ones the file writes */
	bool parsed;	       /* syntax was fine and the keys were read */
	bool has_clusters;     /* a "clusters" key, even a broken one */
	struct rlb_cfg_cluster *clusters;
	size_t nclusters;
};

/*
 * A run of lines of the text handed to libconfig, which is a file with
 * the files it @includes put in their places (config_load.c): line
 * `first` of the text, and those after it up to the next span's first,
 * are lines `line`, line + 1, ... of `file`.
 */
struct rlb_cfg_span {
	int first;	  /* first line of the text it covers, from 1 */
	const char *file; /* name for messages */
	int line;	  /* line of file that `first` is */
};

/* Error collection of one load. */
struct rlb_cfg_parser {
	const char *file; /* name for messages of the file being read */
	const char *text; /* the text being parsed, or NULL */
	/* Origin of the text's lines, by ascending first; none: p->file's. */
	const struct rlb_cfg_span *spans;
	size_t nspans;
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
 * Parse libconfig text (never NULL) into l, an empty layer. Lines are
 * named by p->spans (or as p->file's). The text must hold no @include
 * that is still to be read: libconfig is never let open a file. Every
 * error goes to p; l holds what was readable.
 */
void rlb_cfg_parse_text(struct rlb_cfg_parser *p, const char *text,
			struct rlb_cfg_layer *l);
/* One error "file:line: message"; line <= 0 leaves the line out. */
void rlb_cfg_report_at(struct rlb_cfg_parser *p, const char *file, int line,
		       const char *fmt, ...) RLB_PRINTF(4, 5);
/* Report value of environment variable var as an unknown policy. */
void rlb_cfg_bad_env_policy(struct rlb_cfg_parser *p, const char *var,
			    const char *value);
/* strdup() that marks p out of memory when it fails. */
char *rlb_cfg_strdup(struct rlb_cfg_parser *p, const char *s);

/* Built-in value of every top-level key into cfg (zeroed before). */
void rlb_cfg_defaults(struct rlb_config *cfg);
/*
 * Move the top-level values that l gives into cfg, replacing (and
 * freeing) what cfg held; l keeps the rest.
 */
void rlb_cfg_overlay(struct rlb_config *cfg, struct rlb_cfg_layer *l);
/* pc->c.s: the top level's settings, then the ones pc gives itself. */
void rlb_cfg_inherit(struct rlb_cfg_cluster *pc,
		     const struct rlb_settings *defaults);

#endif /* RLB_CONFIG_INTERNAL_H */
