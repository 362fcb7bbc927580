/* rlb.h - internal interfaces of replicalb: one section per source file. */
#ifndef RLB_H
#define RLB_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define RLB_PRINTF(f, a) __attribute__((format(printf, f, a)))
/*
 * Thread-local variables in static TLS: the library is preloaded, so the
 * loader reserves it at start-up, and access costs no __tls_get_addr().
 */
#define RLB_TLS __thread __attribute__((tls_model("initial-exec")))

/* Limits that keep every structure bounded. */
#define RLB_MAX_REPLICAS 4096 /* per cluster */
#define RLB_MAX_PINNED	 16   /* pinned addresses per replica */
#define RLB_MAX_HOST	 255  /* bytes of a host string */

/* ------------------------------------------------------------------ */
/* util.c */

/*
 * Environment variable as the library must read it: NULL in
 * secure-execution mode (AT_SECURE), otherwise getenv(). Empty values
 * count as unset.
 */
const char *rlb_env(const char *name);
bool rlb_secure_mode(void);

/* 64-bit FNV-1a over bytes; never returns 0 or 1 (reserved by health.c). */
uint64_t rlb_hash64(const void *data, size_t len, uint64_t seed);

/*
 * Per-thread xorshift random numbers, seeded from getrandom(), pid,
 * thread and time; reseeded automatically in a forked child (see
 * rlb_util_after_fork_child()).
 */
uint32_t rlb_random_u32(void);
void rlb_util_after_fork_child(void);

/*
 * Test seam: from now on rlb_random_u32() in the calling thread returns
 * fn(arg) instead, so that a test can script the draws of a selection.
 * fn NULL restores the generator. Other threads keep theirs; a child
 * forked by this thread inherits the source.
 */
void rlb_random_set_source(uint32_t (*fn)(void *arg), void *arg);

/* Wall clock in whole seconds (time(NULL)); monotonic milliseconds. */
int64_t rlb_now(void);
int64_t rlb_monotonic_ms(void);

/* ASCII-only lowercase copy into dst (size dstlen, NUL-terminated). */
void rlb_ascii_lower(char *dst, const char *src, size_t dstlen);

/*
 * This host's FQDN (design.md §3.2): the canonical name of gethostname()
 * from the real getaddrinfo with AI_CANONNAME, else gethostname(), else
 * "". Written into buf (NUL-terminated); asks the resolver every call.
 * Keeps errno.
 */
void rlb_local_fqdn(char *buf, size_t len);

/*
 * Dynamic list of diagnostics ("file:line: message") filled by the config
 * loader. rlb_diag_add() formats one message; rlb_diag_free() frees all.
 */
struct rlb_diag {
	char **msgs; /* n messages, each malloc'd */
	size_t n;
};
void rlb_diag_add(struct rlb_diag *d, const char *fmt, ...) RLB_PRINTF(2, 3);
void rlb_diag_free(struct rlb_diag *d);

/* ------------------------------------------------------------------ */
/* log.c */

enum rlb_log_level {
	RLB_LOG_NONE,
	RLB_LOG_ERROR,
	RLB_LOG_WARNING,
	RLB_LOG_INFO,
	RLB_LOG_DEBUG,
};

enum rlb_log_target {
	RLB_LOG_STDERR,
	RLB_LOG_SYSLOG,
};

/* Parse "none"... "debug"; returns 0 or -1 when unknown. */
int rlb_log_level_parse(const char *s, enum rlb_log_level *out);
const char *rlb_log_level_name(enum rlb_log_level level);
void rlb_log_configure(enum rlb_log_level level, enum rlb_log_target target);
bool rlb_log_enabled(enum rlb_log_level level);
/*
 * One message, prefixed "replicalb[PID]: ", one write(2) per message so
 * lines of several threads never interleave. Keeps errno.
 */
void rlb_log(enum rlb_log_level level, const char *fmt, ...) RLB_PRINTF(2, 3);

/* ------------------------------------------------------------------ */
/* policy.c */

/* Same order as ClickHouse's LoadBalancing enum. */
enum rlb_policy {
	RLB_POLICY_RANDOM,
	RLB_POLICY_NEAREST_HOSTNAME,
	RLB_POLICY_LEVENSHTEIN,
	RLB_POLICY_LCP,
	RLB_POLICY_LCS,
	RLB_POLICY_IN_ORDER,
	RLB_POLICY_FIRST_OR_RANDOM,
	RLB_POLICY_ROUND_ROBIN,
	RLB_POLICY_COUNT,
};

