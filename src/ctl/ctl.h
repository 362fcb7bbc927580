/* ctl/ctl.h - replicalbctl: probing replicas (probe.c), showing clusters and
 * their DNS members (show.c). */
#ifndef RLB_CTL_H
#define RLB_CTL_H

#include "session/session.h"

#include <stdio.h>

/* ------------------------------------------------------------------ */
/* cli.c: the command line */

#define CTL_NAME "replicalbctl"
#define CTL_SYNOPSIS                                                           \
	"usage: " CTL_NAME " [-c FILE] [-a APP] [-H HOSTNAME] COMMAND "        \
	"[ARGS]\n"

/* Command options, each allowed only with the commands that name it. */
#define CTL_OPT_COUNT	 (1u << 0) /* resolve -n */
#define CTL_OPT_PEEK	 (1u << 1) /* resolve --peek */
#define CTL_OPT_VERBOSE	 (1u << 2) /* resolve -v */
#define CTL_OPT_JSON	 (1u << 3) /* status, probe --json */
#define CTL_OPT_INTERVAL (1u << 4) /* probe --interval */
#define CTL_OPT_ALL	 (1u << 5) /* remove-state --all */
#define CTL_OPT_PROM	 (1u << 6) /* status --prometheus */

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

/* What a command's positional arguments are, for completion. */
enum ctl_arg_kind {
	CTL_ARG_NONE,
	CTL_ARG_CLUSTER,
	CTL_ARG_REPLICA, /* of the cluster of the argument before */
	CTL_ARG_POLICY,
};

/* One command of the caller's table (replicalbctl.c's). */
struct ctl_cmd {
	const char *name;
	int min_args; /* arguments after the command name */
	int max_args;
	unsigned opts; /* CTL_OPT_* the command accepts */
	enum ctl_needs needs;
	int (*run)(struct rlb_config *cfg, const struct ctl_opts *o);
	const char *args; /* its arguments in the usage, or NULL */
	const char *help; /* its usage text; NULL: hidden */
	enum ctl_arg_kind arg_kinds[2];
};

/* "replicalbctl: MESSAGE" on stderr. */
void rlb_ctl_error(const char *fmt, ...) RLB_PRINTF(1, 2);
/* A usage error: the message, then the synopsis, on stderr. Returns 1. */
int rlb_ctl_usage_error(const char *fmt, ...) RLB_PRINTF(1, 2);
/* The usage text of cmds and the options, generated from the tables. */
void rlb_ctl_usage(FILE *f, const struct ctl_cmd *cmds, size_t ncmds);
/*
 * Parse argv into *o (options before or after the command; o->args
 * malloc'd). Returns -1 to go on, else the exit status (--help,
 * --version, a usage error).
 */
int rlb_ctl_parse(int argc, char **argv, const struct ctl_cmd *cmds,
		  size_t ncmds, struct ctl_opts *o);
/* The command called name; NULL (with "did you mean", when report). */
const struct ctl_cmd *rlb_ctl_find_command(const struct ctl_cmd *cmds,
					   size_t ncmds, const char *name,
					   bool report);
/* 0, or 1 after a usage error: an option cmd does not take. */
int rlb_ctl_check_options(const struct ctl_cmd *cmd, const struct ctl_opts *o);
/* Whether word is an option that takes an argument (-c, --interval). */
bool rlb_ctl_option_takes_arg(const char *word);
/* The long options completion offers: the global ones and cmd's. */
void rlb_ctl_print_options(const struct ctl_cmd *cmd);

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
	/* The cluster's HTTP check: made (http), and the status of the
	 * last answer (0: none within http_timeout_ms; -1: no HTTP). */
	bool http;
	int http_status;
	int64_t http_timeout_ms;
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
