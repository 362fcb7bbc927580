/* model/model.h - the configuration model: policies (policy.c), the config
 * (config.c) and its parsing and loading. */
#ifndef RLB_MODEL_H
#define RLB_MODEL_H

#include <string.h>

#include "base/base.h"

/* ------------------------------------------------------------------ */
/* policy.c */

/*
 * Every policy, one row each: its enum tail, its ClickHouse name (the
 * config's load_balancing value) and the name of the engine's ops object
 * that implements it, rlb_policy_<ops>_ops (engine.h, design.md §3.4).
 * Same order as ClickHouse's LoadBalancing enum, least_request after its
 * proposal (PR #109234). The model knows a policy
 * by its name only: what it needs and how it orders replicas is the
 * engine's. Adding a policy is one row here and one new file,
 * src/engine/policy_<family>.c, that defines its ops object (listed in
 * Makefile.am and tests/fuzz/run.sh); no other code tests for a policy.
 */
#define RLB_POLICY_LIST(X)                                                     \
	X(RANDOM, "random", random)                                            \
	X(NEAREST_HOSTNAME, "nearest_hostname", nearest_hostname)              \
	X(LEVENSHTEIN, "hostname_levenshtein_distance", levenshtein)           \
	X(LCP, "hostname_longest_common_prefix", lcp)                          \
	X(LCS, "hostname_longest_common_suffix", lcs)                          \
	X(IN_ORDER, "in_order", in_order)                                      \
	X(FIRST_OR_RANDOM, "first_or_random", first_or_random)                 \
	X(ROUND_ROBIN, "round_robin", round_robin)                             \
	X(LEAST_REQUEST, "least_request", least_request)

#define RLB_POLICY_ENUM(id, name, ops) RLB_POLICY_##id,
enum rlb_policy {
	RLB_POLICY_LIST(RLB_POLICY_ENUM) RLB_POLICY_COUNT,
};
#undef RLB_POLICY_ENUM

/* ClickHouse name of a policy ("random", "nearest_hostname", ...). */
const char *rlb_policy_name(enum rlb_policy p);
/* Exact, case-sensitive name to policy: 0, or -1 when unknown. */
int rlb_policy_parse(const char *name, enum rlb_policy *out);
/* Closest valid policy name to a wrong one, or NULL if none is close. */
const char *rlb_policy_suggest(const char *name);

/* The four hostname functions of clickhouse.md §10 (pure). */
size_t rlb_prefix_distance(const char *a, const char *b);
size_t rlb_levenshtein(const char *a, const char *b); /* ASCII case-folded */
/*
 * The candidate closest to word, for a "did you mean": the first that
 * word begins (given at least 3 characters), else the one of the least
 * edit distance when that is at most 2 or a third of word's length (with
 * strict: at most 2 and a third, for names that share long suffixes such
 * as ".cluster"); NULL when none is close. cand(ctx, i) is candidate i of
 * n (NULL: none).
 */
const char *rlb_closest_word(const char *word,
			     const char *(*cand)(void *ctx, size_t i),
			     void *ctx, size_t n, bool strict);
size_t rlb_common_prefix(const char *a, const char *b);
size_t rlb_common_suffix(const char *a, const char *b);

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
	bool connect_failover; /* move a failed connect on (design.md §5.4) */
	/* Hedged connects (design.md §5.10): use_hedged_requests, and
	 * hedged_connection_timeout_ms, >= 1. */
	bool use_hedged_requests;
	int64_t hedged_connection_timeout_ms;
	int64_t dns_hold_nx;	      /* s an NXDOMAIN keeps DNS members */
	int64_t dns_refresh_floor_ms; /* DNS membership asked at most this
				       * often (design.md §15) */
	/* least_request (design.md §3.4): replicas drawn per pick, >= 1
	 * (load_balancing_least_request_choice_count), and the exponent of
	 * 1 / (in_flight + 1)^bias, >= 0
	 * (load_balancing_least_request_active_request_bias). */
	int64_t least_request_choices;
	double least_request_bias;
	/* The prober's HTTP check: how long the answer may take once
	 * connected (design.md §6.1). */
	int64_t health_check_timeout_ms;
};

/* An IP address literal, parsed once at config load. */
struct rlb_addr {
	int family;	   /* AF_INET or AF_INET6 */
	uint8_t bytes[16]; /* 4 or 16 bytes, network order */
};

/* Whether a is an IPv4-mapped IPv6 address (::ffff:a.b.c.d). */
static inline bool rlb_addr_v4_mapped(const struct rlb_addr *a)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};

	return a->family == AF_INET6 &&
	       memcmp(a->bytes, prefix, sizeof(prefix)) == 0;
}

/* Where a replica came from (design.md §15). */
enum rlb_replica_source {
	RLB_SOURCE_CONFIG, /* the cluster's replicas list */
	RLB_SOURCE_SRV,	   /* a target of the cluster's srv name */
	RLB_SOURCE_DNS,	   /* an address of the cluster's dns name */
};

