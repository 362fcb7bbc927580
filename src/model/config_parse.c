/* config_parse.c - libconfig text into the config model, key by key from one
 * table, with "file:line: message" diagnostics. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/config_internal.h"

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
	RLB_TYPE_BOOL,	     /* bool */
	RLB_TYPE_PORT,	     /* int 1..65535 */
	RLB_TYPE_HOSTNAME,   /* char *, a checked host name */
	RLB_TYPE_PATH,	     /* char *, absolute */
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
	int64_t def; /* built-in value (strings: NULL) */
};

#define SETTING(f) offsetof(struct rlb_settings, f)
#define CONFIG(f)  offsetof(struct rlb_config, f)
#define CLUSTER(f) offsetof(struct rlb_cluster, f)
#define REPLICA(f) offsetof(struct rlb_replica, f)

/*
 * Every key, for reading values, "did you mean" hints and scope errors.
 * A hint is the first of the closest keys valid where the wrong one
 * stands, so the order matters a little. A cluster's local_hostname is
 * not a copy of the top level's: NULL there means the top level's.
 */
static const struct key keys[] = {
	{"name", RLB_SCOPE_CLUSTER, RLB_TYPE_NAME, 0, 0},
	{"replicas", RLB_SCOPE_CLUSTER, RLB_TYPE_REPLICAS, 0, 0},
	{"port", RLB_SCOPE_CLUSTER, RLB_TYPE_PORT, CLUSTER(port), 0},
	{"load_balancing", RLB_SCOPE_BOTH, RLB_TYPE_POLICY,
	 SETTING(load_balancing), RLB_POLICY_RANDOM},
	{"load_balancing_first_offset", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(first_offset), 0},
	{"distributed_replica_error_half_life", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(half_life), 60},
	{"distributed_replica_error_cap", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(error_cap), 1000},
	{"distributed_replica_max_ignored_errors", RLB_SCOPE_BOTH,
	 RLB_TYPE_COUNT, SETTING(max_ignored_errors), 0},
	{"local_hostname", RLB_SCOPE_TOP, RLB_TYPE_HOSTNAME,
	 CONFIG(local_hostname), 0},
	{"dns_cache_ttl", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(dns_cache_ttl), 15},
	{"connect_timeout_ms", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(connect_timeout_ms), 1000},
	{"local_hostname", RLB_SCOPE_CLUSTER, RLB_TYPE_HOSTNAME,
	 CLUSTER(local_hostname), 0},
	{"connect_failover", RLB_SCOPE_BOTH, RLB_TYPE_BOOL,
	 SETTING(connect_failover), false},
	{"state_dir", RLB_SCOPE_TOP, RLB_TYPE_PATH, CONFIG(state_dir), 0},
	{"log_level", RLB_SCOPE_TOP, RLB_TYPE_LOG_LEVEL, CONFIG(log_level),
	 RLB_LOG_WARNING},
	{"log_target", RLB_SCOPE_TOP, RLB_TYPE_LOG_TARGET, CONFIG(log_target),
	 RLB_LOG_STDERR},
	{"clusters", RLB_SCOPE_TOP, RLB_TYPE_CLUSTERS, 0, 0},
	{"host", RLB_SCOPE_REPLICA, RLB_TYPE_HOST, 0, 0},
	{"port", RLB_SCOPE_REPLICA, RLB_TYPE_PORT, REPLICA(port), 0},
	{"priority", RLB_SCOPE_REPLICA, RLB_TYPE_COUNT, REPLICA(priority), 1},
	{"address", RLB_SCOPE_REPLICA, RLB_TYPE_ADDRESS, 0, 0},
};

#define N_KEYS (sizeof(keys) / sizeof(*keys))
_Static_assert(N_KEYS <= 64, "a given mask has a bit per key");

/* The bit of key k in `given` masks. */
static uint64_t key_bit(const struct key *k)
{
	return (uint64_t)1 << (k - keys);
}

/* The key called name that may stand at level `here`, or NULL. */
static const struct key *key_find(const char *name, enum key_scope here)
{
	for (const struct key *k = keys; k < keys + N_KEYS; k++) {
		if ((k->scope & here) && strcmp(k->name, name) == 0)
			return k;
	}
	return NULL;
}

