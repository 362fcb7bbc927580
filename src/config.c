/* config.c - config files: parsing, validation with file:line, overlays. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlb.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#define RLB_SYSTEM_CONFIG    SYSCONFDIR "/replicalb/replicalb.conf"
#define RLB_MAX_CONFIG_BYTES (16 << 20) /* a bigger file is a mistake */

static const struct rlb_settings builtin_settings = {
	.load_balancing = RLB_POLICY_RANDOM,
	.first_offset = 0,
	.half_life = 60,
	.error_cap = 1000,
	.max_ignored_errors = 0,
	.dns_cache_ttl = 15,
	.connect_timeout_ms = 1000,
};

/* The integer settings that the top level and every cluster may give. */
static const struct int_key {
	const char *name;
	size_t off; /* of its int64_t in struct rlb_settings */
} int_keys[] = {
	{"load_balancing_first_offset",
	 offsetof(struct rlb_settings, first_offset)},
	{"distributed_replica_error_half_life",
	 offsetof(struct rlb_settings, half_life)},
	{"distributed_replica_error_cap",
	 offsetof(struct rlb_settings, error_cap)},
	{"distributed_replica_max_ignored_errors",
	 offsetof(struct rlb_settings, max_ignored_errors)},
	{"dns_cache_ttl", offsetof(struct rlb_settings, dns_cache_ttl)},
	{"connect_timeout_ms",
	 offsetof(struct rlb_settings, connect_timeout_ms)},
};
#define N_INT_KEYS (sizeof(int_keys) / sizeof(*int_keys))
#define SET_POLICY (1u << N_INT_KEYS) /* bit k < N_INT_KEYS: int_keys[k] */

/* Valid keys per scope, for "did you mean" hints. */
static const char *const top_keys[] = {
	"load_balancing",
	"load_balancing_first_offset",
	"distributed_replica_error_half_life",
	"distributed_replica_error_cap",
	"distributed_replica_max_ignored_errors",
	"local_hostname",
	"dns_cache_ttl",
	"connect_timeout_ms",
	"state_dir",
	"log_level",
	"log_target",
	"clusters",
	NULL,
};
static const char *const cluster_keys[] = {
	"name",
	"replicas",
	"port",
	"load_balancing",
	"load_balancing_first_offset",
	"distributed_replica_error_half_life",
	"distributed_replica_error_cap",
	"distributed_replica_max_ignored_errors",
	"dns_cache_ttl",
	"connect_timeout_ms",
	"local_hostname",
	NULL,
};
static const char *const replica_keys[] = {
	"host", "port", "priority", "address", NULL,
};

/* Settings that one scope (a file's top level, a cluster) gives itself. */
struct given {
	struct rlb_settings s; /* values of the keys present */
	unsigned set;	       /* which: int_keys bits and SET_POLICY */
	char *local_hostname;  /* or NULL */
};

/* A cluster as parsed, with the settings written inside it. */
struct pcluster {
	struct rlb_cluster c;
	struct given own;
	int name_line; /* line of its name, for duplicate messages */
};

/* What one file says, before the main and the app file are merged. */
struct layer {
	struct given top;
	char *state_dir;
	bool has_log_level;
	enum rlb_log_level log_level;
	bool has_log_target;
	enum rlb_log_target log_target;
	bool parsed; /* syntax was fine and the keys were read */
	bool has_clusters;
	struct pcluster *clusters;
	size_t nclusters;
};

/* Error collection of one load. */
struct parser {
	const char *file;      /* name for messages of the file being read */
	const char *text;      /* its text, or NULL */
	const char *dir;       /* its directory, for @include'd names */
	struct rlb_diag *diag; /* may be NULL: count errors only */
	unsigned errors;
	bool nomem;
};

/*
 * libconfig names an @include'd file (inc, the source file of a setting
 * or error; NULL for the file itself) as written in the @include, but
 * opens it relative to p->dir: the directory to put in front, or "".
 */
static const char *include_dir(const struct parser *p, const char *inc)
{
	return inc && p->dir && inc[0] != '/' ? p->dir : "";
}

