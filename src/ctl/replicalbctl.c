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

#define CTL_NAME "replicalbctl"

/* Command options, each allowed only with the commands that name it. */
#define CTL_OPT_COUNT	 (1u << 0) /* resolve -n */
#define CTL_OPT_PEEK	 (1u << 1) /* resolve --peek */
#define CTL_OPT_VERBOSE	 (1u << 2) /* resolve -v */
#define CTL_OPT_JSON	 (1u << 3) /* status, probe --json */
#define CTL_OPT_INTERVAL (1u << 4) /* probe --interval */
#define CTL_OPT_ALL	 (1u << 5) /* remove-state --all */
#define CTL_OPT_PROM	 (1u << 6) /* status --prometheus */

/* Room for "[host]:port". */
#define CTL_LABEL_MAX (RLB_MAX_HOST + 16)

/* The command line after parsing. */
struct ctl_opts {
	const char *config;   /* -c FILE or NULL */
	const char *app;      /* -a APP or NULL */
	const char *hostname; /* -H NAME or NULL */
	const char *count;    /* -n COUNT as given, or NULL */
	const char *interval; /* --interval S as given, or NULL */
	unsigned given;	      /* CTL_OPT_* seen */
	int nargs;	      /* positional arguments, command first */
	char **args;
};

/* What a command needs before it runs. */
enum ctl_needs {
	CTL_NEEDS_NOTHING, /* no config at all */
	CTL_NEEDS_CONFIG,  /* loaded config, no state files */
	CTL_NEEDS_RUNTIME, /* prepared: host priorities, shared health */
	CTL_NEEDS_LOOK,	   /* prepared, health read-only (§6) */
};

struct ctl_cmd {
	const char *name;
	int min_args; /* arguments after the command name */
	int max_args;
	unsigned opts; /* CTL_OPT_* the command accepts */
	enum ctl_needs needs;
	int (*run)(struct rlb_config *cfg, const struct ctl_opts *o);
};

static const char synopsis[] =
	"usage: " CTL_NAME " [-c FILE] [-a APP] [-H HOSTNAME] COMMAND [ARGS]\n";

static const char usage_text[] =
	"\n"
	"commands:\n"
	"  check                     validate the config, list clusters\n"
	"  resolve [-n COUNT] [--peek] [-v] NAME\n"
	"                            perform selections, print the orders\n"
	"  status [--json | --prometheus] [CLUSTER]\n"
	"                            show error counts, recovery times\n"
	"  record-error CLUSTER HOST[:PORT] [COUNT]\n"
	"                            count errors against a replica\n"
	"  reset [CLUSTER [HOST[:PORT]]]\n"
	"                            zero error counts\n"
	"  policies [NAME]           list the load_balancing policies, or the\n"
	"                            one NAME names or is closest to\n"
	"  env                       list the environment variables read\n"
	"  probe [--interval S] [--json]\n"
	"                            connect to every replica, count failures\n"
	"  remove-state [--all]      remove the state of clusters not in the\n"
	"                            config (of all with --all), and "
	"leftovers\n"
	"  gc                        remove the segments of state "
	"directories\n"
	"                            that are gone\n"
	"\n"
	"options:\n"
	"  -c, --config FILE         config file; default: $REPLICALB_CONFIG,\n"
	"                            else the system file:\n"
	"                            " SYSCONFDIR "/replicalb/replicalb.conf\n"
	"  -a, --app APP             also read apps.d/APP.conf\n"
	"  -H, --hostname NAME       local hostname for hostname policies\n"
	"  -n, --count COUNT         resolve: number of selections\n"
	"      --peek                resolve: change no shared state\n"
	"  -v, --verbose             resolve: show each replica's key\n"
	"      --json                status, probe: print JSON\n"
	"      --prometheus          status: Prometheus's text format\n"
	"      --interval S          probe: again every S seconds, forever\n"
	"      --all                 remove-state: every cluster's state\n"
	"  -h, --help                show this help\n"
	"      --version             show the version\n";

static void ctl_verror(const char *fmt, va_list ap)
{
	fputs(CTL_NAME ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void ctl_error(const char *fmt, ...) RLB_PRINTF(1, 2);

static void ctl_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctl_verror(fmt, ap);
	va_end(ap);
}

/* A usage error: the message, then the synopsis, both on stderr. */
static int ctl_usage_error(const char *fmt, ...) RLB_PRINTF(1, 2);

static int ctl_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctl_verror(fmt, ap);
	va_end(ap);
	fputs(synopsis, stderr);
	fputs("Try '" CTL_NAME " --help' for more.\n", stderr);
	return 1;
}

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

static struct rlb_cluster *find_cluster(const struct rlb_config *cfg,
					const char *name)
{
	struct rlb_cluster *c = rlb_config_find(cfg, name);

	if (!c)
		ctl_error("no cluster named %s", name);
	return c;
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
	}
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
			if (r->outcome == RLB_PROBE_OK)
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