/* Where the value of key k lives in base, a struct of level `here`. */
static void *value_at(void *base, enum key_scope here, const struct key *k)
{
	if (k->scope == RLB_SCOPE_BOTH && here == RLB_SCOPE_TOP)
		base = &((struct rlb_config *)base)->defaults;
	else if (k->scope == RLB_SCOPE_BOTH)
		base = &((struct rlb_cluster *)base)->s;
	return (char *)base + k->off;
}

static bool is_string(enum key_type t)
{
	return t == RLB_TYPE_HOSTNAME || t == RLB_TYPE_PATH;
}

/* Bytes of a value of each type; 0 for structure. */
static const size_t value_size[RLB_NTYPES] = {
	[RLB_TYPE_POLICY] = sizeof(enum rlb_policy),
	[RLB_TYPE_COUNT] = sizeof(int64_t),
	[RLB_TYPE_BOOL] = sizeof(bool),
	[RLB_TYPE_PORT] = sizeof(int),
	[RLB_TYPE_HOSTNAME] = sizeof(char *),
	[RLB_TYPE_PATH] = sizeof(char *),
	[RLB_TYPE_LOG_LEVEL] = sizeof(enum rlb_log_level),
	[RLB_TYPE_LOG_TARGET] = sizeof(enum rlb_log_target),
};

/* Store v as a value of type t (a number, enum or bool) at dst. */
static void store(enum key_type t, void *dst, int64_t v)
{
	switch (t) {
	case RLB_TYPE_POLICY:
		*(enum rlb_policy *)dst = (enum rlb_policy)v;
		break;
	case RLB_TYPE_COUNT:
		*(int64_t *)dst = v;
		break;
	case RLB_TYPE_BOOL:
		*(bool *)dst = v != 0;
		break;
	case RLB_TYPE_PORT:
		*(int *)dst = (int)v;
		break;
	case RLB_TYPE_LOG_LEVEL:
		*(enum rlb_log_level *)dst = (enum rlb_log_level)v;
		break;
	case RLB_TYPE_LOG_TARGET:
		*(enum rlb_log_target *)dst = (enum rlb_log_target)v;
		break;
	default:
		break; /* strings start NULL; structure has no value */
	}
}

/*
 * The built-in value of every key of level `here` into base, except in
 * a cluster the settings, which come from the top level.
 */
static void set_defaults(void *base, enum key_scope here)
{
	for (const struct key *k = keys; k < keys + N_KEYS; k++) {
		if (!(k->scope & here) ||
		    (k->scope == RLB_SCOPE_BOTH && here != RLB_SCOPE_TOP))
			continue;
		store(k->type, value_at(base, here, k), k->def);
	}
}

/* ------------------------------------------------------------------ */
/* Messages */

/*
 * The file and line of line `line` of the text being parsed: p->spans
 * map the text that config_load.c built from a file and what it
 * @includes; without them the text is p->file's own.
 */
static int origin(const struct rlb_cfg_parser *p, int line, const char **file)
{
	const struct rlb_cfg_span *s;
	size_t lo = 0, hi = p->nspans;

	*file = p->file;
	if (!p->nspans || line <= 0)
		return line;
	/* The last span that starts at or before the line. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->spans[mid].first <= line)
			lo = mid;
		else
			hi = mid;
	}
	s = &p->spans[lo];
	*file = s->file;
	return s->line + (line - s->first);
}

/* One error at file:line (line <= 0 for none). */
static void vreport(struct rlb_cfg_parser *p, const char *file, int line,
		    const char *fmt, va_list ap)
{
	char *msg;

	p->errors++;
	if (!p->diag)
		return;
	if (vasprintf(&msg, fmt, ap) < 0) {
		p->nomem = true;
		return;
	}
	if (line > 0)
		rlb_diag_add(p->diag, "%s:%d: %s", file, line, msg);
	else
		rlb_diag_add(p->diag, "%s: %s", file, msg);
	free(msg);
}

void rlb_cfg_report_at(struct rlb_cfg_parser *p, const char *file, int line,
		       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, file, line, fmt, ap);
	va_end(ap);
}

/*
 * The line of setting s. libconfig gives a string list element the line
 * of the token after it (it looks ahead for "a" "b" concatenation), so
 * the last replica of a list would get the line of the ")": walk back to
 * the nearest line that holds the quoted value.
 */