/* One error at dir/file:line (dir "" for none; line <= 0 for none). */
static void vreport(struct parser *p, const char *dir, const char *file,
		    int line, const char *fmt, va_list ap)
{
	const char *sep = *dir ? "/" : "";
	char *msg;

	p->errors++;
	if (!p->diag)
		return;
	if (vasprintf(&msg, fmt, ap) < 0) {
		p->nomem = true;
		return;
	}
	if (line > 0)
		rlb_diag_add(p->diag, "%s%s%s:%d: %s", dir, sep, file, line,
			     msg);
	else
		rlb_diag_add(p->diag, "%s%s%s: %s", dir, sep, file, msg);
	free(msg);
}

static void RLB_PRINTF(5, 6)
	report_in(struct parser *p, const char *dir, const char *file, int line,
		  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, dir, file, line, fmt, ap);
	va_end(ap);
}

/* One error at file:line; line <= 0 leaves the line out. */
static void RLB_PRINTF(4, 5) report_at(struct parser *p, const char *file,
				       int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, "", file, line, fmt, ap);
	va_end(ap);
}

static const char *setting_file(const struct parser *p,
				const config_setting_t *s)
{
	const char *f = config_setting_source_file(s);

	/* Only @include'd files carry a name; the rest is p->file. */
	return f ? f : p->file;
}

static const char *setting_dir(const struct parser *p,
			       const config_setting_t *s)
{
	return include_dir(p, config_setting_source_file(s));
}

/*
 * The line of setting s. libconfig gives a string list element the line
 * of the token after it (it looks ahead for "a" "b" concatenation), so
 * the last replica of a list would get the line of the ")": walk back to
 * the nearest line that holds the quoted value.
 */
static int setting_line(const struct parser *p, const config_setting_t *s)
{
	int line = (int)config_setting_source_line(s);
	const char *start, *end;
	char *needle;
	size_t nlen;

	if (config_setting_name(s) ||
	    config_setting_type(s) != CONFIG_TYPE_STRING || !p->text ||
	    config_setting_source_file(s) || line < 2)
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
static void RLB_PRINTF(3, 4) report(struct parser *p, const config_setting_t *s,
				    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, setting_dir(p, s), setting_file(p, s), setting_line(p, s),
		fmt, ap);
	va_end(ap);
}

static char *xstrndup(struct parser *p, const char *s, size_t n)
{
	char *d = strndup(s, n);

	if (!d)
		p->nomem = true;
	return d;
}

static char *xstrdup(struct parser *p, const char *s)
{
	return xstrndup(p, s, strlen(s));
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

/*
 * The closest valid key to a wrong one, or NULL if none is close: one
 * that starts with it ("prio"), else the nearest within an edit distance
 * of 2 or a third of its length.
 */
static const char *suggest_key(const char *name, const char *const *keys)
{
	size_t best_d = SIZE_MAX, len = strlen(name);
	const char *best = NULL;

	for (const char *const *k = keys; len >= 3 && *k; k++) {
		if (strncmp(*k, name, len) == 0)
			return *k;
	}
	for (; *keys; keys++) {
		size_t d = rlb_levenshtein(name, *keys);

		if (d < best_d && (d <= 2 || d * 3 <= len)) {
			best_d = d;
			best = *keys;
		}
	}
	return best;
}

static void unknown_key(struct parser *p, const config_setting_t *s,
			const char *what, const char *const *keys)
{
	const char *name = config_setting_name(s);
	const char *hint = suggest_key(name, keys);

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
static void bad_policy(struct parser *p, const config_setting_t *s,
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
		report_at(p, var, 0, "unknown load_balancing \"%s\"; %s", value,
			  hint);
}

static const char *get_string(struct parser *p, const config_setting_t *s)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		report(p, s, "%s must be a string", config_setting_name(s));
		return NULL;
	}
	return config_setting_get_string(s);
}

static bool get_int(struct parser *p, const config_setting_t *s, int64_t *out)
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

static bool get_count(struct parser *p, const config_setting_t *s, int64_t *out)
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

static bool port_ok(struct parser *p, const config_setting_t *s, int64_t v)
{
	if (v >= 1 && v <= 65535)
		return true;
	report(p, s, "port %lld out of range 1..65535", (long long)v);
	return false;
}

static bool get_port(struct parser *p, const config_setting_t *s, int *out)
{
	int64_t v;

	if (!get_int(p, s, &v) || !port_ok(p, s, v))
		return false;
	*out = (int)v;
	return true;
}

