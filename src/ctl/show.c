/* show.c - how replicalbctl shows clusters: the status table and its JSON,
 * and what DNS answered for each DNS cluster (design.md §15), asked once
 * per run as the library would. */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

/* Width of the host column of the status table, at least. */
#define CTL_HOST_COLUMN 25

/*
 * DNS membership as this tool sees it (design.md §15): each DNS cluster's
 * members as a new process of the host starts with them, by the
 * session's rule (rlb_session_first_members()).
 */
static struct rlb_first_members *ctl_members;
static size_t nctl_members;

const struct rlb_first_members *rlb_ctl_members_of(const struct rlb_cluster *c)
{
	for (size_t i = 0; i < nctl_members; i++)
		if (ctl_members[i].ms.cluster == c->name_hash)
			return &ctl_members[i];
	return NULL;
}

static const char *dns_type_name(uint16_t type)
{
	return type == RLB_DNS_T_SRV	? "SRV"
	       : type == RLB_DNS_T_AAAA ? "AAAA"
					: "A";
}

bool rlb_ctl_ask_members(struct rlb_config *cfg)
{
	ctl_members = rlb_session_first_members(cfg, NULL, &nctl_members);
	return ctl_members != NULL;
}

void rlb_ctl_free_members(void)
{
	rlb_session_first_members_free(ctl_members, nctl_members);
	ctl_members = NULL;
	nctl_members = 0;
}

/* The -v (and check) lines of c's DNS questions: what each answered. */
void rlb_ctl_print_dns(const struct rlb_cluster *c, const char *indent,
		       bool with_age)
{
	const struct rlb_first_members *f = rlb_ctl_members_of(c);
	const struct rlb_membership *ms = f ? &f->ms : NULL;

	for (size_t v = 0; ms && v < ms->nviews; v++) {
		const struct rlb_dns_source_view *w = &ms->views[v];

		printf("%s%s %s %s: ", indent,
		       w->type == RLB_DNS_T_SRV ? "srv" : "dns", w->name,
		       dns_type_name(w->type));
		if (w->outcome == RLB_DNS_OK)
			printf("%s, ttl %" PRIu32 " s", w->why, w->ttl);
		else if (w->outcome == RLB_DNS_FAILED ||
			 w->outcome == RLB_DNS_MALFORMED)
			printf("returns nothing: %s", w->why);
		else
			printf("returns nothing (%s)", w->why);
		if (with_age)
			printf(", asked %" PRId64 " ms ago",
			       rlb_monotonic_ms() - ms->asked_ms);
		putchar('\n');
	}
	if (!with_age || !f)
		return;
	/* Where the members came from (design.md §15.6). */
	if (f->dns_failed)
		printf("%sanswer: the host's shared answer, %" PRId64
		       " ms old (stale: DNS did not answer)\n",
		       indent, f->shared_age_ms);
	else if (f->shared_age_ms >= 0)
		printf("%sanswer: the host's shared answer, %" PRId64
		       " ms old (no DNS asked)\n",
		       indent, f->shared_age_ms);
	else if (f->skipped_age_ms >= 0)
		printf("%sanswer: asked DNS (the host's shared answer is "
		       "stale, %" PRId64 " ms old)\n",
		       indent, f->skipped_age_ms);
	else
		printf("%sanswer: asked DNS (no shared answer on this host)\n",
		       indent);
}

/* s as a JSON string, quotes included; bytes >= 0x80 pass as UTF-8. */
void rlb_ctl_json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\r':
			fputs("\\r", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				printf("\\u%04x", *p);
			else
				putchar(*p);
		}
	}
	putchar('"');
}

/*
 * "state_file" as the path alone, and "state_file_use" saying how it is
 * used: "shared", "absent" (no file yet: reads as zeros) or "private".
 */
static void status_json_state_file(const char *path)
{
	static const char *const tags[] = {" (absent)", " (private)"};
	size_t len = strlen(path);
	const char *use = "shared";
	char *bare;

	if (strcmp(path, "(private)") == 0) {
		use = "private";
	} else {
		for (size_t k = 0; k < 2; k++) {
			size_t t = strlen(tags[k]);

			if (len > t && strcmp(path + len - t, tags[k]) == 0) {
				len -= t;
				use = k ? "private" : "absent";
			}
		}
	}
	fputs(", \"state_file\": ", stdout);
	bare = strndup(path, len);
	rlb_ctl_json_string(bare ? bare : path);
	free(bare);
	printf(", \"state_file_use\": \"%s\"", use);
}