static int setting_line(const struct rlb_cfg_parser *p,
			const config_setting_t *s)
{
	int line = (int)config_setting_source_line(s);
	const char *start, *end;
	char *needle;
	size_t nlen;

	if (config_setting_name(s) ||
	    config_setting_type(s) != CONFIG_TYPE_STRING || !p->text ||
	    line < 2)
		return line;
	if (asprintf(&needle, "\"%s\"", config_setting_get_string(s)) < 0)
		return line;
	nlen = strlen(needle);
	start = p->text;
	for (int k = 1; k < line && start; k++) {
		start = strchr(start, '\n');
		if (start)
			start++;
	}
	for (int k = line; start && k > 0; k--) {
		end = strchr(start, '\n');
		if (!end)
			end = start + strlen(start);
		if (memmem(start, (size_t)(end - start), needle, nlen)) {
			line = k;
			break;
		}
		if (start == p->text)
			break;
		for (start -= 1; start > p->text && start[-1] != '\n'; start--)
			;
	}
	free(needle);
	return line;
}

/* One error at the place of setting s. */
static void RLB_PRINTF(3, 4)
	report(struct rlb_cfg_parser *p, const config_setting_t *s,
	       const char *fmt, ...)
{
	const char *file;
	int line = origin(p, setting_line(p, s), &file);
	va_list ap;

	va_start(ap, fmt);
	vreport(p, file, line, fmt, ap);
	va_end(ap);
}

static char *xstrndup(struct rlb_cfg_parser *p, const char *s, size_t n)
{
	char *d = strndup(s, n);

	if (!d)
		p->nomem = true;
	return d;
}

char *rlb_cfg_strdup(struct rlb_cfg_parser *p, const char *s)
{
	return xstrndup(p, s, strlen(s));
}

/*
 * The closest valid key of level `here` to a wrong one, or NULL if none
 * is close: one that starts with it ("prio"), else the nearest within an
 * edit distance of 2 or a third of its length.
 */
static const char *suggest_key(const char *name, enum key_scope here)
{
	size_t best_d = SIZE_MAX, len = strlen(name);
	const char *best = NULL;

	for (const struct key *k = keys; len >= 3 && k < keys + N_KEYS; k++) {
		if ((k->scope & here) && strncmp(k->name, name, len) == 0)
			return k->name;
	}
	for (const struct key *k = keys; k < keys + N_KEYS; k++) {
		size_t d;

		if (!(k->scope & here))
			continue;
		d = rlb_levenshtein(name, k->name);
		if (d < best_d && (d <= 2 || d * 3 <= len)) {
			best_d = d;
			best = k->name;
		}
	}
	return best;
}

/* Setting s is no key of level `here`: misplaced, or unknown. */
static void bad_key(struct rlb_cfg_parser *p, const config_setting_t *s,
		    enum key_scope here)
{
	const char *name = config_setting_name(s);
	const struct key *top = key_find(name, RLB_SCOPE_TOP);
	const char *what, *hint;

	if (here == RLB_SCOPE_TOP && key_find(name, RLB_SCOPE_CLUSTER)) {
		report(p, s, "%s is only valid inside a cluster", name);
		return;
	}
	/* A nested clusters list has always been an unknown key. */
	if (here == RLB_SCOPE_CLUSTER && top &&
	    top->type != RLB_TYPE_CLUSTERS) {
		report(p, s, "%s is only valid at the top level", name);
		return;
	}
	if (here == RLB_SCOPE_TOP)
		what = "setting";
	else if (here == RLB_SCOPE_CLUSTER)
		what = "cluster setting";
	else
		what = "replica setting";
	hint = suggest_key(name, here);
	if (hint)
		report(p, s, "unknown %s \"%s\"; did you mean \"%s\"?", what,
		       name, hint);
	else
		report(p, s, "unknown %s \"%s\"", what, name);
}

#define LOG_LEVELS "none, error, warning, info, debug"

/*
 * Report value as an unknown policy, at setting s or else in environment
 * variable var, with the closest name or else the list of valid ones.
 */
static void bad_policy(struct rlb_cfg_parser *p, const config_setting_t *s,
		       const char *var, const char *value)
{
	const char *close = rlb_policy_suggest(value);
	char hint[320];
	size_t off;

	if (close) {
		snprintf(hint, sizeof(hint), "did you mean \"%s\"?", close);
	} else {
		off = (size_t)snprintf(hint, sizeof(hint), "valid:");
		for (int i = 0; i < RLB_POLICY_COUNT && off < sizeof(hint);
		     i++) {
			int n = snprintf(hint + off, sizeof(hint) - off,
					 "%s %s", i ? "," : "",
					 rlb_policy_name((enum rlb_policy)i));

			off += n > 0 ? (size_t)n : 0;
		}
	}
	if (s)
		report(p, s, "unknown load_balancing \"%s\"; %s", value, hint);
	else
		rlb_cfg_report_at(p, var, 0,
				  "unknown load_balancing \"%s\"; %s", value,
				  hint);
}