/* A host string or name: bounded, no blanks or control characters. */
static bool check_name(struct parser *p, const config_setting_t *s,
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

/* Parse s into g if it is a setting shared by the top level and clusters;
 * false when it is some other key. */
static bool parse_common(struct parser *p, const config_setting_t *s,
			 struct given *g)
{
	const char *name = config_setting_name(s);
	const char *v;
	int64_t n;

	if (strcmp(name, "load_balancing") == 0) {
		v = get_string(p, s);
		if (!v)
			return true;
		if (rlb_policy_parse(v, &g->s.load_balancing) == 0)
			g->set |= SET_POLICY;
		else
			bad_policy(p, s, NULL, v);
		return true;
	}
	if (strcmp(name, "local_hostname") == 0) {
		v = get_string(p, s);
		if (v && check_name(p, s, "local_hostname", v, strlen(v))) {
			free(g->local_hostname);
			g->local_hostname = xstrdup(p, v);
		}
		return true;
	}
	for (size_t k = 0; k < N_INT_KEYS; k++) {
		if (strcmp(name, int_keys[k].name) != 0)
			continue;
		if (get_count(p, s, &n)) {
			*(int64_t *)((char *)&g->s + int_keys[k].off) = n;
			g->set |= 1u << k;
		}
		return true;
	}
	return false;
}

/* Overlay the settings that g gives onto dst. */
static void given_apply(struct rlb_settings *dst, const struct given *g)
{
	if (g->set & SET_POLICY)
		dst->load_balancing = g->s.load_balancing;
	for (size_t k = 0; k < N_INT_KEYS; k++) {
		if (g->set & (1u << k))
			*(int64_t *)((char *)dst + int_keys[k].off) =
				*(const int64_t *)((const char *)&g->s +
						   int_keys[k].off);
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
static void parse_replica_string(struct parser *p, const config_setting_t *s,
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

static void parse_address(struct parser *p, const config_setting_t *s,
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
		r->pinned[r->npinned] = xstrdup(p, v);
		if (!r->pinned[r->npinned])
			continue;
		r->npinned++;
		literal_parse(v, &r->literal[r->nliteral++]);
	}
}

/* { host = "..."; port = N; priority = N; address = ...; } */
static void parse_replica_group(struct parser *p, const config_setting_t *g,
				struct rlb_replica *r)
{
	const config_setting_t *host = NULL;
	int n = config_setting_length(g);
	const char *v, *colon;

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);

		if (strcmp(name, "host") == 0)
			host = s;
		else if (strcmp(name, "port") == 0)
			get_port(p, s, &r->port);
		else if (strcmp(name, "priority") == 0)
			get_count(p, s, &r->priority);
		else if (strcmp(name, "address") == 0)
			parse_address(p, s, r);
		else
			unknown_key(p, s, "replica setting", replica_keys);
	}
	if (!host) {
		report(p, g, "replica has no host");
		return;
	}
	v = get_string(p, host);
	if (!v)
		return;
	colon = strchr(v, ':');
	if (colon && !strchr(colon + 1, ':')) {
		report(p, host,
		       "host \"%s\" must not include a port; use "
		       "port = N",
		       v);
		return;
	}
	if (check_name(p, host, "host", v, strlen(v)))
		r->host = xstrdup(p, v);
}

static void parse_replicas(struct parser *p, const config_setting_t *s,
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

		r->line = setting_line(p, e);
		r->priority = 1;
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
static void finish_replicas(struct parser *p, struct rlb_cluster *c)
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
			report_at(p, c->file ? c->file : p->file, r->line,
				  "duplicate replica \"%s\" (first at line %d)",
				  label, q->line);
			break;
		}
	}
}

/* Stored form of a virtual name: lowercase, one trailing dot dropped. */
static void set_cluster_name(struct parser *p, const config_setting_t *s,
			     struct rlb_cluster *c)
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

static void parse_cluster(struct parser *p, const config_setting_t *g,
			  struct pcluster *pc)
{
	const config_setting_t *name = NULL, *replicas = NULL;
	const char *dir = setting_dir(p, g), *file = setting_file(p, g);
	struct rlb_cluster *c = &pc->c;
	int n = config_setting_length(g);