/* "dns": what each DNS question of c answered (design.md §15). */
static void status_json_dns(const struct rlb_cluster *c)
{
	const struct rlb_first_members *f = rlb_ctl_members_of(c);
	const struct rlb_membership *ms = f ? &f->ms : NULL;

	if (!ms)
		return;
	fputs(", \"dns\": [", stdout);
	for (size_t v = 0; v < ms->nviews; v++) {
		const struct rlb_dns_source_view *w = &ms->views[v];

		fputs(v ? ", {\"name\": " : "{\"name\": ", stdout);
		rlb_ctl_json_string(w->name);
		printf(", \"type\": \"%s\", \"outcome\": ",
		       dns_type_name(w->type));
		rlb_ctl_json_string(rlb_dns_outcome_name(w->outcome));
		printf(", \"records\": %zu, \"ttl\": %" PRIu32 "}", w->nrecords,
		       w->ttl);
	}
	putchar(']');
}

void rlb_ctl_json_cluster(const struct rlb_cluster *c, int64_t now)
{
	fputs("{\"name\": ", stdout);
	rlb_ctl_json_string(c->name);
	fputs(", \"load_balancing\": ", stdout);
	rlb_ctl_json_string(rlb_policy_name(c->s.load_balancing));
	status_json_state_file(rlb_health_path(c->health));
	printf(", \"half_life\": %" PRId64 ", \"error_cap\": %" PRId64
	       ", \"max_ignored_errors\": %" PRId64
	       ", \"decay_time\": %" PRId64,
	       c->s.half_life, c->s.error_cap, c->s.max_ignored_errors,
	       rlb_health_decay_time(c));
	status_json_dns(c);
	fputs(", \"replicas\": [", stdout);
	for (size_t i = 0; i < c->nreplicas; i++) {
		const struct rlb_replica *r = &c->replicas[i];
		struct rlb_traffic t;

		rlb_health_traffic(c, i, &t);
		fputs(i ? ", {\"host\": " : "{\"host\": ", stdout);
		rlb_ctl_json_string(r->host);
		if (r->port)
			printf(", \"port\": %d", r->port);
		else
			fputs(", \"port\": null", stdout);
		fputs(", \"source\": ", stdout);
		rlb_ctl_json_string(rlb_replica_source_name(r->source));
		printf(", \"priority\": %" PRId64 ", \"errors\": %" PRIu64
		       ", \"slowdowns\": %" PRIu64
		       ", \"recovery_seconds\": %" PRId64
		       ", \"connects\": %" PRIu64 ", \"failures\": %" PRIu64
		       ", \"in_flight\": %" PRIu64 "}",
		       r->priority, rlb_health_errors(c, i, now, true),
		       rlb_health_slowdowns(c, i, now, true),
		       rlb_health_recovery_seconds(c, i, now), t.connects,
		       t.failures, t.in_flight);
	}
	fputs("]}", stdout);
}

void rlb_ctl_table_cluster(const struct rlb_cluster *c, int64_t now)
{
	int hostw = CTL_HOST_COLUMN;
	bool dns = c->srv || c->dns;

	for (size_t i = 0; i < c->nreplicas; i++) {
		int len = (int)strlen(c->replicas[i].host);

		if (len > hostw)
			hostw = len;
	}
	printf("CLUSTER %s  policy %s  state %s\n", c->name,
	       rlb_policy_name(c->s.load_balancing),
	       rlb_health_path(c->health));
	rlb_ctl_print_dns(c, "  ", false);
	printf("  %-*s %5s %5s %7s %9s %11s %9s %9s %9s%s\n", hostw, "HOST",
	       "PORT", "PRIO", "ERRORS", "SLOWDOWNS", "RECOVERY_S", "CONNECTS",
	       "FAILURES", "IN_FLIGHT", dns ? " SOURCE" : "");
	for (size_t i = 0; i < c->nreplicas; i++) {
		const struct rlb_replica *r = &c->replicas[i];
		char port[8] = "-";
		struct rlb_traffic t;

		if (r->port)
			snprintf(port, sizeof(port), "%d", r->port);
		rlb_health_traffic(c, i, &t);
		printf("  %-*s %5s %5" PRId64 " %7" PRIu64 " %9" PRIu64
		       " %11" PRId64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64
		       "%s%s\n",
		       hostw, r->host, port, r->priority,
		       rlb_health_errors(c, i, now, true),
		       rlb_health_slowdowns(c, i, now, true),
		       rlb_health_recovery_seconds(c, i, now), t.connects,
		       t.failures, t.in_flight, dns ? " " : "",
		       dns ? rlb_replica_source_name(r->source) : "");
	}
}