void rlb_cfg_bad_env_policy(struct rlb_cfg_parser *p, const char *var,
			    const char *value)
{
	bad_policy(p, NULL, var, value);
}

/* ------------------------------------------------------------------ */
/* Values */

static const char *get_string(struct rlb_cfg_parser *p,
			      const config_setting_t *s)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		report(p, s, "%s must be a string", config_setting_name(s));
		return NULL;
	}
	return config_setting_get_string(s);
}

static bool get_int(struct rlb_cfg_parser *p, const config_setting_t *s,
		    int64_t *out)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
		*out = config_setting_get_int(s);
		return true;
	case CONFIG_TYPE_INT64:
		*out = config_setting_get_int64(s);
		return true;
	default:
		report(p, s, "%s must be an integer", config_setting_name(s));
		return false;
	}
}

static bool get_count(struct rlb_cfg_parser *p, const config_setting_t *s,
		      int64_t *out)
{
	if (!get_int(p, s, out))
		return false;
	if (*out < 0) {
		report(p, s, "%s must not be negative (%lld)",
		       config_setting_name(s), (long long)*out);
		return false;
	}
	return true;
}

static bool get_port(struct rlb_cfg_parser *p, const config_setting_t *s,
		     int64_t *out)
{
	if (!get_int(p, s, out))
		return false;
	if (*out >= 1 && *out <= 65535)
		return true;
	report(p, s, "port %lld out of range 1..65535", (long long)*out);
	return false;
}

/* A host string or name: bounded, no blanks or control characters. */
static bool check_name(struct rlb_cfg_parser *p, const config_setting_t *s,
		       const char *what, const char *v, size_t len)
{
	if (len == 0) {
		report(p, s, "empty %s", what);
		return false;
	}
	if (len > RLB_MAX_HOST) {
		report(p, s, "%s longer than %d bytes", what, RLB_MAX_HOST);
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (ch <= ' ' || ch == 0x7f || ch == '[' || ch == ']') {
			report(p, s, "invalid character in %s \"%.*s\"", what,
			       (int)len, v);
			return false;
		}
	}
	return true;
}

/* The string value of key k, checked; NULL after reporting why not. */
static const char *get_checked_string(struct rlb_cfg_parser *p,
				      const config_setting_t *s,
				      const struct key *k)
{
	const char *v = get_string(p, s);

	if (!v)
		return NULL;
	if (k->type == RLB_TYPE_HOSTNAME &&
	    !check_name(p, s, k->name, v, strlen(v)))
		return NULL;
	if (k->type == RLB_TYPE_PATH && v[0] != '/') {
		report(p, s, "%s must be an absolute path", k->name);
		return NULL;
	}
	return v;
}

/* The number, enum or bool value of key k; false after reporting. */
static bool get_value(struct rlb_cfg_parser *p, const config_setting_t *s,
		      const struct key *k, int64_t *out)
{
	enum rlb_policy policy;
	enum rlb_log_level level;
	const char *v;

	switch (k->type) {
	case RLB_TYPE_POLICY:
		v = get_string(p, s);
		if (!v)
			return false;
		if (rlb_policy_parse(v, &policy) < 0) {
			bad_policy(p, s, NULL, v);
			return false;
		}
		*out = policy;
		return true;
	case RLB_TYPE_COUNT:
		return get_count(p, s, out);
	case RLB_TYPE_BOOL:
		if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
			report(p, s, "%s must be true or false", k->name);
			return false;
		}
		*out = config_setting_get_bool(s);
		return true;
	case RLB_TYPE_PORT:
		return get_port(p, s, out);
	case RLB_TYPE_LOG_LEVEL:
		v = get_string(p, s);
		if (!v)
			return false;
		if (rlb_log_level_parse(v, &level) < 0) {
			report(p, s, "unknown %s \"%s\"; valid: " LOG_LEVELS,
			       k->name, v);
			return false;
		}
		*out = level;
		return true;
	case RLB_TYPE_LOG_TARGET:
		v = get_string(p, s);
		if (!v)
			return false;
		if (strcasecmp(v, "stderr") == 0) {
			*out = RLB_LOG_STDERR;
		} else if (strcasecmp(v, "syslog") == 0) {
			*out = RLB_LOG_SYSLOG;
		} else {
			report(p, s, "unknown %s \"%s\"; valid: stderr, syslog",
			       k->name, v);
			return false;
		}
		return true;
	default:
		return false;
	}
}