	c->line = (int)config_setting_source_line(g);
	if (asprintf(&c->file, "%s%s%s", dir, *dir ? "/" : "", file) < 0) {
		c->file = NULL;
		p->nomem = true;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *key = config_setting_name(s);

		if (parse_common(p, s, &pc->own))
			continue;
		if (strcmp(key, "name") == 0) {
			name = s;
			pc->name_line = (int)config_setting_source_line(s);
			set_cluster_name(p, s, c);
		} else if (strcmp(key, "replicas") == 0) {
			replicas = s;
		} else if (strcmp(key, "port") == 0) {
			get_port(p, s, &c->port);
		} else if (strcmp(key, "state_dir") == 0 ||
			   strcmp(key, "log_level") == 0 ||
			   strcmp(key, "log_target") == 0) {
			report(p, s, "%s is only valid at the top level", key);
		} else {
			unknown_key(p, s, "cluster setting", cluster_keys);
		}
	}
	if (!name)
		report(p, g, "cluster has no name");
	if (!replicas) {
		if (c->name)
			report(p, g, "cluster \"%s\" has no replicas", c->name);
		else
			report(p, g, "cluster has no replicas");
	} else {
		parse_replicas(p, replicas, c);
	}
	c->local_hostname = pc->own.local_hostname;
	pc->own.local_hostname = NULL;
	finish_replicas(p, c);
}

static void parse_clusters(struct parser *p, const config_setting_t *s,
			   struct layer *l)
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
		struct pcluster *pc = &l->clusters[l->nclusters];

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
			const struct pcluster *q = &l->clusters[j];

			if (q->c.name && strcmp(q->c.name, pc->c.name) == 0) {
				report_at(p, pc->c.file ? pc->c.file : p->file,
					  pc->name_line,
					  "duplicate cluster \"%s\" (first at "
					  "line %d)",
					  pc->c.name, q->name_line);
				break;
			}
		}
	}
}

static void parse_top(struct parser *p, const config_setting_t *root,
		      struct layer *l)
{
	int n = config_setting_length(root);

	l->parsed = true;
	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(root, i);
		const char *key = config_setting_name(s);
		const char *v;

		if (parse_common(p, s, &l->top))
			continue;
		if (strcmp(key, "clusters") == 0) {
			parse_clusters(p, s, l);
		} else if (strcmp(key, "state_dir") == 0) {
			v = get_string(p, s);
			if (!v)
				continue;
			if (v[0] != '/') {
				report(p, s,
				       "state_dir must be an absolute "
				       "path");
				continue;
			}
			free(l->state_dir);
			l->state_dir = xstrdup(p, v);
		} else if (strcmp(key, "log_level") == 0) {
			v = get_string(p, s);
			if (v && rlb_log_level_parse(v, &l->log_level) == 0)
				l->has_log_level = true;
			else if (v)
				report(p, s,
				       "unknown log_level \"%s\"; "
				       "valid: " LOG_LEVELS,
				       v);
		} else if (strcmp(key, "log_target") == 0) {
			v = get_string(p, s);
			if (!v)
				continue;
			l->has_log_target = true;
			if (strcasecmp(v, "stderr") == 0)
				l->log_target = RLB_LOG_STDERR;
			else if (strcasecmp(v, "syslog") == 0)
				l->log_target = RLB_LOG_SYSLOG;
			else
				report(p, s,
				       "unknown log_target \"%s\"; "
				       "valid: stderr, syslog",
				       v);
		} else if (strcmp(key, "name") == 0 ||
			   strcmp(key, "replicas") == 0 ||
			   strcmp(key, "port") == 0) {
			report(p, s, "%s is only valid inside a cluster", key);
		} else {
			unknown_key(p, s, "setting", top_keys);
		}
	}
}

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
	free(c->host_prio);
	if (c->health)
		rlb_health_detach(c->health);
}

static void layer_free(struct layer *l)
{
	for (size_t i = 0; i < l->nclusters; i++) {
		cluster_free(&l->clusters[i].c);
		free(l->clusters[i].own.local_hostname);
	}
	free(l->clusters);
	free(l->top.local_hostname);
	free(l->state_dir);
	memset(l, 0, sizeof(*l));
}

/* Parse libconfig text already read into lc (or its error) into l. */
static void parse_read(struct parser *p, config_t *lc, bool ok, struct layer *l)
{
	if (!ok) {
		const char *f = config_error_file(lc);

		if (config_error_type(lc) == CONFIG_ERR_FILE_IO && !f)
			report_at(p, p->file, 0, "cannot read");
		else
			report_in(p, include_dir(p, f), f ? f : p->file,
				  config_error_line(lc), "%s",
				  config_error_text(lc));
		return;
	}
	parse_top(p, config_root_setting(lc), l);
}