/* ClickHouse name of a policy ("random", "nearest_hostname", ...). */
const char *rlb_policy_name(enum rlb_policy p);
/* Exact, case-sensitive name to policy: 0, or -1 when unknown. */
int rlb_policy_parse(const char *name, enum rlb_policy *out);
/* Closest valid policy name to a wrong one, or NULL if none is close. */
const char *rlb_policy_suggest(const char *name);
/*
 * What a policy needs, so that callers never test for policies by name:
 * host names compared (it needs the local hostname and precomputed
 * priorities), and the cluster's shared counter (each selection takes a
 * turn of it). A ninth policy is a change in this file alone.
 */
bool rlb_policy_uses_hostname(enum rlb_policy p);
bool rlb_policy_uses_counter(enum rlb_policy p);

/* The four hostname functions of clickhouse.md §10. */
size_t rlb_prefix_distance(const char *a, const char *b);
size_t rlb_levenshtein(const char *a, const char *b); /* ASCII case-folded */
size_t rlb_common_prefix(const char *a, const char *b);
size_t rlb_common_suffix(const char *a, const char *b);

struct rlb_cluster;
/*
 * Fill c->host_prio (malloc'd, nreplicas entries) with the policy priority
 * of every replica for a hostname policy, against local hostname `local`
 * (never NULL; may be ""). For other policies sets c->host_prio = NULL.
 * Returns 0 or -ENOMEM.
 */
int rlb_policy_precompute(struct rlb_cluster *c, const char *local);
/*
 * policy_priority(policy, i) of design.md §3.1 for replica i of c; rr_last is
 * L = counter mod N for round_robin (ignored otherwise).
 */
int64_t rlb_policy_priority(const struct rlb_cluster *c, size_t i,
			    uint64_t rr_last);

/* ------------------------------------------------------------------ */
/* config.c */

/* Settings that a cluster may override; the top level gives defaults. */
struct rlb_settings {
	enum rlb_policy load_balancing;
	int64_t first_offset;	    /* load_balancing_first_offset */
	int64_t half_life;	    /* distributed_replica_error_half_life, s */
	int64_t error_cap;	    /* distributed_replica_error_cap */
	int64_t max_ignored_errors; /* distributed_replica_max_ignored_errors */
	int64_t dns_cache_ttl;	    /* seconds */
	int64_t connect_timeout_ms;
	bool connect_failover; /* move a failed connect on; unused yet */
};

/* An IP address literal, parsed once at config load. */
struct rlb_addr {
	int family;	   /* AF_INET or AF_INET6 */
	uint8_t bytes[16]; /* 4 or 16 bytes, network order */
};

struct rlb_replica {
	char *host;	  /* host string as written, no port/brackets */
	int port;	  /* replica's, else cluster's port; 0: caller's */
	int64_t priority; /* config priority, default 1, lower preferred */
	char **pinned;	  /* npinned address literals; skip DNS if any */
	size_t npinned;
	struct rlb_addr *literal; /* nliteral addresses known without DNS:
				   * the pinned ones, or the host itself
				   * when it is an IP literal */
	size_t nliteral;
	uint64_t identity; /* rlb_hash64 of lowercase host + port: the
			    * key of its health state across reloads */
	int line;	   /* config line, for messages */
};

struct rlb_health;

struct rlb_cluster {
	char *name;	       /* virtual name: lowercase, no trailing dot */
	uint64_t name_hash;    /* rlb_hash64 of name */
	struct rlb_settings s; /* effective settings */
	char *local_hostname;  /* cluster override or NULL */
	int port;	       /* cluster port or 0 */
	size_t nreplicas;      /* 1 .. RLB_MAX_REPLICAS */
	struct rlb_replica *replicas;
	/* Filled and freed by snapshot.c only; NULL in a parsed config. */
	int64_t *host_prio;	   /* precomputed hostname priorities or NULL */
	struct rlb_health *health; /* shared state, once attached */
	char *file;		   /* file and line that defined the cluster */
	int line;
};