static const struct ctl_cmd commands[] = {
	{"check", 0, 0, 0, CTL_NEEDS_CONFIG, cmd_check},
	{"resolve", 1, 1, CTL_OPT_COUNT | CTL_OPT_PEEK | CTL_OPT_VERBOSE,
	 CTL_NEEDS_RUNTIME, cmd_resolve},
	{"status", 0, 1, CTL_OPT_JSON | CTL_OPT_PROM, CTL_NEEDS_LOOK,
	 cmd_status},
	{"record-error", 2, 3, 0, CTL_NEEDS_RUNTIME, cmd_record_error},
	{"reset", 0, 2, 0, CTL_NEEDS_RUNTIME, cmd_reset},
	{"policies", 0, 1, 0, CTL_NEEDS_NOTHING, cmd_policies},
	{"env", 0, 0, 0, CTL_NEEDS_NOTHING, cmd_env},
	{"probe", 0, 0, CTL_OPT_JSON | CTL_OPT_INTERVAL, CTL_NEEDS_RUNTIME,
	 cmd_probe},
	{"remove-state", 0, 0, CTL_OPT_ALL, CTL_NEEDS_CONFIG, cmd_remove_state},
	{"gc", 0, 0, 0, CTL_NEEDS_NOTHING, cmd_gc},
};

static const char *const opt_names[] = {
	"-n", "--peek", "-v", "--json", "--interval", "--all", "--prometheus"};

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

/*
 * Options may come before or after the command. Returns -1 to go on,
 * else the exit status.
 */
static int parse_args(int argc, char **argv, struct ctl_opts *o)
{
	enum {
		OPT_PEEK = 256,
		OPT_JSON,
		OPT_VERSION,
		OPT_INTERVAL,
		OPT_ALL,
		OPT_PROM
	};
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"app", required_argument, NULL, 'a'},
		{"hostname", required_argument, NULL, 'H'},
		{"count", required_argument, NULL, 'n'},
		{"peek", no_argument, NULL, OPT_PEEK},
		{"verbose", no_argument, NULL, 'v'},
		{"json", no_argument, NULL, OPT_JSON},
		{"interval", required_argument, NULL, OPT_INTERVAL},
		{"all", no_argument, NULL, OPT_ALL},
		{"prometheus", no_argument, NULL, OPT_PROM},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	int ch;

	o->args = calloc((size_t)argc + 1, sizeof(*o->args));
	if (!o->args) {
		ctl_error("out of memory");
		return 1;
	}
	/* Leading '-': positionals come back in order as option 1. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "-:c:a:H:n:vh", longopts, NULL)) !=
	       -1) {
		switch (ch) {
		case 1:
			o->args[o->nargs++] = optarg;
			break;
		case 'c':
			o->config = optarg;
			break;
		case 'a':
			if (!*optarg || strchr(optarg, '/') ||
			    strcmp(optarg, ".") == 0 ||
			    strcmp(optarg, "..") == 0)
				return ctl_usage_error("invalid app name: %s",
						       optarg);
			o->app = optarg;
			break;
		case 'H':
			o->hostname = optarg;
			break;
		case 'n':
			o->count = optarg;
			o->given |= CTL_OPT_COUNT;
			break;
		case OPT_PEEK:
			o->given |= CTL_OPT_PEEK;
			break;
		case 'v':
			o->given |= CTL_OPT_VERBOSE;
			break;
		case OPT_JSON:
			o->given |= CTL_OPT_JSON;
			break;
		case OPT_INTERVAL:
			o->interval = optarg;
			o->given |= CTL_OPT_INTERVAL;
			break;
		case OPT_ALL:
			o->given |= CTL_OPT_ALL;
			break;
		case OPT_PROM:
			o->given |= CTL_OPT_PROM;
			break;
		case 'h':
			fputs(synopsis, stdout);
			fputs(usage_text, stdout);
			return 0;
		case OPT_VERSION:
			puts(CTL_NAME " " PACKAGE_VERSION);
			return 0;
		case ':':
			return ctl_usage_error("option %s needs an argument",
					       argv[optind - 1]);
		default:
			/* A long option: unknown, or given an argument. */
			if (optopt <= 0 || optopt >= 256 ||
			    strncmp(argv[optind - 1], "--", 2) == 0)
				return ctl_usage_error("invalid option %s",
						       argv[optind - 1]);
			return ctl_usage_error("unknown option -%c", optopt);
		}
	}
	while (optind < argc)
		o->args[o->nargs++] = argv[optind++];
	return -1;
}

int main(int argc, char **argv)
{
	const struct ctl_cmd *cmd = NULL;
	struct rlb_config *cfg = NULL;
	struct rlb_snapshot *snap = NULL;
	struct ctl_opts o = {0};
	int rc;

	rc = parse_args(argc, argv, &o);
	if (rc >= 0)
		goto out;
	rc = 1;
	if (o.nargs == 0) {
		ctl_usage_error("no command given");
		goto out;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (strcmp(o.args[0], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd) {
		ctl_usage_error("unknown command \"%s\"", o.args[0]);
		goto out;
	}
	if (o.nargs - 1 < cmd->min_args || o.nargs - 1 > cmd->max_args) {
		ctl_usage_error("wrong number of arguments for %s", cmd->name);
		goto out;
	}
	for (size_t k = 0; k < sizeof(opt_names) / sizeof(*opt_names); k++) {
		if ((o.given & ~cmd->opts) & (1u << k)) {
			ctl_usage_error("%s does not take %s", cmd->name,
					opt_names[k]);
			goto out;
		}
	}
	if (cmd->needs != CTL_NEEDS_NOTHING) {
		cfg = load_config(&o);
		if (!cfg)
			goto out;
		/* Our own messages go to the terminal, whatever log_target. */
		rlb_log_configure(cfg->log_level, RLB_LOG_STDERR);
		if (!rlb_ctl_ask_members(cfg)) {
			ctl_error("out of memory");
			goto out;
		}
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