/* The whole of f as a string, or NULL (errno set). */
static char *read_text(FILE *f)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *grown;
	size_t n;

	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len > 1)
			continue;
		if (cap >= RLB_MAX_CONFIG_BYTES) {
			free(buf);
			errno = EFBIG;
			return NULL;
		}
		grown = realloc(buf, cap * 2);
		if (!grown)
			free(buf);
		buf = grown;
		cap *= 2;
	}
	if (!buf)
		return NULL;
	if (ferror(f)) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/*
 * Read and parse one file into l, stamping it. Returns 0 (errors, if
 * any, counted in p) or -ENOENT when the file does not exist.
 */
static int read_file(struct parser *p, const char *path, struct layer *l,
		     struct rlb_file_stamp *stamp)
{
	const char *slash = strrchr(path, '/');
	char *dir = NULL, *text;
	char ebuf[128];
	struct stat st;
	config_t lc;
	FILE *f;
	bool ok;

	stamp->path = xstrdup(p, path);
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return -ENOENT;
		report_at(p, path, 0, "cannot open: %s",
			  strerror_r(errno, ebuf, sizeof(ebuf)));
		return 0;
	}
	if (fstat(fileno(f), &st) == 0) {
		stamp->exists = true;
		stamp->dev = st.st_dev;
		stamp->ino = st.st_ino;
		stamp->size = st.st_size;
		stamp->mtime = st.st_mtim;
		if (S_ISDIR(st.st_mode)) {
			report_at(p, path, 0, "is a directory");
			goto out_close;
		}
	}
	text = read_text(f);
	if (!text) {
		if (errno == ENOMEM)
			p->nomem = true;
		else
			report_at(p, path, 0, "cannot read: %s",
				  strerror_r(errno, ebuf, sizeof(ebuf)));
		goto out_close;
	}
	/* @include "x" is relative to the including file's directory. */
	if (slash)
		dir = slash == path ? strdup("/")
				    : strndup(path, (size_t)(slash - path));
	config_init(&lc);
	if (dir)
		config_set_include_dir(&lc, dir);
	p->file = path;
	p->text = text;
	p->dir = dir;
	ok = config_read_string(&lc, text) == CONFIG_TRUE;
	parse_read(p, &lc, ok, l);
	p->text = NULL;
	p->dir = NULL;
	config_destroy(&lc);
	free(dir);
	free(text);
out_close:
	fclose(f);
	return 0;
}

/* A per-app name usable as a file name in apps.d. */
static bool app_name_ok(const char *app)
{
	return app && *app && !strchr(app, '/') && strcmp(app, ".") != 0 &&
	       strcmp(app, "..") != 0;
}

/* Merge the main file, the app file and the built-in defaults into cfg:
 * clusters move out of the layers into cfg. */
static void merge(struct parser *p, struct layer *m, struct layer *a,
		  struct rlb_config *cfg)
{
	size_t cap = m->nclusters + a->nclusters;
	bool *taken = NULL;

	cfg->defaults = builtin_settings;
	given_apply(&cfg->defaults, &m->top);
	given_apply(&cfg->defaults, &a->top);
	cfg->local_hostname = a->top.local_hostname ? a->top.local_hostname
						    : m->top.local_hostname;
	if (cfg->local_hostname == a->top.local_hostname)
		a->top.local_hostname = NULL;
	else
		m->top.local_hostname = NULL;
	cfg->state_dir = a->state_dir ? a->state_dir : m->state_dir;
	if (cfg->state_dir == a->state_dir)
		a->state_dir = NULL;
	else
		m->state_dir = NULL;
	cfg->log_level = RLB_LOG_WARNING;
	if (m->has_log_level)
		cfg->log_level = m->log_level;
	if (a->has_log_level)
		cfg->log_level = a->log_level;
	cfg->log_target = RLB_LOG_STDERR;
	if (m->has_log_target)
		cfg->log_target = m->log_target;
	if (a->has_log_target)
		cfg->log_target = a->log_target;
	if (cap == 0)
		return;
	cfg->clusters = calloc(cap, sizeof(*cfg->clusters));
	taken = calloc(a->nclusters + 1, sizeof(*taken));
	if (!cfg->clusters || !taken) {
		p->nomem = true;
		goto out_free;
	}
	/* An app cluster replaces the same-named one where it stood. */
	for (size_t i = 0; i < m->nclusters; i++) {
		struct pcluster *pc = &m->clusters[i];

		for (size_t j = 0; j < a->nclusters; j++) {
			if (!taken[j] &&
			    strcmp(a->clusters[j].c.name, pc->c.name) == 0) {
				taken[j] = true;
				pc = &a->clusters[j];
				break;
			}
		}
		pc->c.s = cfg->defaults;
		given_apply(&pc->c.s, &pc->own);
		cfg->clusters[cfg->nclusters++] = pc->c;
		memset(&pc->c, 0, sizeof(pc->c));
	}
	for (size_t j = 0; j < a->nclusters; j++) {
		struct pcluster *pc = &a->clusters[j];

		if (taken[j])
			continue;
		pc->c.s = cfg->defaults;
		given_apply(&pc->c.s, &pc->own);
		cfg->clusters[cfg->nclusters++] = pc->c;
		memset(&pc->c, 0, sizeof(pc->c));
	}
out_free:
	free(taken);
}

