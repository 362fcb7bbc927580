/* replicalbctl.c - check a config, show selection orders, manage health. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctl/ctl.h"

/* Room for "[host]:port". */
#define CTL_LABEL_MAX (RLB_MAX_HOST + 16)

#define ctl_error	rlb_ctl_error
#define ctl_usage_error rlb_ctl_usage_error

/* Digits only, no sign, 1 <= value <= max. */
static bool parse_positive(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return false;
		d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v == 0)
		return false;
	*out = v;
	return true;
}

/* A replica as the user writes it: host, [v6]:port or host:port. */
static void replica_label(const struct rlb_replica *r, char *buf, size_t len)
{
	if (!r->port)
		snprintf(buf, len, "%s", r->host);
	else if (strchr(r->host, ':'))
		snprintf(buf, len, "[%s]:%d", r->host, r->port);
	else
		snprintf(buf, len, "%s:%d", r->host, r->port);
}

/*
 * Split HOST, HOST:PORT or [HOST]:PORT into host and port (0 when not
 * given). A bare IPv6 literal (several colons) is a host without port.
 * Returns false when malformed.
 */
static bool parse_host_spec(const char *spec, char *host, size_t hostlen,
			    int *port)
{
	const char *end, *colon;
	uint64_t p;
	size_t n;

	*port = 0;
	if (spec[0] == '[') {
		end = strchr(spec, ']');
		if (!end)
			return false;
		n = (size_t)(end - spec - 1);
		colon = end[1] ? end + 1 : NULL;
		if (colon && *colon != ':')
			return false;
		spec++;
	} else {
		colon = strchr(spec, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL;
		n = colon ? (size_t)(colon - spec) : strlen(spec);
	}
	if (n == 0 || n >= hostlen)
		return false;
	memcpy(host, spec, n);
	host[n] = '\0';
	if (colon) {
		if (!parse_positive(colon + 1, 65535, &p))
			return false;
		*port = (int)p;
	}
	return true;
}

static const char *cluster_word(void *cfg, size_t i)
{
	return ((const struct rlb_config *)cfg)->clusters[i].name;
}

static struct rlb_cluster *find_cluster(const struct rlb_config *cfg,
					const char *name)
{
	struct rlb_cluster *c = rlb_config_find(cfg, name);
	const char *close;

	if (c)
		return c;
	close = rlb_closest_word(name, cluster_word, (void *)cfg,
				 cfg->nclusters, true);
	if (close)
		ctl_error("no cluster named %s; did you mean %s?", name, close);
	else
		ctl_error("no cluster named %s", name);
	return NULL;
}

static const char *replica_word(void *c, size_t i)
{
	return ((const struct rlb_cluster *)c)->replicas[i].host;
}

/*
 * The replica of c that spec names: the one whose host string matches
 * (ASCII case-insensitive) and, when spec has a port, whose port is that
 * port. Returns its index, or -1 after printing why there is none.
 */
static ssize_t find_replica(const struct rlb_cluster *c, const char *spec)
{
	char host[RLB_MAX_HOST + 1];
	ssize_t found = -1;
	size_t matches = 0;
	int port;

	if (!parse_host_spec(spec, host, sizeof(host), &port)) {
		ctl_error("invalid replica \"%s\"", spec);
		return -1;
	}
	for (size_t i = 0; i < c->nreplicas; i++) {
		const struct rlb_replica *r = &c->replicas[i];

		if (strcasecmp(r->host, host) != 0)
			continue;
		if (port && r->port != port)
			continue;
		if (found < 0)
			found = (ssize_t)i;
		matches++;
	}
	if (matches == 0) {
		const char *close = rlb_closest_word(
			host, replica_word, (void *)c, c->nreplicas, true);

		if (close)
			ctl_error("no replica %s in cluster %s; did you mean "
				  "%s?",
				  spec, c->name, close);
		else
			ctl_error("no replica %s in cluster %s", spec, c->name);
		return -1;
	}
	/* Config rejects duplicate host:port, so only a bare host can. */
	if (matches > 1) {
		ctl_error("%s: ambiguous in cluster %s, add :PORT", spec,
			  c->name);
		return -1;
	}
	return found;
}

/*
 * Without NAME, every policy; with NAME, the policy it names or the
 * closest one (the config's "did you mean"), exit 1 when none is close:
 * the wrapper's hint for `replicalb -p`.
 */
static int cmd_policies(struct rlb_config *cfg, const struct ctl_opts *o)
{
	if (o->nargs == 2) {
		enum rlb_policy p;
		const char *close;

		if (rlb_policy_parse(o->args[1], &p) == 0) {
			puts(rlb_policy_name(p));
			return 0;
		}
		close = rlb_policy_suggest(o->args[1]);
		if (!close)
			return 1;
		puts(close);
		return 0;
	}
	for (int p = 0; p < RLB_POLICY_COUNT; p++)
		puts(rlb_policy_name((enum rlb_policy)p));
	return 0;
}

/* Every environment variable the library and the tool read. */
static int cmd_env(struct rlb_config *cfg, const struct ctl_opts *o)
{
	for (int v = 0; v < RLB_ENV_COUNT; v++) {
		const char *val = rlb_env((enum rlb_env_id)v);

		printf("%-28s %s%s%s\n", rlb_env_vars[v].name,
		       rlb_env_vars[v].meaning, val ? ": " : "",
		       val ? val : "");
	}
	return 0;
}

static int cmd_check(struct rlb_config *cfg, const struct ctl_opts *o)
{
	size_t warnings = 0;

	if (cfg->nclusters == 0)
		puts("no clusters: every name passes through unchanged");
	for (size_t k = 0; k < cfg->nclusters; k++) {
		const struct rlb_cluster *c = &cfg->clusters[k];

		printf("%s: %s, %zu replica%s", c->name,
		       rlb_policy_name(c->s.load_balancing), c->nreplicas,
		       c->nreplicas == 1 ? "" : "s");
		if (c->srv || c->dns)
			printf(" (%zu from config, %zu from DNS)", c->nstatic,
			       c->nreplicas - c->nstatic);
		putchar('\n');
		rlb_ctl_print_dns(c, "  ", false);
		/* Valid, yet nothing to balance over: say so. */
		if (c->nreplicas == 0) {
			printf("  warning: no replicas: a program resolving "
			       "%s gets %s until its DNS sources give some\n",
			       c->name,
			       c->no_members_eai == EAI_AGAIN ? "EAI_AGAIN"
							      : "EAI_NONAME");
			warnings++;
		}
	}
	/* The config is valid: exit 0, warnings or not (design.md §6). */
	if (warnings)
		printf("ok (%zu warning%s)\n", warnings,
		       warnings == 1 ? "" : "s");
	else
		puts("ok");
	return 0;
}

/* The -v line of replica i: key parts as this selection saw them. */
static void print_replica_detail(const struct rlb_cluster *c,
				 const struct rlb_selection *sel, size_t i,
				 uint64_t in_flight)
{
	const struct rlb_replica *r = &c->replicas[i];
	char label[CTL_LABEL_MAX];

	replica_label(r, label, sizeof(label));
	printf("  %s errors=%" PRIu64 " slowdowns=%" PRIu64 " priority=%" PRId64
	       " policy_priority=%" PRId64 " in_flight=%" PRIu64 " addresses=",
	       label, sel->errors[i], sel->slowdowns[i], r->priority,
	       sel->policy_prio[i], in_flight);
	if (r->nliteral == 0)
		fputs("dns", stdout);
	for (size_t k = 0; k < r->nliteral; k++) {
		char text[INET6_ADDRSTRLEN];

		inet_ntop(r->literal[k].family, r->literal[k].bytes, text,
			  sizeof(text));
		printf("%s%s", k ? "," : "", text);
	}
	/* Where it came from, where it may come from elsewhere. */
	if (c->srv || c->dns)
		printf(" source=%s", rlb_replica_source_name(r->source));
	if (r->source == RLB_SOURCE_SRV)
		printf(" weight=%u", r->weight);
	putchar('\n');
}

static int cmd_resolve(struct rlb_config *cfg, const struct ctl_opts *o)
{
	bool peek = o->given & CTL_OPT_PEEK;
	bool verbose = o->given & CTL_OPT_VERBOSE;
	struct rlb_selection *sel;
	struct rlb_cluster *c;
	uint64_t count = 1, *in_flight;

	if (o->count && !parse_positive(o->count, UINT64_MAX, &count))
		return ctl_usage_error("COUNT must be a positive integer: %s",
				       o->count);
	c = find_cluster(cfg, o->args[1]);
	if (!c)
		return 1;
	sel = rlb_selection_new(c->nreplicas);
	in_flight = calloc(c->nreplicas ? c->nreplicas : 1, sizeof(*in_flight));
	if (!sel || !in_flight) {
		free(sel);
		free(in_flight);
		ctl_error("out of memory");
		return 1;
	}
	for (uint64_t n = 0; n < count; n++) {
		/* Read once, so that -v shows the counts that ranked a
		 * policy that needs them (least_request). */
		rlb_health_in_flight(c, c->nreplicas, in_flight);
		rlb_select_load(c, peek, rlb_now(), in_flight, sel);
		for (size_t k = 0; k < sel->n; k++)
			printf("%s%s", k ? " " : "",
			       c->replicas[sel->order[k]].host);
		putchar('\n');
		for (size_t k = 0; verbose && k < sel->n; k++)
			print_replica_detail(c, sel, sel->order[k],
					     in_flight[sel->order[k]]);
		if (verbose)
			rlb_ctl_print_dns(c, "  ", true);
	}
	free(sel);
	free(in_flight);
	return 0;
}

static int cmd_status(struct rlb_config *cfg, const struct ctl_opts *o)
{
	bool json = o->given & CTL_OPT_JSON;
	struct rlb_cluster *one = NULL;
	int64_t now = rlb_now();
	bool first = true;

	if (json && (o->given & CTL_OPT_PROM))
		return ctl_usage_error("--json and --prometheus: one or the "
				       "other");
	if (o->nargs > 1) {
		one = find_cluster(cfg, o->args[1]);
		if (!one)
			return 1;
	}
	if (o->given & CTL_OPT_PROM) {
		rlb_ctl_prometheus(cfg, one, now);
		return 0;
	}
	if (json)
		fputs("{\"clusters\": [", stdout);
	for (size_t k = 0; k < cfg->nclusters; k++) {
		const struct rlb_cluster *c = &cfg->clusters[k];

		if (one && c != one)
			continue;
		if (json) {
			fputs(first ? "" : ", ", stdout);
			rlb_ctl_json_cluster(c, now);
		} else {
			fputs(first ? "" : "\n", stdout);
			rlb_ctl_table_cluster(c, now);
		}
		first = false;
	}
	if (json)
		fputs("]}\n", stdout);
	return 0;
}

/*
 * Whether c's health is the shared state file: a change to private state
 * would be lost when this tool exits, so admin commands refuse it.
 */
static bool shared_state(const struct rlb_cluster *c)
{
	if (strcmp(rlb_health_path(c->health), "(private)") != 0)
		return true;
	ctl_error("%s: the state file cannot be used (see the warning above); "
		  "nothing changed",
		  c->name);
	return false;
}

static int cmd_record_error(struct rlb_config *cfg, const struct ctl_opts *o)
{
	struct rlb_cluster *c;
	uint64_t count = 1;
	ssize_t i;

	if (o->nargs > 3 && !parse_positive(o->args[3], UINT64_MAX, &count))
		return ctl_usage_error("COUNT must be a positive integer: %s",
				       o->args[3]);
	c = find_cluster(cfg, o->args[1]);
	if (!c)
		return 1;
	i = find_replica(c, o->args[2]);
	if (i < 0 || !shared_state(c))
		return 1;
	rlb_health_add_errors(c, (size_t)i, count, rlb_now());
	return 0;
}

static struct rlb_config *load_config(const struct ctl_opts *o);
static const char *local_fqdn(void);

/* Why a probe of r failed, in words (into buf); NULL when it did not. */
static const char *probe_why(const struct rlb_probe_result *r, char *buf,
			     size_t len)
{
	const char *why;

	switch (r->outcome) {
	case RLB_PROBE_OK:
		return NULL;
	case RLB_PROBE_NO_PORT:
		return "no port of its own (the program's): not probed";
	case RLB_PROBE_LOCAL:
		if (r->gai == EAI_SYSTEM)
			why = strerror(r->err);
		else if (r->gai)
			why = gai_strerror(r->gai);
		else
			why = strerror(r->local_err);
		snprintf(buf, len, "not probed: local error: %s", why);
		return buf;
	case RLB_PROBE_FAILED:
		break;
	}
	if (!r->gai && !r->err && r->http) {
		if (r->http_status > 0)
			snprintf(buf, len, "HTTP status %d", r->http_status);
		else if (r->http_status == 0)
			snprintf(buf, len,
				 "no HTTP answer within %" PRId64 " ms",
				 r->http_timeout_ms);
		else
			snprintf(buf, len, "not an HTTP answer");
		return buf;
	}
	return r->gai ? gai_strerror(r->gai) : strerror(r->err);
}

static void probe_print(const struct rlb_config *cfg,
			const struct rlb_probe_result *res, size_t n, bool json)
{
	if (!json && cfg->nclusters == 0)
		puts("no clusters: nothing to probe");
	if (json)
		printf("{\"time\": %" PRId64 ", \"probes\": [", rlb_now());
	for (size_t k = 0; k < n; k++) {
		const struct rlb_probe_result *r = &res[k];
		const struct rlb_cluster *c = &cfg->clusters[r->cluster];
		char label[CTL_LABEL_MAX], buf[160];
		const char *why = probe_why(r, buf, sizeof(buf));
		bool failed = r->outcome == RLB_PROBE_FAILED;

		if (!json) {
			if (k == 0 || res[k - 1].cluster != r->cluster)
				printf("CLUSTER %s\n", c->name);
			replica_label(&c->replicas[r->replica], label,
				      sizeof(label));
			if (r->outcome == RLB_PROBE_OK && r->http)
				printf("  %s %s ok %" PRId64 " ms, HTTP %d\n",
				       label, r->address, r->ms,
				       r->http_status);
			else if (r->outcome == RLB_PROBE_OK)
				printf("  %s %s ok %" PRId64 " ms\n", label,
				       r->address, r->ms);
			else if (r->outcome == RLB_PROBE_LOCAL)
				printf("  %s %s %s\n", label,
				       r->address[0] ? r->address : "-", why);
			else
				printf("  %s %s failed: %s%s\n", label,
				       r->address[0] ? r->address : "-", why,
				       !failed	    ? ""
				       : r->counted ? " (error counted)"
						    : " (error not stored: "
						      "the state file cannot "
						      "be used)");
			continue;
		}
		fputs(k ? ", {\"cluster\": " : "{\"cluster\": ", stdout);
		rlb_ctl_json_string(c->name);
		fputs(", \"host\": ", stdout);
		rlb_ctl_json_string(c->replicas[r->replica].host);
		if (r->port)
			printf(", \"port\": %d", r->port);
		else
			fputs(", \"port\": null", stdout);
		fputs(", \"address\": ", stdout);
		if (r->address[0])
			rlb_ctl_json_string(r->address);
		else
			fputs("null", stdout);
		if (r->http && r->http_status > 0)
			printf(", \"http_status\": %d", r->http_status);
		else if (r->http)
			fputs(", \"http_status\": null", stdout);
		printf(", \"ok\": %s, \"ms\": ",
		       r->outcome == RLB_PROBE_OK ? "true" : "false");
		if (r->outcome == RLB_PROBE_OK)
			printf("%" PRId64, r->ms);
		else
			fputs("null", stdout);
		printf(", \"counted\": %s, \"stored\": %s, \"ours\": %s",
		       r->counted ? "true" : "false",
		       !failed	    ? "null"
		       : r->counted ? "true"
				    : "false",
		       r->outcome == RLB_PROBE_LOCAL ? "true" : "false");
		fputs(", \"error\": ", stdout);
		if (why)
			rlb_ctl_json_string(why);
		else
			fputs("null", stdout);
		putchar('}');
	}
	if (json)
		puts("]}");
	fflush(stdout);
}

/*
 * One pass over cfg. 0: every probed replica answered; 3: some replica
 * failed and every such failure was counted in the shared state; 4: the
 * probe fell short: a failure it could not store, or a replica it could
 * not probe for a failure of ours (4 wins over 3). 1: out of memory.
 */
static int probe_pass(struct rlb_config *cfg, bool json)
{
	struct rlb_probe_result *res;
	size_t n = 0;
	int rc = 0;

	res = rlb_probe(cfg, &n);
	if (!res) {
		ctl_error("out of memory");
		return 1;
	}
	probe_print(cfg, res, n, json);
	for (size_t k = 0; k < n; k++) {
		const struct rlb_probe_result *r = &res[k];

		if (r->outcome == RLB_PROBE_LOCAL ||
		    (r->outcome == RLB_PROBE_FAILED && !r->counted))
			rc = 4;
		else if (r->counted && rc == 0)
			rc = 3;
	}
	free(res);
	return rc;
}

static int cmd_probe(struct rlb_config *cfg, const struct ctl_opts *o)
{
	bool json = o->given & CTL_OPT_JSON;
	struct rlb_snapshot *snap = NULL;
	uint64_t interval = 0;
	int64_t next_ms;
	int rc;

	if (o->interval &&
	    !parse_positive(o->interval, 24 * 3600 * 365, &interval))
		return ctl_usage_error("S must be a positive integer: %s",
				       o->interval);
	next_ms = rlb_monotonic_ms();
	rc = probe_pass(cfg, json);
	while (interval) {
		struct rlb_config *next;
		int64_t now = rlb_monotonic_ms();

		/* Passes start every S seconds, however long one takes. */
		next_ms += (int64_t)interval * 1000;
		if (next_ms > now) {
			struct timespec ts = {
				.tv_sec = (next_ms - now) / 1000,
				.tv_nsec = (next_ms - now) % 1000 * 1000000,
			};

			rlb_libc()->nanosleep(&ts, NULL);
		} else {
			next_ms = now;
		}
		/* Every pass reads the config again; a broken edit keeps
		 * the last good one. */
		next = load_config(o);
		if (next) {
			rlb_snapshot_put(snap);
			snap = rlb_snapshot_new(next, local_fqdn,
						RLB_STATE_COUNT, false);
		}
		rc = probe_pass(snap ? snap->cfg : cfg, json);
	}
	rlb_snapshot_put(snap);
	return rc;
}

static int cmd_reset(struct rlb_config *cfg, const struct ctl_opts *o)
{
	struct rlb_cluster *c;
	ssize_t i;

	if (o->nargs == 1) {
		int rc = 0;

		for (size_t k = 0; k < cfg->nclusters; k++) {
			if (!shared_state(&cfg->clusters[k]))
				rc = 1;
			rlb_health_reset(&cfg->clusters[k], SIZE_MAX);
		}
		return rc;
	}
	c = find_cluster(cfg, o->args[1]);
	if (!c || !shared_state(c))
		return 1;
	if (o->nargs == 2) {
		rlb_health_reset(c, SIZE_MAX);
		return 0;
	}
	i = find_replica(c, o->args[2]);
	if (i < 0)
		return 1;
	rlb_health_reset(c, (size_t)i);
	return 0;
}

/*
 * Remove state that no program of this config needs (design.md §12.10):
 * not a reset, since programs still running keep their counts.
 */
static int cmd_remove_state(struct rlb_config *cfg, const struct ctl_opts *o)
{
	if (rlb_health_remove_state(cfg, o->given & CTL_OPT_ALL, stdout) < 0) {
		ctl_error("cannot remove state: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/*
 * Remove the user's segments whose state directory is gone (design.md
 * §12.11), whatever the config: they are nobody's any more.
 */
static int cmd_gc(struct rlb_config *cfg, const struct ctl_opts *o)
{
	rlb_health_gc(stdout);
	return 0;
}

static int cmd_complete(struct rlb_config *cfg, const struct ctl_opts *o);

/* The commands: the one table the parser, the usage and completion read
 * (cli.c); the options are cli.c's. */
static const struct ctl_cmd commands[] = {
	{.name = "check",
	 .needs = CTL_NEEDS_CONFIG,
	 .run = cmd_check,
	 .help = "validate the config, list clusters"},
	{.name = "resolve",
	 .min_args = 1,
	 .max_args = 1,
	 .opts = CTL_OPT_COUNT | CTL_OPT_PEEK | CTL_OPT_VERBOSE,
	 .needs = CTL_NEEDS_RUNTIME,
	 .run = cmd_resolve,
	 .args = "NAME",
	 .help = "perform selections, print the orders",
	 .arg_kinds = {CTL_ARG_CLUSTER}},
	{.name = "status",
	 .max_args = 1,
	 .opts = CTL_OPT_JSON | CTL_OPT_PROM,
	 .needs = CTL_NEEDS_LOOK,
	 .run = cmd_status,
	 .args = "[CLUSTER]",
	 .help = "show error counts, recovery times, traffic",
	 .arg_kinds = {CTL_ARG_CLUSTER}},
	{.name = "record-error",
	 .min_args = 2,
	 .max_args = 3,
	 .needs = CTL_NEEDS_RUNTIME,
	 .run = cmd_record_error,
	 .args = "CLUSTER HOST[:PORT] [COUNT]",
	 .help = "count errors against a replica",
	 .arg_kinds = {CTL_ARG_CLUSTER, CTL_ARG_REPLICA}},
	{.name = "reset",
	 .max_args = 2,
	 .needs = CTL_NEEDS_RUNTIME,
	 .run = cmd_reset,
	 .args = "[CLUSTER [HOST[:PORT]]]",
	 .help = "zero error counts",
	 .arg_kinds = {CTL_ARG_CLUSTER, CTL_ARG_REPLICA}},
	{.name = "policies",
	 .max_args = 1,
	 .needs = CTL_NEEDS_NOTHING,
	 .run = cmd_policies,
	 .args = "[NAME]",
	 .help = "list the load_balancing policies, or the\none NAME names "
		 "or is closest to",
	 .arg_kinds = {CTL_ARG_POLICY}},
	{.name = "env",
	 .needs = CTL_NEEDS_NOTHING,
	 .run = cmd_env,
	 .help = "list the environment variables read"},
	{.name = "probe",
	 .opts = CTL_OPT_JSON | CTL_OPT_INTERVAL,
	 .needs = CTL_NEEDS_RUNTIME,
	 .run = cmd_probe,
	 .help = "connect to every replica, count failures"},
	{.name = "remove-state",
	 .opts = CTL_OPT_ALL,
	 .needs = CTL_NEEDS_CONFIG,
	 .run = cmd_remove_state,
	 .help = "remove the state of clusters not in the\nconfig (of all "
		 "with --all), and leftovers"},
	{.name = "gc",
	 .needs = CTL_NEEDS_NOTHING,
	 .run = cmd_gc,
	 .help = "remove the segments of state directories\nthat are gone"},
	/* Hidden (no help): the words bash completion offers; main() takes
	 * it before parsing. */
	{.name = "__complete",
	 .max_args = 1 << 20,
	 .opts = ~0u,
	 .needs = CTL_NEEDS_NOTHING,
	 .run = cmd_complete},
};
#define NCOMMANDS (sizeof(commands) / sizeof(*commands))

/* This host's FQDN, looked up once, as the library does. */
static const char *local_fqdn(void)
{
	static char fqdn[RLB_MAX_HOST + 1];

	if (!fqdn[0])
		rlb_local_fqdn(fqdn, sizeof(fqdn));
	return fqdn;
}

/*
 * Load the config as the library would, with -c/-a/-H in place of the
 * environment, and report why not. Returns the config or NULL.
 */
static struct rlb_config *load_config(const struct ctl_opts *o)
{
	struct rlb_config_source src;
	struct rlb_diag diag = {0};
	struct rlb_config *cfg = NULL;
	int rc;

	rlb_config_source_from_env(&src);
	src.path = o->config ? o->config : rlb_config_path();
	/* Not program_invocation_short_name: this tool is not the app. */
	src.app = o->app ? o->app : rlb_env(RLB_ENV_APP);
	if (o->hostname)
		src.env_hostname = o->hostname;
	rc = rlb_config_load(&src, &cfg, &diag);
	if (rc == -ENOENT) {
		ctl_error("%s: no such config file", src.path);
	} else if (rc < 0) {
		for (size_t i = 0; i < diag.n; i++)
			fprintf(stderr, "%s\n", diag.msgs[i]);
		if (diag.n == 0)
			ctl_error("%s: %s", src.path, strerror(-rc));
	}
	rlb_diag_free(&diag);
	return rc < 0 ? NULL : cfg;
}

/* Never run: __complete is taken by main() before parsing. */
static int cmd_complete(struct rlb_config *cfg, const struct ctl_opts *o)
{
	return 1;
}

/* The clusters of the config in effect (o's -c, -a, -H), one a line. */
static void complete_clusters(const struct rlb_config *cfg)
{
	for (size_t i = 0; cfg && i < cfg->nclusters; i++)
		puts(cfg->clusters[i].name);
}

/* The replicas of cluster name, as record-error and reset take them. */
static void complete_replicas(const struct rlb_config *cfg, const char *name)
{
	const struct rlb_cluster *c = cfg ? rlb_config_find(cfg, name) : NULL;
	char label[CTL_LABEL_MAX];

	for (size_t i = 0; c && i < c->nreplicas; i++) {
		replica_label(&c->replicas[i], label, sizeof(label));
		puts(label);
	}
}

/*
 * `replicalbctl __complete WORD...`: the words bash may offer after
 * WORD... (the command line so far, without the program and the word
 * being typed), one a line (etc/bash-completion/replicalbctl): after an
 * option that takes an argument, nothing (the shell offers files); before
 * the command, the commands and the global options; after it, its
 * options and what its next argument is: a cluster or a replica of the
 * config in effect (-c, -a, -H as given), a policy. Never fails aloud.
 */
static int complete(int nwords, char **words)
{
	char **argv = calloc((size_t)nwords + 2, sizeof(*argv));
	const struct ctl_cmd *cmd = NULL;
	struct ctl_opts o = {0};
	struct rlb_config *cfg = NULL;
	enum ctl_arg_kind kind = CTL_ARG_NONE;
	int pos;

	if (!argv)
		return 0;
	if (nwords > 0 && rlb_ctl_option_takes_arg(words[nwords - 1])) {
		free(argv);
		return 0;
	}
	argv[0] = (char *)CTL_NAME;
	for (int i = 0; i < nwords; i++)
		argv[i + 1] = words[i];
	/* Quietly: what is typed may not parse yet. */
	if (!freopen("/dev/null", "w", stderr) ||
	    rlb_ctl_parse(nwords + 1, argv, commands, NCOMMANDS, &o) >= 0)
		goto out;
	if (o.nargs > 0)
		cmd = rlb_ctl_find_command(commands, NCOMMANDS, o.args[0],
					   false);
	if (!cmd) {
		for (size_t i = 0; i < NCOMMANDS; i++)
			if (commands[i].help)
				puts(commands[i].name);
		rlb_ctl_print_options(NULL);
		goto out;
	}
	rlb_ctl_print_options(cmd);
	pos = o.nargs - 1;
	if (pos < (int)(sizeof(cmd->arg_kinds) / sizeof(*cmd->arg_kinds)))
		kind = cmd->arg_kinds[pos];
	if (kind == CTL_ARG_POLICY)
		for (int p = 0; p < RLB_POLICY_COUNT; p++)
			puts(rlb_policy_name((enum rlb_policy)p));
	if (kind == CTL_ARG_CLUSTER || kind == CTL_ARG_REPLICA)
		cfg = load_config(&o);
	if (kind == CTL_ARG_CLUSTER)
		complete_clusters(cfg);
	else if (kind == CTL_ARG_REPLICA)
		complete_replicas(cfg, o.args[pos]);
out:
	rlb_config_free(cfg);
	free(o.args);
	free(argv);
	return 0;
}

int main(int argc, char **argv)
{
	const struct ctl_cmd *cmd = NULL;
	struct rlb_config *cfg = NULL;
	struct rlb_snapshot *snap = NULL;
	struct ctl_opts o = {0};
	int rc;

	/* The words of a command line being completed are not a command
	 * line to run: taken whole, never parsed here. */
	if (argc > 1 && strcmp(argv[1], "__complete") == 0)
		return complete(argc - 2, argv + 2);
	rc = rlb_ctl_parse(argc, argv, commands, NCOMMANDS, &o);
	if (rc >= 0)
		goto out;
	rc = 1;
	if (o.nargs == 0) {
		ctl_usage_error("no command given");
		goto out;
	}
	cmd = rlb_ctl_find_command(commands, NCOMMANDS, o.args[0], true);
	if (!cmd)
		goto out;
	if (o.nargs - 1 < cmd->min_args || o.nargs - 1 > cmd->max_args) {
		ctl_usage_error("wrong number of arguments for %s", cmd->name);
		goto out;
	}
	if (rlb_ctl_check_options(cmd, &o) != 0)
		goto out;
	if (cmd->needs != CTL_NEEDS_NOTHING) {
		cfg = load_config(&o);
		if (!cfg)
			goto out;
		/* Our own messages go to the terminal, whatever log_target;
		 * what DNS answered is shown by check and resolve -v, not
		 * warned about on every command (a warning is the library's,
		 * for a program that cannot show it otherwise). */
		rlb_log_configure(cfg->log_level < RLB_LOG_ERROR
					  ? cfg->log_level
					  : RLB_LOG_ERROR,
				  RLB_LOG_STDERR);
		if (!rlb_ctl_ask_members(cfg)) {
			ctl_error("out of memory");
			goto out;
		}
		rlb_log_configure(cfg->log_level, RLB_LOG_STDERR);
	}
	if (cmd->needs == CTL_NEEDS_LOOK || (o.given & CTL_OPT_PEEK)) {
		/* Reading never creates or changes a state file. */
		snap = rlb_snapshot_new(cfg, local_fqdn, RLB_STATE_LOOK, false);
		cfg = NULL;
		if (!snap) {
			ctl_error("out of memory");
			goto out;
		}
	} else if (cmd->needs == CTL_NEEDS_RUNTIME) {
		/* Exactly what the library prepares; never prunes. */
		snap = rlb_snapshot_new(cfg, local_fqdn, RLB_STATE_COUNT,
					false);
		cfg = NULL;
		if (!snap) {
			ctl_error("out of memory");
			goto out;
		}
	}
	rc = cmd->run(snap ? snap->cfg : cfg, &o);
	/* What a command changed in a memfd outlives it (design.md §12.12). */
	rlb_health_save_changed(snap ? snap->cfg : cfg);
out:
	rlb_snapshot_put(snap);
	rlb_config_free(cfg);
	rlb_ctl_free_members();
	free(o.args);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		ctl_error("write error: %s", strerror(errno));
		rc = 1;
	}
	return rc;
}