/* ------------------------------------------------------------------ */
/* Structure: groups, clusters, replicas */

/* One group being read: the top level, a cluster or a replica. */
struct group {
	enum key_scope here;	     /* its level */
	void *base;		     /* rlb_config, rlb_cluster, rlb_replica */
	uint64_t given;		     /* key_bit() of each value stored */
	struct rlb_cfg_layer *layer; /* the file's, for its clusters */
	/* Found, for the caller to read after the other keys. */
	const config_setting_t *name, *replicas, *host;
};

static void parse_clusters(struct rlb_cfg_parser *p, const config_setting_t *s,
			   struct rlb_cfg_layer *l);
static void parse_address(struct rlb_cfg_parser *p, const config_setting_t *s,
			  struct rlb_replica *r);
static void set_cluster_name(struct rlb_cfg_parser *p,
			     const config_setting_t *s, struct rlb_cluster *c);

/* Read setting s, written as key k, into g. */
static void parse_key(struct rlb_cfg_parser *p, const config_setting_t *s,
		      const struct key *k, struct group *g)
{
	void *dst = value_at(g->base, g->here, k);
	const char *v;
	int64_t n;

	switch (k->type) {
	case RLB_TYPE_CLUSTERS:
		parse_clusters(p, s, g->layer);
		return;
	case RLB_TYPE_NAME:
		g->name = s;
		set_cluster_name(p, s, g->base);
		return;
	case RLB_TYPE_REPLICAS:
		g->replicas = s;
		return;
	case RLB_TYPE_HOST:
		g->host = s;
		return;
	case RLB_TYPE_ADDRESS:
		parse_address(p, s, g->base);
		return;
	case RLB_TYPE_HOSTNAME:
	case RLB_TYPE_PATH:
		v = get_checked_string(p, s, k);
		if (!v)
			return;
		free(*(char **)dst);
		*(char **)dst = rlb_cfg_strdup(p, v);
		break;
	default:
		if (!get_value(p, s, k, &n))
			return;
		store(k->type, dst, n);
		break;
	}
	g->given |= key_bit(k);
}

/* Read every key of group grp, in order, into g. */
static void parse_group(struct rlb_cfg_parser *p, const config_setting_t *grp,
			struct group *g)
{
	int n = config_setting_length(grp);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(grp, i);
		const struct key *k = key_find(config_setting_name(s), g->here);

		if (k)
			parse_key(p, s, k, g);
		else
			bad_key(p, s, g->here);
	}
}

static int parse_port_text(const char *t, int64_t *out)
{
	int64_t v = 0;

	if (!*t)
		return -1;
	for (; *t; t++) {
		if (*t < '0' || *t > '9')
			return -1;
		v = v * 10 + (*t - '0');
		if (v > 65535)
			v = 65536; /* stays out of range, never overflows */
	}
	*out = v;
	return 0;
}

/* "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 literal. */
static void parse_replica_string(struct rlb_cfg_parser *p,
				 const config_setting_t *s,
				 struct rlb_replica *r)
{
	const char *v = config_setting_get_string(s);
	const char *host = v, *colon, *port = NULL;
	size_t len;
	int64_t n;

	if (v[0] == '[') {
		const char *end = strchr(v, ']');

		if (!end || (end[1] && end[1] != ':')) {
			report(p, s,
			       "invalid replica \"%s\"; expected "
			       "\"[address]\" or \"[address]:port\"",
			       v);
			return;
		}
		host = v + 1;
		len = (size_t)(end - host);
		if (end[1] == ':')
			port = end + 2;
	} else {
		struct in6_addr v6;

		colon = strchr(v, ':');
		if (colon && !strchr(colon + 1, ':')) {
			len = (size_t)(colon - v);
			port = colon + 1;
		} else if (colon && inet_pton(AF_INET6, v, &v6) != 1) {
			/* Two or more colons must be an IPv6 literal. */
			report(p, s,
			       "invalid replica \"%s\"; expected \"host\", "
			       "\"host:port\", \"[address]:port\" or an "
			       "IPv6 address",
			       v);
			return;
		} else {
			len = strlen(v);
		}
	}
	if (port) {
		if (parse_port_text(port, &n) < 0) {
			report(p, s, "invalid port \"%s\" in replica \"%s\"",
			       port, v);
			return;
		}
		if (n < 1 || n > 65535) {
			report(p, s, "port %s out of range 1..65535", port);
			return;
		}
		r->port = (int)n;
	}
	if (check_name(p, s, "host", host, len))
		r->host = xstrndup(p, host, len);
}