/* Check the environment overrides; reports bad values. */
static void check_env(struct parser *p, const struct rlb_config_source *src,
		      enum rlb_policy *policy, enum rlb_log_level *level)
{
	if (src->env_policy && rlb_policy_parse(src->env_policy, policy) < 0)
		bad_policy(p, NULL, "REPLICALB_LOAD_BALANCING",
			   src->env_policy);
	/* A bad REPLICALB_LOG_LEVEL is ignored (runtime.c warns): it
	 * must not turn the whole library off. */
	if (src->env_log_level)
		rlb_log_level_parse(src->env_log_level, level);
}

static void apply_env(struct parser *p, const struct rlb_config_source *src,
		      enum rlb_policy policy, enum rlb_log_level level,
		      struct rlb_config *cfg)
{
	if (src->env_policy) {
		cfg->defaults.load_balancing = policy;
		for (size_t i = 0; i < cfg->nclusters; i++)
			cfg->clusters[i].s.load_balancing = policy;
	}
	if (src->env_hostname) {
		free(cfg->local_hostname);
		cfg->local_hostname = xstrdup(p, src->env_hostname);
		for (size_t i = 0; i < cfg->nclusters; i++) {
			free(cfg->clusters[i].local_hostname);
			cfg->clusters[i].local_hostname = NULL;
		}
	}
	if (src->env_state_dir) {
		free(cfg->state_dir);
		cfg->state_dir = xstrdup(p, src->env_state_dir);
	}
	if (src->env_log_level &&
	    rlb_log_level_parse(src->env_log_level, &level) == 0)
		cfg->log_level = level;
}

/*
 * Build *out from the layers and the environment, or report why not.
 * Frees the layers and files, except that files move into *out, or into
 * *broken when the config is broken.
 */
static int finish(struct parser *p, struct layer *m, struct layer *a,
		  const struct rlb_config_source *src,
		  struct rlb_config_files *files, struct rlb_config **out,
		  struct rlb_config_files *broken)
{
	static const struct rlb_config_source no_env;
	enum rlb_policy policy = RLB_POLICY_RANDOM;
	enum rlb_log_level level = RLB_LOG_WARNING;
	struct rlb_config *cfg = NULL;
	int rc = -EINVAL;

	if (!src)
		src = &no_env;
	check_env(p, src, &policy, &level);
	if (p->errors || p->nomem)
		goto out_free;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		p->nomem = true;
		goto out_free;
	}
	merge(p, m, a, cfg);
	apply_env(p, src, policy, level, cfg);
	cfg->files = *files;
	memset(files, 0, sizeof(*files));
	atomic_init(&cfg->refs, 1);
	if (p->nomem)
		goto out_free;
	*out = cfg;
	cfg = NULL;
	rc = 0;
out_free:
	if (p->nomem)
		rc = -ENOMEM;
	rlb_config_free(cfg);
	if (rc == -EINVAL && broken) {
		*broken = *files;
		memset(files, 0, sizeof(*files));
	}
	rlb_config_files_free(files);
	layer_free(m);
	layer_free(a);
	return rc;
}

const char *rlb_config_path(void)
{
	const char *env = rlb_env("REPLICALB_CONFIG");

	/* SPEC 2: the first of the two that exists. */
	if (env && access(env, F_OK) != 0 &&
	    access(RLB_SYSTEM_CONFIG, F_OK) == 0)
		return RLB_SYSTEM_CONFIG;
	return env ? env : RLB_SYSTEM_CONFIG;
}