/* What identifies a config file's version, for hot reload. */
struct rlb_file_stamp {
	char *path;
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime; /* also a chmod or chown: trust may change */
};

/* The files a load read (main, app), to tell when one is edited. */
struct rlb_config_files {
	size_t n; /* 0 for a parsed string */
	struct rlb_file_stamp stamps[2];
};

struct rlb_config {
	struct rlb_settings defaults; /* top-level settings */
	char *local_hostname; /* NULL: this host's FQDN (design.md §3.2) */
	char *state_dir;      /* effective state_dir setting, or NULL */
	enum rlb_log_level log_level;
	enum rlb_log_target log_target;
	size_t nclusters;
	struct rlb_cluster *clusters;
	struct rlb_config_files files; /* for reload */
};

/* Where to look for config and how to override it (already filtered
 * for secure mode by the caller; NULL means not given). */
struct rlb_config_source {
	const char *path;	   /* main file; NULL: rlb_config_path() */
	const char *app;	   /* per-app name; NULL: no app file */
	const char *env_policy;	   /* REPLICALB_LOAD_BALANCING */
	const char *env_hostname;  /* REPLICALB_HOSTNAME */
	const char *env_failover;  /* REPLICALB_CONNECT_FAILOVER */
	const char *env_state_dir; /* REPLICALB_STATE_DIR */
	const char *env_log_level; /* REPLICALB_LOG_LEVEL */
};

/* Fill src from the environment (rlb_env) with lookup of design.md §2. */
void rlb_config_source_from_env(struct rlb_config_source *src);
/*
 * $REPLICALB_CONFIG, else SYSCONFDIR/replicalb/replicalb.conf: the first
 * that exists (design.md §2), else $REPLICALB_CONFIG if set.
 */
const char *rlb_config_path(void);
/* $REPLICALB_APP, else program_invocation_short_name. */
const char *rlb_config_app_name(void);

/*
 * Load the main file, then apps.d/APP.conf beside it, then apply the
 * environment overrides. Returns 0 and *out (free with
 * rlb_config_free(), or hand to rlb_snapshot_new()), -ENOENT when the
 * main file does not exist (nothing in diag), -EINVAL with every error
 * in diag as "file:line: message", or -ENOMEM. *out is set only on
 * success; diag may be NULL. Keeps errno. Does not resolve names, touch
 * the network or attach health state.
 */
int rlb_config_load(const struct rlb_config_source *src,
		    struct rlb_config **out, struct rlb_diag *diag);
/*
 * As rlb_config_load(). broken, if not NULL, must be empty (zeroed, or
 * after rlb_config_files_free()): when the config is broken (-EINVAL) it
 * receives the stamps of the files read, so that
 * rlb_config_files_changed() tells when one of them is edited again;
 * otherwise it stays empty. Free it with rlb_config_files_free().
 */
int rlb_config_load_ex(const struct rlb_config_source *src,
		       struct rlb_config **out, struct rlb_diag *diag,
		       struct rlb_config_files *broken);
/* Parse config text; `name` is used in messages as the file name. */
int rlb_config_parse_string(const char *text, const char *name,
			    struct rlb_config **out, struct rlb_diag *diag);
/* Free a config and everything it owns (detaches health state). */
void rlb_config_free(struct rlb_config *cfg);
/* The cluster whose virtual name matches (design.md §2 rules), or NULL. */
struct rlb_cluster *rlb_config_find(const struct rlb_config *cfg,
				    const char *name);
/* Whether any stamped file changed since the config was loaded. */
bool rlb_config_changed(const struct rlb_config *cfg);
/*
 * Whether any of the files changed (was edited, replaced, created or
 * removed) since it was stamped. Keeps errno; NULL or empty: false.
 */
bool rlb_config_files_changed(const struct rlb_config_files *files);
/* Free what files holds and empty it; files itself is the caller's. */
void rlb_config_files_free(struct rlb_config_files *files);

/* ------------------------------------------------------------------ */
/* health.c */

/*
 * Shared health of one cluster: a SysV shared memory segment named by the
 * state file STATE_DIR/NAME.state (or a private anonymous mapping as
 * fallback) holding the decay time T, the round-robin counter and one
 * error counter per replica, keyed by replica identity. It is attached at
 * the cluster's first use: the first operation below (or path) attaches
 * it. All updates are lock-free atomics. The functions that start an
 * operation (decay, adds, reset, the peeks) follow a segment that was
 * replaced, at once for a successor and once a second for the state file
 * (design.md §12.9).
 */

