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

/* Where a key may be written: one bit per level of a file. */
enum key_scope {
	RLB_SCOPE_TOP = 1 << 0,	    /* the top level only */
	RLB_SCOPE_CLUSTER = 1 << 1, /* inside a cluster only */
	/* A setting: the top level's is the default of every cluster. */
	RLB_SCOPE_BOTH = RLB_SCOPE_TOP | RLB_SCOPE_CLUSTER,
	RLB_SCOPE_REPLICA = 1 << 2, /* inside a replica group */
};

/* How a key's value is read, and the C type it is stored as. */
enum key_type {
	RLB_TYPE_POLICY,     /* enum rlb_policy, by ClickHouse name */
	RLB_TYPE_COUNT,	     /* int64_t >= 0 */
	RLB_TYPE_REAL,	     /* double >= 0, finite; an integer is taken */
	RLB_TYPE_BOOL,	     /* bool */
	RLB_TYPE_PORT,	     /* int 1..65535 */
	RLB_TYPE_HOSTNAME,   /* char *, a checked host name */
	RLB_TYPE_PATH,	     /* char *, absolute */
	RLB_TYPE_URL_PATH,   /* char *, "/..." with no space or control */
	RLB_TYPE_DNSNAME,    /* char *, a domain name, stored absolute:
			      * lowercase, one trailing dot */
	RLB_TYPE_LOG_LEVEL,  /* enum rlb_log_level */
	RLB_TYPE_LOG_TARGET, /* enum rlb_log_target */
	/* Structure, read by code of its own; no offset, no default. */
	RLB_TYPE_CLUSTERS,
	RLB_TYPE_NAME,
	RLB_TYPE_REPLICAS,
	RLB_TYPE_HOST,
	RLB_TYPE_ADDRESS,
	RLB_NTYPES,
};

/* One key that a config may write. */
struct key {
	const char *name;
	enum key_scope scope;
	enum key_type type;
	size_t off;  /* of the value in struct rlb_settings (BOTH),
		      * rlb_config (TOP), rlb_cluster (CLUSTER) or
		      * rlb_replica (REPLICA) */
	int64_t def; /* built-in value (strings: NULL; a real: whole) */
	int64_t min; /* smallest valid value of a count (0: any) */
};

/* config_keys.c */

/* Every key, for reading values, "did you mean" hints and scope errors. */
extern const struct key rlb_cfg_keys[];
extern const size_t rlb_cfg_nkeys;
/* The bit of key k in `given` masks. */
uint64_t rlb_cfg_key_bit(const struct key *k);
/*
 * The closest valid key of level `here` to a wrong one, or NULL if none
 * is close (rlb_closest_word(), loose): for "did you mean".
 */
const char *rlb_cfg_suggest_key(const char *name, enum key_scope here);
/* The key called name that may stand at level `here`, or NULL. */
const struct key *rlb_cfg_key_find(const char *name, enum key_scope here);
/* Where the value of key k lives in base, a struct of level `here`. */
void *rlb_cfg_value_at(void *base, enum key_scope here, const struct key *k);
/* Whether values of type t are strings (char *, owned). */
bool rlb_cfg_is_string(enum key_type t);
/* Store v as a value of type t (a number, enum or bool) at dst. */
void rlb_cfg_store(enum key_type t, void *dst, int64_t v);
/* The built-in value of every key of level `here` into base, except in
 * a cluster the settings, which come from the top level. */
void rlb_cfg_set_defaults(void *base, enum key_scope here);

#endif /* RLB_CONFIG_INTERNAL_H */