/* Parse an IP literal already known to be valid. */
static bool literal_parse(const char *v, struct rlb_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, v, a->bytes) == 1)
		a->family = AF_INET;
	else if (inet_pton(AF_INET6, v, a->bytes) == 1)
		a->family = AF_INET6;
	return a->family != 0;
}

static void parse_address(struct rlb_cfg_parser *p, const config_setting_t *s,
			  struct rlb_replica *r)
{
	const config_setting_t *e;
	unsigned char buf[sizeof(struct in6_addr)];
	int type = config_setting_type(s);
	int n = 1;

	if (type == CONFIG_TYPE_LIST || type == CONFIG_TYPE_ARRAY) {
		n = config_setting_length(s);
		if (n == 0) {
			report(p, s, "empty address list");
			return;
		}
		if (n > RLB_MAX_PINNED) {
			report(p, s, "more than %d addresses", RLB_MAX_PINNED);
			return;
		}
	} else if (type != CONFIG_TYPE_STRING) {
		report(p, s, "address must be a string or a list of strings");
		return;
	}
	r->pinned = calloc((size_t)n, sizeof(*r->pinned));
	r->literal = calloc((size_t)n, sizeof(*r->literal));
	if (!r->pinned || !r->literal) {
		p->nomem = true;
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *v;

		e = type == CONFIG_TYPE_STRING ? s
					       : config_setting_get_elem(s, i);
		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			report(p, e,
			       "address must be a string or a list of strings");
			continue;
		}
		v = config_setting_get_string(e);
		if (inet_pton(AF_INET, v, buf) != 1 &&
		    inet_pton(AF_INET6, v, buf) != 1) {
			report(p, e,
			       "invalid address \"%s\"; expected an IPv4 or "
			       "IPv6 literal",
			       v);
			continue;
		}
		r->pinned[r->npinned] = rlb_cfg_strdup(p, v);
		if (!r->pinned[r->npinned])
			continue;
		r->npinned++;
		literal_parse(v, &r->literal[r->nliteral++]);
	}
}

/* { host = "..."; port = N; priority = N; address = ...; } */
static void parse_replica_group(struct rlb_cfg_parser *p,
				const config_setting_t *grp,
				struct rlb_replica *r)
{
	struct group g = {.here = RLB_SCOPE_REPLICA, .base = r};
	const char *v, *colon;

	parse_group(p, grp, &g);
	if (!g.host) {
		report(p, grp, "replica has no host");
		return;
	}
	v = get_string(p, g.host);
	if (!v)
		return;
	colon = strchr(v, ':');
	if (colon && !strchr(colon + 1, ':')) {
		report(p, g.host,
		       "host \"%s\" must not include a port; use "
		       "port = N",
		       v);
		return;
	}
	if (check_name(p, g.host, "host", v, strlen(v)))
		r->host = rlb_cfg_strdup(p, v);
}

static void parse_replicas(struct rlb_cfg_parser *p, const config_setting_t *s,
			   struct rlb_cluster *c)
{
	int type = config_setting_type(s);
	int n;

	if (type != CONFIG_TYPE_LIST && type != CONFIG_TYPE_ARRAY) {
		report(p, s, "replicas must be a list");
		return;
	}
	n = config_setting_length(s);
	if (n == 0) {
		report(p, s, "empty replicas list");
		return;
	}
	if (n > RLB_MAX_REPLICAS)
		report(p, s, "more than %d replicas", RLB_MAX_REPLICAS);
	c->replicas = calloc((size_t)n, sizeof(*c->replicas));
	if (!c->replicas) {
		p->nomem = true;
		return;
	}
	c->nreplicas = (size_t)n;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		struct rlb_replica *r = &c->replicas[i];
		const char *file;

		r->line = origin(p, setting_line(p, e), &file);
		set_defaults(r, RLB_SCOPE_REPLICA);
		if (config_setting_type(e) == CONFIG_TYPE_STRING)
			parse_replica_string(p, e, r);
		else if (config_setting_type(e) == CONFIG_TYPE_GROUP)
			parse_replica_group(p, e, r);
		else
			report(p, e,
			       "replica must be a string or a group "
			       "{ host = ...; }");
	}
}