/*
 * The state directory: REPLICALB_STATE_DIR / state_dir (cfg->state_dir),
 * else $XDG_RUNTIME_DIR/replicalb, else /tmp/replicalb-UID while it is
 * missing or ours, else $HOME/.cache/replicalb (design.md §5.8). Writes
 * into buf; returns buf. Keeps errno.
 */
const char *rlb_health_state_dir(const struct rlb_config *cfg, char *buf,
				 size_t len);
/*
 * Give every cluster of cfg its health handle (sets c->health), to be
 * attached at the cluster's first use: no system call here (design.md
 * §12.4). With `prune`, state of replicas no longer in the cluster is
 * dropped when it is attached. Never fails: problems fall back to private
 * state and log one warning (a handle that cannot be allocated is NULL
 * and counts nothing). Never waits for another process.
 */
void rlb_health_attach_all(struct rlb_config *cfg, bool prune);
/*
 * Attach every cluster of cfg for reading only (replicalbctl status and
 * resolve --peek, design.md §6), at first use: the segment an existing,
 * valid state file names is attached SHM_RDONLY and each replica's slot
 * is looked up, never claimed; nothing is created or written, no
 * directory either. A replica without a slot
 * reads as 0 errors and 0 slowdowns; a missing or unusable file or
 * directory as all zeroes, with T unset. Every update (decay, adds,
 * reset, rr_next) does nothing on such state; rr_next returns the
 * counter unchanged. rlb_health_path() gives the file's path, with
 * " (absent)" when it does not exist yet and " (private)" when it cannot
 * be used.
 */
void rlb_health_attach_all_readonly(struct rlb_config *cfg);
void rlb_health_detach(struct rlb_health *h);
/*
 * Path of the state file in use, or "(private)" (read-only: see above);
 * attaches the cluster if it was not yet (a first status read).
 */
const char *rlb_health_path(const struct rlb_health *h);

/* Decay at a selection (design.md §5), mutating the shared counts and T. */
void rlb_health_decay(struct rlb_cluster *c, int64_t now);
/*
 * Current stored count of replica i, without decay. With `decayed`, the
 * value the next selection at `now` would see, without changing anything.
 */
uint64_t rlb_health_errors(const struct rlb_cluster *c, size_t i, int64_t now,
			   bool decayed);
/* T of the cluster (0 if unset). */
int64_t rlb_health_decay_time(const struct rlb_cluster *c);
/*
 * Both counts of replica i from one slot lookup, as rlb_health_errors()
 * and rlb_health_slowdowns() give them (a selection reads both).
 */
void rlb_health_counts(const struct rlb_cluster *c, size_t i, int64_t now,
		       bool decayed, uint64_t *errors, uint64_t *slowdowns);
/* Replica i's slowdown count, as rlb_health_errors() gives errors. */
uint64_t rlb_health_slowdowns(const struct rlb_cluster *c, size_t i,
			      int64_t now, bool decayed);
/*
 * Add n errors to replica i, capped at the cluster's error_cap, or n
 * slowdowns (uncapped). Each first applies the decay owed at `now`, as a
 * selection would, so a late failure is never forgiven before it is seen
 * (design.md §5).
 */
void rlb_health_add_errors(struct rlb_cluster *c, size_t i, uint64_t n,
			   int64_t now);
void rlb_health_add_slowdowns(struct rlb_cluster *c, size_t i, uint64_t n,
			      int64_t now);
/* Zero replica i's counts, or every replica's when i == SIZE_MAX. */
void rlb_health_reset(struct rlb_cluster *c, size_t i);
/* Round-robin counter: fetch-and-increment, or just read. */
uint64_t rlb_health_rr_next(struct rlb_cluster *c);
uint64_t rlb_health_rr_peek(const struct rlb_cluster *c);
/* Seconds until max(errors, slowdowns) of replica i decays to 0 (§6). */
int64_t rlb_health_recovery_seconds(const struct rlb_cluster *c, size_t i,
				    int64_t now);