const char *rlb_config_app_name(void)
{
	const char *app = rlb_env("REPLICALB_APP");

	return app ? app : program_invocation_short_name;
}

void rlb_config_source_from_env(struct rlb_config_source *src)
{
	memset(src, 0, sizeof(*src));
	src->path = rlb_config_path();
	src->app = rlb_config_app_name();
	src->env_policy = rlb_env("REPLICALB_LOAD_BALANCING");
	src->env_hostname = rlb_env("REPLICALB_HOSTNAME");
	src->env_state_dir = rlb_env("REPLICALB_STATE_DIR");
	src->env_log_level = rlb_env("REPLICALB_LOG_LEVEL");
}

int rlb_config_load(const struct rlb_config_source *src,
		    struct rlb_config **out, struct rlb_diag *diag)
{
	return rlb_config_load_ex(src, out, diag, NULL);
}

int rlb_config_load_ex(const struct rlb_config_source *src,
		       struct rlb_config **out, struct rlb_diag *diag,
		       struct rlb_config_files *broken)
{
	struct rlb_config_files files = {.n = 1};
	struct parser p = {.diag = diag};
	struct layer m = {0}, a = {0};
	const char *path = src && src->path ? src->path : rlb_config_path();
	const char *app = src ? src->app : NULL;
	char *app_path = NULL;
	int saved = errno;
	int rc;

	rc = read_file(&p, path, &m, &files.stamps[0]);
	if (rc == -ENOENT) {
		rlb_config_files_free(&files);
		errno = saved;
		return -ENOENT;
	}
	if (m.parsed && !m.has_clusters)
		report_at(&p, path, 1, "missing \"clusters\" list");
	if (app_name_ok(app)) {
		const char *slash = strrchr(path, '/');
		int dirlen = slash ? (int)(slash - path + 1) : 0;

		if (asprintf(&app_path, "%.*sapps.d/%s.conf", dirlen, path,
			     app) < 0) {
			app_path = NULL;
			p.nomem = true;
		} else {
			files.n = 2;
			/* A missing app file is stamped as missing, so
			 * that creating it later counts as a change. */
			read_file(&p, app_path, &a, &files.stamps[1]);
		}
	}
	rc = finish(&p, &m, &a, src, &files, out, broken);
	free(app_path);
	errno = saved;
	return rc;
}

int rlb_config_parse_string(const char *text, const char *name,
			    struct rlb_config **out, struct rlb_diag *diag)
{
	struct parser p = {
		.diag = diag,
		.file = name ? name : "(string)",
		.text = text ? text : "",
	};
	struct rlb_config_files none = {0};
	struct layer m = {0}, a = {0};
	config_t lc;
	bool ok;

	config_init(&lc);
	ok = config_read_string(&lc, p.text) == CONFIG_TRUE;
	parse_read(&p, &lc, ok, &m);
	config_destroy(&lc);
	if (m.parsed && !m.has_clusters)
		report_at(&p, p.file, 1, "missing \"clusters\" list");
	return finish(&p, &m, &a, NULL, &none, out, NULL);
}

void rlb_config_free(struct rlb_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->nclusters; i++)
		cluster_free(&cfg->clusters[i]);
	free(cfg->clusters);
	free(cfg->local_hostname);
	free(cfg->state_dir);
	rlb_config_files_free(&cfg->files);
	free(cfg);
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

bool rlb_config_files_changed(const struct rlb_config_files *files)
{
	int saved = errno;
	bool changed = false;

	for (size_t i = 0; files && i < files->n && !changed; i++) {
		const struct rlb_file_stamp *s = &files->stamps[i];
		struct stat st;
		bool exists = stat(s->path, &st) == 0;

		if (exists != s->exists)
			changed = true;
		else if (exists)
			changed = st.st_dev != s->dev || st.st_ino != s->ino ||
				  st.st_size != s->size ||
				  st.st_mtim.tv_sec != s->mtime.tv_sec ||
				  st.st_mtim.tv_nsec != s->mtime.tv_nsec;
	}
	errno = saved;
	return changed;
}

void rlb_config_files_free(struct rlb_config_files *files)
{
	if (!files)
		return;
	for (size_t i = 0; i < files->n; i++)
		free(files->stamps[i].path);
	memset(files, 0, sizeof(*files));
}