static bool ascii_equal(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = (unsigned char)*a, y = (unsigned char)*b;

		if (x >= 'A' && x <= 'Z')
			x += 'a' - 'A';
		if (y >= 'A' && y <= 'Z')
			y += 'a' - 'A';
		if (x != y)
			return false;
		if (!x)
			return true;
	}
}

/* "host" or "host:port" ("[v6]:port") for messages. */
static void replica_label(const struct rlb_replica *r, char *buf, size_t len)
{
	bool v6 = strchr(r->host, ':') != NULL;

	if (r->port)
		snprintf(buf, len, "%s%s%s:%d", v6 ? "[" : "", r->host,
			 v6 ? "]" : "", r->port);
	else
		snprintf(buf, len, "%s", r->host);
}

/* Effective ports, identities and the duplicate check of one cluster. */
static void finish_replicas(struct rlb_cfg_parser *p, struct rlb_cluster *c)
{
	char key[RLB_MAX_HOST + 16];
	char label[RLB_MAX_HOST + 16];

	for (size_t i = 0; i < c->nreplicas; i++) {
		struct rlb_replica *r = &c->replicas[i];
		size_t n;

		if (!r->host)
			continue;
		if (!r->port)
			r->port = c->port;
		/* A host that is an IP literal needs no DNS either. */
		if (!r->nliteral) {
			struct rlb_addr a;

			if (literal_parse(r->host, &a)) {
				r->literal = malloc(sizeof(a));
				if (!r->literal) {
					p->nomem = true;
					continue;
				}
				r->literal[0] = a;
				r->nliteral = 1;
			}
		}
		rlb_ascii_lower(key, r->host, RLB_MAX_HOST + 1);
		n = strlen(key);
		n += (size_t)snprintf(key + n, sizeof(key) - n, ":%d", r->port);
		r->identity = rlb_hash64(key, n, 0);
		for (size_t j = 0; j < i; j++) {
			const struct rlb_replica *q = &c->replicas[j];

			if (!q->host || q->identity != r->identity ||
			    q->port != r->port ||
			    !ascii_equal(q->host, r->host))
				continue;
			replica_label(r, label, sizeof(label));
			rlb_cfg_report_at(p, c->file ? c->file : p->file,
					  r->line,
					  "duplicate replica \"%s\" (first at "
					  "line %d)",
					  label, q->line);
			break;
		}
	}
}

/* Stored form of a virtual name: lowercase, one trailing dot dropped. */
static void set_cluster_name(struct rlb_cfg_parser *p,
			     const config_setting_t *s, struct rlb_cluster *c)
{
	const char *v = get_string(p, s);
	size_t len;

	if (!v)
		return;
	len = strlen(v);
	if (len && v[len - 1] == '.')
		len--;
	if (!check_name(p, s, "cluster name", v, len))
		return;
	c->name = malloc(len + 1);
	if (!c->name) {
		p->nomem = true;
		return;
	}
	rlb_ascii_lower(c->name, v, len + 1);
	c->name_hash = rlb_hash64(c->name, len, 0);
}

static void parse_cluster(struct rlb_cfg_parser *p, const config_setting_t *grp,
			  struct rlb_cfg_cluster *pc)
{
	struct rlb_cluster *c = &pc->c;
	struct group g = {.here = RLB_SCOPE_CLUSTER, .base = c};
	const char *file;

	c->line = origin(p, (int)config_setting_source_line(grp), &file);
	c->file = rlb_cfg_strdup(p, file);
	set_defaults(c, RLB_SCOPE_CLUSTER);
	parse_group(p, grp, &g);
	pc->given = g.given;
	if (g.name)
		pc->name_line = origin(
			p, (int)config_setting_source_line(g.name), &file);
	else
		report(p, grp, "cluster has no name");
	if (!g.replicas) {
		if (c->name)
			report(p, grp, "cluster \"%s\" has no replicas",
			       c->name);
		else
			report(p, grp, "cluster has no replicas");
	} else {
		parse_replicas(p, g.replicas, c);
	}
	finish_replicas(p, c);
}

static void parse_clusters(struct rlb_cfg_parser *p, const config_setting_t *s,
			   struct rlb_cfg_layer *l)
{
	int type = config_setting_type(s);
	int n;

