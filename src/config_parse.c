/* config_parse.c - libconfig text into the config model, with "file:line:
 * message" diagnostics and "did you mean" hints. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

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

/*
 * libconfig names an @include'd file (inc, the source file of a setting
 * or error; NULL for the file itself) as written in the @include, but
 * opens it relative to p->dir: the directory to put in front, or "".
 */
static const char *include_dir(const struct rlb_cfg_parser *p, const char *inc)
{
	return inc && p->dir && inc[0] != '/' ? p->dir : "";
}

/* One error at dir/file:line (dir "" for none; line <= 0 for none). */
static void vreport(struct rlb_cfg_parser *p, const char *dir, const char *file,
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
	report_in(struct rlb_cfg_parser *p, const char *dir, const char *file,
		  int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, dir, file, line, fmt, ap);
	va_end(ap);
}

void rlb_cfg_report_at(struct rlb_cfg_parser *p, const char *file, int line,
		       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, "", file, line, fmt, ap);
	va_end(ap);
}

static const char *setting_file(const struct rlb_cfg_parser *p,
				const config_setting_t *s)
{
	const char *f = config_setting_source_file(s);

	/* Only @include'd files carry a name; the rest is p->file. */
	return f ? f : p->file;
}

static const char *setting_dir(const struct rlb_cfg_parser *p,
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
static int setting_line(const struct rlb_cfg_parser *p,
			const config_setting_t *s)
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
static void RLB_PRINTF(3, 4)
	report(struct rlb_cfg_parser *p, const config_setting_t *s,
	       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(p, setting_dir(p, s), setting_file(p, s), setting_line(p, s),
		fmt, ap);
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

static void unknown_key(struct rlb_cfg_parser *p, const config_setting_t *s,
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

static bool port_ok(struct rlb_cfg_parser *p, const config_setting_t *s,
		    int64_t v)
{
	if (v >= 1 && v <= 65535)
		return true;
	report(p, s, "port %lld out of range 1..65535", (long long)v);
	return false;
}

static bool get_port(struct rlb_cfg_parser *p, const config_setting_t *s,
		     int *out)
{
	int64_t v;

	if (!get_int(p, s, &v) || !port_ok(p, s, v))
		return false;
	*out = (int)v;
	return true;
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

/* Parse s into g if it is a setting shared by the top level and clusters;
 * false when it is some other key. */
static bool parse_common(struct rlb_cfg_parser *p, const config_setting_t *s,
			 struct rlb_cfg_given *g)
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
			g->local_hostname = rlb_cfg_strdup(p, v);
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

void rlb_cfg_given_apply(struct rlb_settings *dst,
			 const struct rlb_cfg_given *g)
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

void rlb_cfg_bad_env_policy(struct rlb_cfg_parser *p, const char *var,
			    const char *value)
{
	bad_policy(p, NULL, var, value);
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
				const config_setting_t *g,
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
			rlb_cfg_report_at(
				p, c->file ? c->file : p->file, r->line,
				"duplicate replica \"%s\" (first at line %d)",
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

static void parse_cluster(struct rlb_cfg_parser *p, const config_setting_t *g,
			  struct rlb_cfg_cluster *pc)
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

static void parse_top(struct rlb_cfg_parser *p, const config_setting_t *root,
		      struct rlb_cfg_layer *l)
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
			l->state_dir = rlb_cfg_strdup(p, v);
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

/* Parse libconfig text already read into lc (or its error) into l. */
static void parse_read(struct rlb_cfg_parser *p, config_t *lc, bool ok,
		       struct rlb_cfg_layer *l)
{
	if (!ok) {
		const char *f = config_error_file(lc);

		if (config_error_type(lc) == CONFIG_ERR_FILE_IO && !f)
			rlb_cfg_report_at(p, p->file, 0, "cannot read");
		else
			report_in(p, include_dir(p, f), f ? f : p->file,
				  config_error_line(lc), "%s",
				  config_error_text(lc));
		return;
	}
	parse_top(p, config_root_setting(lc), l);
}

void rlb_cfg_parse_text(struct rlb_cfg_parser *p, const char *text,
			const char *dir, struct rlb_cfg_layer *l)
{
	config_t lc;
	bool ok;

	config_init(&lc);
	if (dir)
		config_set_include_dir(&lc, dir);
	p->text = text;
	p->dir = dir;
	ok = config_read_string(&lc, text) == CONFIG_TRUE;
	parse_read(p, &lc, ok, l);
	p->text = NULL;
	p->dir = NULL;
	config_destroy(&lc);
}
