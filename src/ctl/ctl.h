/* ctl/ctl.h - replicalbctl: probing replicas (probe.c), showing clusters and
 * their DNS members (show.c). */
#ifndef RLB_CTL_H
#define RLB_CTL_H

#include "session/session.h"

/* ------------------------------------------------------------------ */
/* probe.c */

/* What came of probing one replica. */
enum rlb_probe_outcome {
	RLB_PROBE_OK,	   /* connected on some address */
	RLB_PROBE_FAILED,  /* the replica's failure: counts one error */
	RLB_PROBE_LOCAL,   /* not probed: a failure of ours, counts nothing */
	RLB_PROBE_NO_PORT, /* not probed: it takes the program's port */
};

/* What probing one replica found. */
struct rlb_probe_result {
	size_t cluster; /* index in cfg->clusters */
	size_t replica; /* index in its cluster */
	int port;	/* probed port; 0: none known (the program's) */
	enum rlb_probe_outcome outcome;
	bool counted;  /* FAILED, and its one error is in the shared
			* state file; FAILED and false: not stored */
	int err;       /* FAILED: errno of the last failed connect;
			* LOCAL: errno of EAI_SYSTEM; else 0 */
	int local_err; /* errno of our last local failure (EMFILE,
			* ENOBUFS, ...) on some address, else 0 */
	int gai;       /* EAI_* when the lookup failed, else 0 */
	int64_t ms;    /* time to connect, when OK */
	char address[INET6_ADDRSTRLEN]; /* the address that answered or
					 * failed last; "" if none */
};

/*
 * Probe every replica of cfg (a snapshot's, health attached), design.md
 * §6.1: first every lookup (literals, else the real resolver, never
 * cached), then TCP connects to each address on the replica's port, as
 * many at once as the descriptor limit allows, each given up after its
 * cluster's connect_timeout_ms from its own start (0: when the kernel
 * gives up). A replica that connects on none, or whose name does not
 * resolve, is FAILED and counts one error, as a program's failed
 * connect would; counted tells whether the count is in the shared
 * state. A failure of ours on any address (a failed socket(), EMFILE,
 * ENOBUFS, EADDRNOTAVAIL, a resolver's EAI_SYSTEM) makes it LOCAL and
 * counts nothing. Returns *nresults results in config order (free()),
 * or NULL when out of memory.
 */
struct rlb_probe_result *rlb_probe(struct rlb_config *cfg, size_t *nresults);

/* ------------------------------------------------------------------ */
/* metrics.c */

/*
 * `status --prometheus`: cfg's clusters (one: only it) in Prometheus's
 * text exposition format, at wall time now: per replica its errors,
 * slowdowns, recovery seconds and traffic counts (labels cluster, host,
 * port, source), per cluster its replicas, and for DNS clusters the
 * members and the age of their answer (rlb_ctl_ask_members() first).
 */
void rlb_ctl_prometheus(const struct rlb_config *cfg,
			const struct rlb_cluster *one, int64_t now);

/* ------------------------------------------------------------------ */
/* show.c */

/*
 * Ask the sources of every DNS cluster of cfg (a loaded config, not yet
 * a snapshot's) once, and add their members to it, as the library would
 * (design.md §15). Kept for the lines below until
 * rlb_ctl_free_members(). False when out of memory.
 */
bool rlb_ctl_ask_members(struct rlb_config *cfg);
void rlb_ctl_free_members(void);
/* What rlb_ctl_ask_members() found for DNS cluster c (NULL: none). */
const struct rlb_first_members *rlb_ctl_members_of(const struct rlb_cluster *c);
/* One line per DNS question of c: what it answered (with_age: when). */
void rlb_ctl_print_dns(const struct rlb_cluster *c, const char *indent,
		       bool with_age);
/* s as a JSON string, quotes included; bytes >= 0x80 pass as UTF-8. */
void rlb_ctl_json_string(const char *s);
/* `status --json`'s object of c, and its table, at wall time now. */
void rlb_ctl_json_cluster(const struct rlb_cluster *c, int64_t now);
void rlb_ctl_table_cluster(const struct rlb_cluster *c, int64_t now);

#endif /* RLB_CTL_H */