	l->has_clusters = true;
	if (type != CONFIG_TYPE_LIST && type != CONFIG_TYPE_ARRAY) {
		report(p, s, "clusters must be a list ( { ... }, ... )");
		return;
	}
	n = config_setting_length(s);
	if (n == 0)
		return;
	l->clusters = calloc((size_t)n, sizeof(*l->clusters));
	if (!l->clusters) {
		p->nomem = true;
		return;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, i);
		struct rlb_cfg_cluster *pc = &l->clusters[l->nclusters];

		if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
			report(p, g,
			       "cluster must be a group { name = ...; "
			       "replicas = ...; }");
			continue;
		}
		l->nclusters++;
		parse_cluster(p, g, pc);
		if (!pc->c.name)
			continue;
		for (size_t j = 0; j + 1 < l->nclusters; j++) {
			const struct rlb_cfg_cluster *q = &l->clusters[j];

			if (q->c.name && strcmp(q->c.name, pc->c.name) == 0) {
				rlb_cfg_report_at(
					p, pc->c.file ? pc->c.file : p->file,
					pc->name_line,
					"duplicate cluster \"%s\" (first at "
					"line %d)",
					pc->c.name, q->name_line);
				break;
			}
		}
	}
}

#if LIBCONFIG_VER_MAJOR > 1 ||                                                 \
	(LIBCONFIG_VER_MAJOR == 1 && LIBCONFIG_VER_MINOR >= 7)
static const char **no_include(config_t *lc, const char *dir, const char *path,
			       const char **error)
{
	(void)lc;
	(void)dir;
	(void)path;
	*error = "cannot open include file";
	return NULL;
}
#endif

/*
 * libconfig must never open a file itself: config_load.c has put every
 * @include it reads in its place. Should one be left, it fails to open
 * without anything being opened (libconfig 1.5 puts the include
 * directory in front of every name, absolute ones too: "/dev/null/..."
 * is never a file).
 */
static void bar_includes(config_t *lc)
{
#if LIBCONFIG_VER_MAJOR > 1 ||                                                 \
	(LIBCONFIG_VER_MAJOR == 1 && LIBCONFIG_VER_MINOR >= 7)
	config_set_include_func(lc, no_include);
#else
	config_set_include_dir(lc, "/dev/null");
#endif
}

void rlb_cfg_parse_text(struct rlb_cfg_parser *p, const char *text,
			struct rlb_cfg_layer *l)
{
	struct group g = {.here = RLB_SCOPE_TOP, .base = &l->top, .layer = l};
	const char *file;
	config_t lc;
	int line;

	config_init(&lc);
	bar_includes(&lc);
	p->text = text;
	if (config_read_string(&lc, text) == CONFIG_TRUE) {
		l->parsed = true;
		parse_group(p, config_root_setting(&lc), &g);
		l->given = g.given;
	} else {
		line = origin(p, config_error_line(&lc), &file);
		rlb_cfg_report_at(p, file, line, "%s", config_error_text(&lc));
	}
	p->text = NULL;
	config_destroy(&lc);
}

/* ------------------------------------------------------------------ */
/* Values by key, for config_load.c's merge */

void rlb_cfg_defaults(struct rlb_config *cfg)
{
	set_defaults(cfg, RLB_SCOPE_TOP);
}

void rlb_cfg_overlay(struct rlb_config *cfg, struct rlb_cfg_layer *l)
{
	for (const struct key *k = keys; k < keys + N_KEYS; k++) {
		void *dst = value_at(cfg, RLB_SCOPE_TOP, k);
		void *src = value_at(&l->top, RLB_SCOPE_TOP, k);

		if (!(l->given & key_bit(k)))
			continue;
		if (is_string(k->type))
			free(*(char **)dst);
		memcpy(dst, src, value_size[k->type]);
		if (is_string(k->type))
			*(char **)src = NULL;
	}
}

void rlb_cfg_inherit(struct rlb_cfg_cluster *pc,
		     const struct rlb_settings *defaults)
{
	struct rlb_settings own = pc->c.s;

	pc->c.s = *defaults;
	for (const struct key *k = keys; k < keys + N_KEYS; k++) {
		if (k->scope == RLB_SCOPE_BOTH && (pc->given & key_bit(k)))
			memcpy((char *)&pc->c.s + k->off,
			       (const char *)&own + k->off,
			       value_size[k->type]);
	}
}