/*
 * Remove state from cfg's state directory (replicalbctl remove-state,
 * design.md §12.10): the name files of clusters that cfg does not have
 * (with `all`, of every cluster) and the segments they name, files set
 * aside or left half-written, and segments made for the directory that
 * nobody has attached and no name file names. Says what it removed on
 * out (NULL: nothing). Returns the number of things removed, or -1 with
 * errno when the directory cannot be read. Creates nothing.
 */
int rlb_health_remove_state(const struct rlb_config *cfg, bool all, FILE *out);

/* ------------------------------------------------------------------ */
/* select.c */

/* The ordering key of design.md §3 for one replica. */
struct rlb_select_key {
	uint64_t errors;     /* max(0, errors - max_ignored) */
	uint64_t slowdowns;  /* decayed slowdowns, never reduced */
	int64_t priority;    /* config priority */
	int64_t policy_prio; /* policy_priority(policy, i) */
	uint32_t random;     /* fresh random number */
	uint32_t index;	     /* replica index */
};

/* Sort keys ascending in place (pure; no randomness of its own). */
void rlb_select_sort(struct rlb_select_key *keys, size_t n);

/* Per-replica detail of one selection, for replicalbctl -v and logs. */
struct rlb_selection {
	size_t n;
	uint32_t *order;      /* n replica indexes, best first */
	uint64_t *errors;     /* n decayed counts, by replica index */
	uint64_t *slowdowns;  /* n decayed slowdowns, by replica index */
	int64_t *policy_prio; /* n policy priorities, by replica index */
};

/* One malloc holding a selection for n replicas; free() it. NULL: ENOMEM. */
struct rlb_selection *rlb_selection_new(size_t n);

/*
 * One selection (design.md §3) on cluster c at time now: applies decay and
 * advances the round-robin counter, unless `peek`, in which case nothing
 * shared changes. Fills sel (from rlb_selection_new(c->nreplicas)).
 * Needs c->health attached.
 */
void rlb_select(struct rlb_cluster *c, bool peek, int64_t now,
		struct rlb_selection *sel);

/* ------------------------------------------------------------------ */
/* snapshot.c */

/*
 * A config ready for selection: the parsed model, the hostname priorities
 * derived from it and its attached health state. Built and freed only
 * here; shared by reference count (the runtime's threads, replicalbctl).
 */
struct rlb_snapshot {
	struct rlb_config *cfg; /* owned; clusters have host_prio, health */
	atomic_uint refs;
};

/*
 * Take ownership of cfg and make it ready: each cluster's hostname
 * priorities (against its local_hostname, else cfg's, else fqdn(),
 * called only when a hostname policy needs it; fqdn may be NULL for "")
 * and its shared health (prune: drop the state of replicas no longer in
 * the config). Returns the snapshot with refs = 1, or NULL with errno
 * ENOMEM (cfg is freed).
 */
struct rlb_snapshot *rlb_snapshot_new(struct rlb_config *cfg,
				      const char *(*fqdn)(void), bool prune);
/*
 * As rlb_snapshot_new(), with health attached for reading only
 * (rlb_health_attach_all_readonly()): nothing shared is created or
 * changed through this snapshot.
 */
struct rlb_snapshot *rlb_snapshot_new_readonly(struct rlb_config *cfg,
					       const char *(*fqdn)(void));
void rlb_snapshot_get(struct rlb_snapshot *snap);
/* Drop one reference; the last detaches health and frees everything. */
void rlb_snapshot_put(struct rlb_snapshot *snap);

#define RLB_MAX_OWNERS 8 /* replicas one address may belong to */

/* A replica as tracking knows it: by hashes that survive reloads. */
struct rlb_owner {
	uint64_t cluster; /* rlb_cluster.name_hash */
	uint64_t replica; /* rlb_replica.identity */
};

/* A failed or abandoned connect, as tracking reports it. */
struct rlb_failure {
	size_t n; /* owners; 0: nothing to count */
	struct rlb_owner owners[RLB_MAX_OWNERS];
	int err;	/* the errno that failed it */
	int64_t age_ms; /* abandoned while pending this long; -1: failed */
	bool slowdown;	/* a slowdown, not an error (design.md §5.2) */
};

