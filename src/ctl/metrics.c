/* metrics.c - `replicalbctl status --prometheus`: the status as
 * Prometheus's text exposition format (version 0.0.4), the file
 * node_exporter's textfile collector reads (design.md §17). Every family
 * is written once, with its HELP and TYPE, its samples for every cluster
 * shown; labels are escaped as the format says. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "ctl/ctl.h"

/* v as a label value: backslash, double quote and newline escaped. */
static void label_value(const char *v)
{
	putchar('"');
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", stdout);
		else
			putchar(*v);
	}
	putchar('"');
}

/* What a replica family reads of replica i of c. */
typedef double (*replica_value)(const struct rlb_cluster *c, size_t i,
				int64_t now);

static double v_errors(const struct rlb_cluster *c, size_t i, int64_t now)
{
	return (double)rlb_health_errors(c, i, now, true);
}

static double v_slowdowns(const struct rlb_cluster *c, size_t i, int64_t now)
{
	return (double)rlb_health_slowdowns(c, i, now, true);
}

static double v_recovery(const struct rlb_cluster *c, size_t i, int64_t now)
{
	return (double)rlb_health_recovery_seconds(c, i, now);
}

static double v_connects(const struct rlb_cluster *c, size_t i, int64_t now)
{
	struct rlb_traffic t;

	(void)now;
	rlb_health_traffic(c, i, &t);
	return (double)t.connects;
}

static double v_failures(const struct rlb_cluster *c, size_t i, int64_t now)
{
	struct rlb_traffic t;

	(void)now;
	rlb_health_traffic(c, i, &t);
	return (double)t.failures;
}

static double v_in_flight(const struct rlb_cluster *c, size_t i, int64_t now)
{
	struct rlb_traffic t;

	(void)now;
	rlb_health_traffic(c, i, &t);
	return (double)t.in_flight;
}

static const struct {
	const char *name, *type, *help;
	replica_value value;
} replica_families[] = {
	{"replicalb_replica_errors", "gauge",
	 "Errors counted against the replica, decayed to now (ClickHouse's "
	 "error model, capped).",
	 v_errors},
	{"replicalb_replica_slowdowns", "gauge",
	 "Slow connects counted against the replica, decayed to now.",
	 v_slowdowns},
	{"replicalb_replica_recovery_seconds", "gauge",
	 "Seconds until the replica's errors and slowdowns decay to zero.",
	 v_recovery},
	{"replicalb_replica_connects_total", "counter",
	 "Connects to the replica established, by every process of the state.",
	 v_connects},
	{"replicalb_replica_failures_total", "counter",
	 "Connects to the replica that failed, by every process of the state.",
	 v_failures},
	{"replicalb_replica_in_flight", "gauge",
	 "Connections to the replica open now, in every process of the state.",
	 v_in_flight},
};

/* What a cluster family reads of cluster c: false when c has none. */
typedef bool (*cluster_value)(const struct rlb_cluster *c, double *v);

static bool c_replicas(const struct rlb_cluster *c, double *v)
{
	*v = (double)c->nreplicas;
	return true;
}

static bool c_dns_members(const struct rlb_cluster *c, double *v)
{
	const struct rlb_first_members *m = rlb_ctl_members_of(c);

	if (!m)
		return false;
	*v = (double)m->ms.now.n;
	return true;
}

static bool c_dns_answer_age(const struct rlb_cluster *c, double *v)
{
	const struct rlb_first_members *m = rlb_ctl_members_of(c);

	if (!m || !m->ms.answered)
		return false;
	*v = (double)(rlb_monotonic_ms() - m->ms.answered_ms) / 1000.0;
	return true;
}

/* The cluster families; dns: only when a DNS cluster is shown. */
static const struct {
	const char *name, *help;
	bool dns;
	cluster_value value;
} cluster_families[] = {
	{"replicalb_cluster_replicas",
	 "Replicas of the cluster now: the config's and DNS's.", false,
	 c_replicas},
	{"replicalb_cluster_dns_members",
	 "Members the cluster's DNS sources gave, as a new process starts "
	 "with them.",
	 true, c_dns_members},
	{"replicalb_cluster_dns_answer_age_seconds",
	 "Age of the members' last good DNS answer (absent: none yet).", true,
	 c_dns_answer_age},
};

static bool shown(const struct rlb_cluster *c, const struct rlb_cluster *one)
{
	return !one || c == one;
}

static void family_head(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void replica_labels(const struct rlb_cluster *c, size_t i)
{
	const struct rlb_replica *r = &c->replicas[i];
	char port[8] = "";
	int p = r->port ? r->port : c->port;

	if (p)
		snprintf(port, sizeof(port), "%d", p);
	fputs("{cluster=", stdout);
	label_value(c->name);
	fputs(",host=", stdout);
	label_value(r->host);
	fputs(",port=", stdout);
	label_value(port);
	fputs(",source=", stdout);
	label_value(rlb_replica_source_name(r->source));
	putchar('}');
}

/* Cluster family f of the clusters shown. */
static void cluster_family(size_t f, const struct rlb_config *cfg,
			   const struct rlb_cluster *one)
{
	double v;

	family_head(cluster_families[f].name, "gauge",
		    cluster_families[f].help);
	for (size_t k = 0; k < cfg->nclusters; k++) {
		const struct rlb_cluster *c = &cfg->clusters[k];

		if (!shown(c, one) || !cluster_families[f].value(c, &v))
			continue;
		printf("%s{cluster=", cluster_families[f].name);
		label_value(c->name);
		printf("} %.17g\n", v);
	}
}

void rlb_ctl_prometheus(const struct rlb_config *cfg,
			const struct rlb_cluster *one, int64_t now)
{
	const size_t nfam =
		sizeof(replica_families) / sizeof(*replica_families);
	const size_t ncfam =
		sizeof(cluster_families) / sizeof(*cluster_families);
	bool any_dns = false;

	for (size_t k = 0; k < cfg->nclusters; k++)
		any_dns |= shown(&cfg->clusters[k], one) &&
			   (cfg->clusters[k].srv || cfg->clusters[k].dns);
	for (size_t f = 0; f < ncfam; f++)
		if (!cluster_families[f].dns)
			cluster_family(f, cfg, one);
	for (size_t f = 0; f < nfam; f++) {
		family_head(replica_families[f].name, replica_families[f].type,
			    replica_families[f].help);
		for (size_t k = 0; k < cfg->nclusters; k++) {
			const struct rlb_cluster *c = &cfg->clusters[k];

			if (!shown(c, one))
				continue;
			for (size_t i = 0; i < c->nreplicas; i++) {
				fputs(replica_families[f].name, stdout);
				replica_labels(c, i);
				printf(" %.17g\n",
				       replica_families[f].value(c, i, now));
			}
		}
	}
	/* DNS clusters: their members, and how old the answer is. */
	for (size_t f = 0; f < ncfam; f++)
		if (cluster_families[f].dns && any_dns)
			cluster_family(f, cfg, one);
}
