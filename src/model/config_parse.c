/* config_parse.c - libconfig text into the config model, key by key from one
 * table, with "file:line: message" diagnostics. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/config_internal.h"

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

/* Setting s is no key of level `here`: misplaced, or unknown. */
static void bad_key(struct rlb_cfg_parser *p, const config_setting_t *s,
		    enum key_scope here)
{
	const char *name = config_setting_name(s);
	const struct key *top = rlb_cfg_key_find(name, RLB_SCOPE_TOP);
	const char *what, *hint;

	if (here == RLB_SCOPE_TOP &&
	    rlb_cfg_key_find(name, RLB_SCOPE_CLUSTER)) {
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
	hint = rlb_cfg_suggest_key(name, here);
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

/* A real number >= 0, a float or an integer ("bias = 1;"), into *out. */
static bool get_real(struct rlb_cfg_parser *p, const config_setting_t *s,
		     double *out)
{
	int t = config_setting_type(s);
	double v;

	if (t != CONFIG_TYPE_FLOAT && t != CONFIG_TYPE_INT &&
	    t != CONFIG_TYPE_INT64) {
		report(p, s, "%s must be a number", config_setting_name(s));
		return false;
	}
	v = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
				   : (double)config_setting_get_int64(s);
	if (v < 0)
		report(p, s, "%s must not be negative (%g)",
		       config_setting_name(s), v);
	else if (!isfinite(v))
		report(p, s, "%s must be finite", config_setting_name(s));
	else
		*out = v;
	return v >= 0 && isfinite(v);
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
	if (k->type == RLB_TYPE_URL_PATH) {
		if (v[0] != '/') {
			report(p, s, "%s must start with /", k->name);
			return NULL;
		}
		for (const char *c = v; *c; c++) {
			if ((unsigned char)*c <= ' ' || *c == 0x7f) {
				report(p, s,
				       "%s: no space or control character "
				       "may stand in a path",
				       k->name);
				return NULL;
			}
		}
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
	enum key_scope here; /* its level */
	void *base;	     /* rlb_config, rlb_cluster, rlb_replica */
	uint64_t given;	     /* rlb_cfg_key_bit() of each value stored */
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

/*
 * A DNS name membership asks about (design.md §15), stored absolute
 * (lowercase, one trailing dot) so that no search list applies to it.
 */
static bool set_dns_name(struct rlb_cfg_parser *p, const config_setting_t *s,
			 const struct key *k, char **dst)
{
	const char *v = get_string(p, s);
	size_t len;

	if (!v)
		return false;
	if (!rlb_dns_name_valid(v)) {
		report(p, s,
		       "%s \"%s\" is not a domain name (labels of letters, "
		       "digits, '-' and '_', at most 253 bytes)",
		       k->name, v);
		return false;
	}
	len = strlen(v);
	if (v[len - 1] == '.')
		len--;
	free(*dst);
	*dst = malloc(len + 2);
	if (!*dst) {
		p->nomem = true;
		return false;
	}
	rlb_ascii_lower(*dst, v, len + 1);
	(*dst)[len] = '.';
	(*dst)[len + 1] = '\0';
	return true;
}

/* Read setting s, written as key k, into g. */
static void parse_key(struct rlb_cfg_parser *p, const config_setting_t *s,
		      const struct key *k, struct group *g)
{
	void *dst = rlb_cfg_value_at(g->base, g->here, k);
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
	case RLB_TYPE_URL_PATH:
		v = get_checked_string(p, s, k);
		if (!v)
			return;
		free(*(char **)dst);
		*(char **)dst = rlb_cfg_strdup(p, v);
		break;
	case RLB_TYPE_DNSNAME:
		if (!set_dns_name(p, s, k, dst))
			return;
		break;
	case RLB_TYPE_REAL:
		if (!get_real(p, s, dst))
			return;
		break;
	default:
		if (!get_value(p, s, k, &n))
			return;
		if (n < k->min) {
			report(p, s, "%s %lld below the minimum %lld", k->name,
			       (long long)n, (long long)k->min);
			return;
		}
		rlb_cfg_store(k->type, dst, n);
		break;
	}
	g->given |= rlb_cfg_key_bit(k);
}

/* Read every key of group grp, in order, into g. */
static void parse_group(struct rlb_cfg_parser *p, const config_setting_t *grp,
			struct group *g)
{
	int n = config_setting_length(grp);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(grp, i);
		const struct key *k =
			rlb_cfg_key_find(config_setting_name(s), g->here);

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
		rlb_cfg_set_defaults(r, RLB_SCOPE_REPLICA);
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
	char label[RLB_MAX_HOST + 16];

	for (size_t i = 0; i < c->nreplicas; i++) {
		struct rlb_replica *r = &c->replicas[i];

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
		r->identity = rlb_replica_identity(r->host, r->port);
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
	rlb_cfg_set_defaults(c, RLB_SCOPE_CLUSTER);
	parse_group(p, grp, &g);
	pc->given = g.given;
	if (g.name)
		pc->name_line = origin(
			p, (int)config_setting_source_line(g.name), &file);
	else
		report(p, grp, "cluster has no name");
	if (g.replicas) {
		parse_replicas(p, g.replicas, c);
	} else if (c->srv || c->dns) {
		/* Replicas come from DNS (design.md §15). */
	} else if (c->name) {
		report(p, grp,
		       "cluster \"%s\" has no replicas and no srv or dns "
		       "source",
		       c->name);
	} else {
		report(p, grp,
		       "cluster has no replicas and no srv or dns source");
	}
	finish_replicas(p, c);
	c->nstatic = c->nreplicas;
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