/*
 * Count f against each of its replicas in snap: one error (or slowdown)
 * each, except that an abandoned attempt (age_ms >= 0) counts only in
 * clusters whose connect_timeout_ms it outlived (design.md §5). Keeps
 * errno.
 */
void rlb_snapshot_charge(struct rlb_snapshot *snap,
			 const struct rlb_failure *f);

/* ------------------------------------------------------------------ */
/* probe.c */

/* What probing one replica found. */
struct rlb_probe_result {
	size_t cluster;	  /* index in cfg->clusters */
	size_t replica;	  /* index in its cluster */
	int port;	  /* probed port; 0: none known (the program's) */
	bool ok;	  /* connected on some address */
	bool counted;	  /* its failure counted one error */
	int err;	  /* errno of the last failed attempt, else 0 */
	int gai;	  /* EAI_* when the host did not resolve, else 0 */
	int64_t start_ms; /* monotonic start */
	int64_t ms;	  /* time to connect, when ok */
	char address[INET6_ADDRSTRLEN]; /* the address that answered or
					 * failed last; "" if none */
};

/*
 * Probe every replica of cfg (a snapshot's, health attached): TCP
 * connects to each of its addresses (literals, else the real resolver's
 * answer) on its port, all at once, each given up after its cluster's
 * connect_timeout_ms. A replica that connects on none counts one error,
 * as a program's failed connect would; one without a port of its own is
 * skipped. Returns *nresults results in config order (free()), or NULL
 * when out of memory.
 */
struct rlb_probe_result *rlb_probe(struct rlb_config *cfg, size_t *nresults);

/* ------------------------------------------------------------------ */
/* libc.c */

/*
 * The libc seam: real functions bound with dlsym(RTLD_NEXT) once, under
 * pthread_once. Tests may overwrite entries after rlb_libc() to inject
 * failures.
 */
struct rlb_libc {
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	void (*freeaddrinfo)(struct addrinfo *);
	struct hostent *(*gethostbyname)(const char *);
	struct hostent *(*gethostbyname2)(const char *, int);
	int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t,
			       struct hostent **, int *);
	int (*gethostbyname2_r)(const char *, int, struct hostent *, char *,
				size_t, struct hostent **, int *);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*close)(int);
};

/* The table, bound on first use; never NULL entries on glibc. */
struct rlb_libc *rlb_libc(void);
/* Put back every entry a test replaced: the functions as first bound. */
void rlb_libc_reset(void);

/* ------------------------------------------------------------------ */
/* runtime.c */

/*
 * Process-wide state of the preload library: the snapshot in force, hot
 * reload, the local hostname, and the library's one fork handler.
 */

/*
 * The snapshot in force with a reference held, or NULL when disabled or
 * unconfigured. Checks for a changed file at most about once a second.
 * Release with rlb_runtime_release().
 */
struct rlb_snapshot *rlb_runtime_acquire(void);
void rlb_runtime_release(struct rlb_snapshot *snap);
/*
 * This host's FQDN (design.md §3.2), computed once per process with
 * rlb_local_fqdn(). Never NULL.
 */
const char *rlb_runtime_fqdn(void);
/*
 * Count failure f against its replicas in the snapshot in force (what
 * tracking reports; see rlb_snapshot_charge()). Keeps errno.
 */
void rlb_runtime_charge(const struct rlb_failure *f);
/* rlb_track_ops.next_address over the snapshot in force. */
bool rlb_runtime_next_address(const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen);

/* ------------------------------------------------------------------ */
/* resolve.c */

/*
 * getaddrinfo() of virtual name of cluster c (design.md §4): a list in
 * selection order, allocated in glibc's layout so that libc's
 * freeaddrinfo() frees it. Returns 0 or an EAI_* code.
 */
int rlb_resolve_getaddrinfo(struct rlb_cluster *c, const char *service,
			    const struct addrinfo *hints,
			    struct addrinfo **res);
/*
 * gethostbyname2_r() of a virtual name: fills ret using only buf, which
 * may start at any address (the pointer arrays are aligned inside it).
 * Returns 0, ERANGE (buffer too small) or another errno value, and sets
 * *result, *h_errnop and errno as glibc does.
 */
int rlb_resolve_gethostbyname(struct rlb_cluster *c, const char *name, int af,
			      struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop);