/* "config", "srv" or "dns". */
const char *rlb_replica_source_name(enum rlb_replica_source s);

struct rlb_replica {
	char *host;	  /* host string as written, no port/brackets;
			   * an SRV target; a dns address's reverse name
			   * or its text */
	int port;	  /* replica's, else cluster's port; 0: caller's */
	int64_t priority; /* config priority, default 1, lower preferred */
	char **pinned;	  /* npinned address literals; skip DNS if any */
	size_t npinned;
	struct rlb_addr *literal; /* nliteral addresses known without DNS:
				   * the pinned ones, the host itself when
				   * it is an IP literal, or an SRV target's
				   * from the SRV answer (design.md §15) */
	size_t nliteral;
	uint64_t identity; /* rlb_hash64 of lowercase host + port: the
			    * key of its health state across reloads */
	int line;	   /* config line, for messages */
	enum rlb_replica_source source;
	uint16_t weight; /* SRV weight (RFC 2782), else 0 */
};

struct rlb_health;
struct rlb_cluster_view;

struct rlb_cluster {
	char *name;	       /* virtual name: lowercase, no trailing dot */
	uint64_t name_hash;    /* rlb_hash64 of name */
	struct rlb_settings s; /* effective settings */
	char *local_hostname;  /* cluster override or NULL */
	int port;	       /* cluster port or 0 */
	size_t nreplicas;      /* 1 .. RLB_MAX_REPLICAS */
	struct rlb_replica *replicas;
	/* DNS membership sources (design.md §15), absolute names with the
	 * trailing dot, or NULL. A cluster with one may have no replicas
	 * until its first answer. */
	char *srv;
	char *dns;
	size_t nstatic; /* replicas[0 .. nstatic) are the config's */
	bool weighted;	/* some replica has an SRV weight (design.md §15) */
	/* What a resolution answers while the cluster has no replicas:
	 * EAI_AGAIN while its DNS has never answered, else (0) EAI_NONAME. */
	int no_members_eai;
	/* What the engine derives from the cluster for one snapshot (the
	 * policy's precomputed priorities and classes, the hot path's
	 * words; engine.h): the snapshot's, NULL in a parsed config or a
	 * copy. */
	struct rlb_cluster_view *view;
	struct rlb_health *health; /* shared state, once attached */
	/* The prober's HTTP check (design.md §6.1): GET health_path (NULL:
	 * none) on health_port (0: the replica's), a 2xx healthy. */
	char *health_path;
	int health_port;
	char *file; /* file and line that defined the cluster */
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
	/* Cluster number + 1 by name_hash, open addressing (0: free);
	 * NULL when it could not be built: rlb_config_find() scans. */
	uint32_t *index;
	size_t index_mask;
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
/*
 * Build cfg's index of virtual names (the loader calls it once, when the
 * clusters are final). Without memory there is none, and lookups scan.
 */
void rlb_config_index(struct rlb_config *cfg);
/* Free a config and everything it owns (health is the snapshot's). */
void rlb_config_free(struct rlb_config *cfg);
/* The cluster whose virtual name matches (design.md §2 rules), or NULL. */
struct rlb_cluster *rlb_config_find(const struct rlb_config *cfg,
				    const char *name);
/*
 * The cluster whose name is closest to name, a name that is none of cfg's
 * (rlb_closest_word(), strict), or NULL: for the debug line that says a
 * mistyped virtual name passed through ("analytcs.cluster").
 */
const char *rlb_config_near_miss(const struct rlb_config *cfg,
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
/* config_copy.c */

/* Identity of a replica: rlb_hash64 of its lowercase host, ':', port. */
uint64_t rlb_replica_identity(const char *host, int port);
/* Deep copy of src into dst: 0, or -ENOMEM (dst left empty). */
int rlb_replica_copy(struct rlb_replica *dst, const struct rlb_replica *src);
/* Free what r owns and zero it. */
void rlb_replica_clear(struct rlb_replica *r);
/*
 * Deep copy of cfg without what a snapshot adds (its view, health), its index
 * rebuilt; with `statics`, each cluster keeps only its config replicas. NULL
 * with errno ENOMEM.
 */
struct rlb_config *rlb_config_clone(const struct rlb_config *cfg, bool statics);
/*
 * Move replicas r[0 .. n) to the end of c's (r is zeroed: c owns what
 * they held), at most up to RLB_MAX_REPLICAS (the rest stay with the
 * caller, unzeroed). 0, or -ENOMEM with nothing moved.
 */
int rlb_cluster_append(struct rlb_cluster *c, struct rlb_replica *r, size_t n);

/* ------------------------------------------------------------------ */
/* dnsmsg.c */

/*
 * DNS messages (RFC 1035 §4, RFC 2782, RFC 3596) as membership reads them:
 * the answer to one question, its records of the asked type. Pure: no
 * I/O, no resolver state; every length and pointer of the wire format is
 * checked, so that any byte string is safe to parse (fuzzed).
 */
#define RLB_DNS_T_A	1
#define RLB_DNS_T_AAAA	28
#define RLB_DNS_T_SRV	33
#define RLB_DNS_T_CNAME 5
#define RLB_DNS_T_PTR	12

#define RLB_DNS_RCODE_NOERROR  0
#define RLB_DNS_RCODE_SERVFAIL 2
#define RLB_DNS_RCODE_NXDOMAIN 3

/* One record of the answer: an address (A, AAAA) or a service (SRV). */
struct rlb_dns_record {
	uint16_t type;	      /* RLB_DNS_T_A, _AAAA or _SRV */
	uint32_t ttl;	      /* seconds, as the server sent it */
	struct rlb_addr addr; /* A, AAAA */
	uint16_t priority;    /* SRV */
	uint16_t weight;      /* SRV */
	uint16_t port;	      /* SRV, host order */
	/* SRV, PTR: the target, lowercase, no trailing dot ("" for "."). A and
	 * AAAA: the owner name, same form (so that additional records can
	 * be matched with SRV targets). */
	char name[RLB_MAX_HOST + 1];
};

/* A parsed answer. */
struct rlb_dns_reply {
	int rcode;	/* RLB_DNS_RCODE_* or another RCODE */
	bool truncated; /* TC was set */
	size_t nanswer; /* records[0 .. nanswer): the answer section's
			 * records of the asked type owned by the asked
			 * name or a CNAME it leads to */
	size_t n;	/* then the additional section's A and AAAA */
	struct rlb_dns_record *records; /* malloc'd; n entries */
	uint32_t min_ttl; /* smallest TTL of the answer records (and of the
			   * CNAMEs followed); UINT32_MAX when none */
};

/*
 * Parse msg[0 .. len) as the answer to (qname, qtype): qname without or
 * with a trailing dot, compared case-insensitively with the question and
 * the owners. Returns 0 and fills *out (free with rlb_dns_reply_free()),
 * -EINVAL when the message is malformed, not a response, or not to this
 * question (nothing in *out), or -ENOMEM. Records of other types and
 * classes are skipped; a malformed record fails the whole message, as a
 * resolver would.
 */
int rlb_dns_parse(const uint8_t *msg, size_t len, const char *qname,
		  uint16_t qtype, struct rlb_dns_reply *out);
void rlb_dns_reply_free(struct rlb_dns_reply *r);
/*
 * Whether s is a domain name membership may ask about: labels of 1..63
 * bytes of letters, digits, '-' and '_', joined by single dots, at most
 * 253 bytes, one trailing dot allowed.
 */
bool rlb_dns_name_valid(const char *s);
/*
 * The question (name, type) of class IN with id, recursion desired, as a
 * message in buf (len at least 272 bytes): its length, or -EINVAL when
 * name is no valid name (rlb_dns_name_valid()). name is asked as it is,
 * absolute, with or without its trailing dot.
 */
ssize_t rlb_dns_query(uint16_t id, const char *name, uint16_t type,
		      uint8_t *buf, size_t len);
/*
 * Whether reply[0 .. rlen) answers query[0 .. qlen) (rlb_dns_query()):
 * 0 when it does not (another id, not a response, another opcode or
 * question), 1 when it does, 2 when it does with TC set (truncated: ask
 * again over TCP). The question's name matches in any case.
 */
int rlb_dns_reply_of(const uint8_t *query, size_t qlen, const uint8_t *reply,
		     size_t rlen);

/* ------------------------------------------------------------------ */
/* resolv_conf.c */

#define RLB_RESOLV_MAXNS 3 /* glibc's MAXNS: servers past it are ignored */

/* What the library's own stub resolver takes from resolv.conf(5). */
struct rlb_resolv_conf {
	struct sockaddr_storage ns[RLB_RESOLV_MAXNS]; /* port 53 */
	socklen_t nslen[RLB_RESOLV_MAXNS];
	size_t nns;    /* at least 1: the loopback when none is named */
	int timeout_s; /* options timeout: (5; at most 30) */
	int attempts;  /* options attempts: (2; 1 to 5) */
	bool rotate;   /* options rotate: start at a random server */
	bool use_vc;   /* options use-vc: every question over TCP */
};

/*
 * Parse resolv.conf text[0 .. len) (NULL: no file) and then env_options
 * (RES_OPTIONS, NULL: unset) into *rc, as glibc's res_init() does for
 * the keys above: nameserver lines (IPv4; IPv6 with a numeric scope),
 * options lines; anything else is ignored, never an error.
 */
void rlb_resolv_conf_parse(const char *text, size_t len,
			   const char *env_options, struct rlb_resolv_conf *rc);
/*
 * How long one question waits for server ns (its index in the order it
 * is asked) before the next server is asked: glibc's own schedule, so
 * that no question of ours outwaits libc's. Milliseconds.
 */
int64_t rlb_resolv_conf_wait_ms(const struct rlb_resolv_conf *rc, size_t ns);
/* The longest one question can take to fail: every wait of every attempt. */
int64_t rlb_resolv_conf_budget_ms(const struct rlb_resolv_conf *rc);

#endif /* RLB_MODEL_H */