/*
 * gethostbyname2() of a virtual name: the result lives in one static
 * buffer shared by all threads, as glibc's does. Sets h_errno.
 */
struct hostent *rlb_resolve_gethostbyname_static(struct rlb_cluster *c,
						 const char *name, int af);
/*
 * connect_failover (design.md §5.4): the address of the best replica not
 * in `tried` of the first cluster of `tried` found in cfg that fails
 * over, by a selection that changes nothing (peek), in failed's family,
 * with the replica's port, else failed's. Handed out (tracked). False
 * when no replica is left.
 */
bool rlb_resolve_next_address(struct rlb_config *cfg,
			      const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen);
/* Fork handler hooks for the static hostent's lock (runtime.c). */
void rlb_resolve_fork_lock(void);
void rlb_resolve_fork_unlock(void);

/* ------------------------------------------------------------------ */
/* dnscache.c */

/* One address of a resolved replica, as the real getaddrinfo gave it. */
struct rlb_dns_addr {
	int family;
	int socktype;
	int protocol;
	socklen_t addrlen;
	struct sockaddr_storage addr;
};

/* The real resolver's answer to one question: its error or addresses. */
struct rlb_dns_answer {
	int error; /* 0 or the EAI_* code */
	size_t n;
	struct rlb_dns_addr addrs[];
};

/*
 * The real getaddrinfo's answer to (host, service, q), from the
 * per-process cache while younger than ttl_s seconds (pinned: forever;
 * ttl_s <= 0 and not pinned: never cached). Sets *fresh when the resolver
 * was really asked. Returns a malloc'd copy (free()), or NULL when out of
 * memory. The cache is bounded in entries and bytes, and a service no
 * real service looks like is never kept.
 */
struct rlb_dns_answer *rlb_dnscache_ask(const char *host, const char *service,
					const struct addrinfo *q, int64_t ttl_s,
					bool pinned, bool *fresh);
/* Drop every cached answer (tests). */
void rlb_dnscache_flush(void);
/* What the cached questions and answers take now, in bytes (tests). */
size_t rlb_dnscache_bytes(void);
/* Fork handler hooks for the cache's lock (runtime.c). */
void rlb_dnscache_fork_lock(void);
void rlb_dnscache_fork_unlock(void);

/* ------------------------------------------------------------------ */
/* track.c */

/*
 * Remember that address sa was handed out for replica i of cluster c, so
 * that a failed connect to it counts against that replica.
 */
void rlb_track_handout(const struct rlb_cluster *c, size_t i,
		       const struct sockaddr *sa, socklen_t len);
/*
 * What tracking asks of its owner (runtime.c registers them at start):
 * charge() counts a failure against its replicas; next_address() gives,
 * for connect_failover, the address of the best replica of the failed
 * one's cluster not among `tried`, in the family of `failed` and with the
 * port resolution would have given (handed out, so tracked), or false.
 */
struct rlb_track_ops {
	void (*charge)(const struct rlb_failure *f);
	bool (*next_address)(const struct rlb_owner *tried, size_t ntried,
			     const struct sockaddr *failed, socklen_t len,
			     struct sockaddr_storage *out, socklen_t *outlen);
};
void rlb_track_set_ops(const struct rlb_track_ops *ops);
/* Fork handler hooks for tracking's one lock (runtime.c). */
void rlb_track_fork_lock(void);
void rlb_track_fork_unlock(void);
/* In a forked child: forget the parent's pending attempts (runtime.c). */
void rlb_track_after_fork_child(void);

/*
 * Hook bodies: same contract as the libc functions. Connects to replica
 * addresses are bounded, fail over when asked, and report what counts
 * (design.md §5).
 */
int rlb_track_connect(int fd, const struct sockaddr *sa, socklen_t len);
int rlb_track_getsockopt(int fd, int level, int name, void *val,
			 socklen_t *len);
int rlb_track_close(int fd);
/*
 * Settle attempts the program dropped without our close() (a raw close
 * system call, longjmp): each older than its bound counts one error.
 * Cheap when nothing is pending; resolution calls it.
 */
void rlb_track_sweep(void);
/* Whether connect/close must look at anything at all (cheap). */
bool rlb_track_active(void);
/* Errno values that count as a replica error (design.md §5). */
bool rlb_track_counts(int err);

#endif /* RLB_H */
