/* engine/engine.h - the policies (policies.c and one file per family,
 * policy_*.c), selection (select.c), the snapshot a process selects from,
 * its per-cluster views and the error model (snapshot.c), and the answer
 * for a virtual name that every consumer formats (answer.c). */
#ifndef RLB_ENGINE_H
#define RLB_ENGINE_H

#include "state/state.h"

/* ------------------------------------------------------------------ */
/* policies.c, policy_hostname.c, policy_order.c, policy_random.c,
 * policy_least_request.c */

struct rlb_selection;
struct rlb_cluster_view;

/*
 * How one policy orders replicas (design.md §3.4): what it needs, so that
 * no caller tests for a policy by name and a policy that does not need a
 * thing never pays for it, and its two steps. One object per enum
 * rlb_policy, defined in its family's file and named by its row of
 * RLB_POLICY_LIST (model.h).
 */
struct rlb_policy_ops {
	/* Compares host names: the snapshot finds the local hostname
	 * (design.md §3.2) and keeps host_priority() of every replica in
	 * the view; DNS members get reverse names (members.c). */
	bool needs_hostname;
	/* Takes a turn of the cluster's shared counter every selection
	 * (a peek reads it). */
	bool needs_counter;
	/* Reads the replicas' in-flight counts every selection
	 * (rlb_selection.in_flight). */
	bool needs_load;
	/* Its priorities are the same for every selection of a snapshot:
	 * the view keeps the replicas by class of priority, which a
	 * healthy selection over many replicas only shuffles (select.c). */
	bool static_classes;
	/* needs_hostname: policy_priority of a replica whose host string is
	 * host, against local hostname local (never NULL; may be ""). */
	int64_t (*host_priority)(const char *local, const char *host);
	/*
	 * policy_priority(i) of design.md §3.1 for replicas 0 .. n-1 of c
	 * (n <= c->nreplicas, n > 0) into out[], and the smallest and
	 * largest of them into *min and *max (the selection packs keys by
	 * their range; it need not read them back). v: c's view (during
	 * its own building: without classes). turn: L = counter mod N
	 * (needs_counter; else 0).
	 */
	void (*priorities)(const struct rlb_cluster *c,
			   const struct rlb_cluster_view *v, uint64_t turn,
			   int64_t *out, size_t n, int64_t *min, int64_t *max);
	/*
	 * NULL, or a step after the sort: reorder sel->order[0 .. n) (n <=
	 * sel->n), sorted by the key of design.md §3 with ties at random.
	 * ignored: max_ignored_errors, for rlb_selection_tied(). Reads only
	 * sel and c's settings; draws only this thread's random numbers.
	 */
	void (*pick)(const struct rlb_cluster *c, struct rlb_selection *sel,
		     size_t n, uint64_t ignored);
};

/* The ops objects, one per row of RLB_POLICY_LIST. */
#define RLB_POLICY_OPS_DECLARE(id, name, ops)                                  \
	extern const struct rlb_policy_ops rlb_policy_##ops##_ops;
RLB_POLICY_LIST(RLB_POLICY_OPS_DECLARE)
#undef RLB_POLICY_OPS_DECLARE

/* The ops of policy p (random's for a value outside the enum). */
const struct rlb_policy_ops *rlb_policy_ops(enum rlb_policy p);

/* A word of rlb_cluster_view.fast_v4: set for a replica with one IPv4
 * literal. */
#define RLB_FAST_V4 (UINT64_C(1) << 48)

/*
 * What the engine derives from one cluster for one snapshot, kept beside
 * the config rather than in it: the parsed config stays as it was read,
 * and a copy of a cluster never carries another snapshot's arrays. Built
 * by rlb_view_build(), owned by the snapshot (rlb_cluster.view points to
 * it); read-only once built, but for track_stamps.
 */
struct rlb_cluster_view {
	const struct rlb_policy_ops *policy; /* of c->s.load_balancing */
	/* needs_hostname: each replica's priority, and their range. */
	int64_t *host_prio;
	int64_t host_prio_min, host_prio_max;
	/* static_classes: the replicas by policy priority, index order
	 * within one, and where each of the nclasses classes of equal
	 * priority ends; else NULL. */
	uint32_t *class_order;
	uint32_t *class_ends;
	size_t nclasses;
	/*
	 * The hot path's view of the replicas, contiguous where the
	 * replicas are not (a selection visits them in a random order):
	 * fast_v4[i] is RLB_FAST_V4 | port << 32 | address (both in network
	 * order; port 0: the caller's) for a replica whose one literal is
	 * IPv4, else 0; all_literal: every replica answers from its
	 * literals alone (none v4-mapped). track_stamps[i] and
	 * track_hints[i]: connect tracking's record of replica i's latest
	 * handout, and where its latest handed-out address is kept
	 * (track_addrs.c; checked before every use, so a stale one only
	 * costs the full look).
	 */
	uint64_t *fast_v4;
	bool all_literal;
	bool one_priority; /* every replica has the same config priority */
	_Atomic uint64_t *track_stamps;
	void *_Atomic *track_hints;
};

/*
 * The policy part of view v of cluster c (policies.c): v->policy, and
 * host_prio (against local hostname local, never NULL) and the classes
 * where the policy needs them. 0, or -ENOMEM with those left NULL.
 */
int rlb_policy_prepare(struct rlb_cluster_view *v, const struct rlb_cluster *c,
		       const char *local);
/*
 * c's policy priorities for one selection: ops->priorities() with c's
 * view (none: a parsed config, where a hostname policy gives 0s).
 */
void rlb_policy_priorities(const struct rlb_cluster *c, uint64_t turn,
			   int64_t *out, size_t n, int64_t *min, int64_t *max);
/* policy_random.c: priority 0 for every replica (random, least_request). */
void rlb_policy_zero_priorities(const struct rlb_cluster *c,
				const struct rlb_cluster_view *v, uint64_t turn,
				int64_t *out, size_t n, int64_t *min,
				int64_t *max);
/* policy_order.c: first_or_random's first replica, first_offset mod N. */
size_t rlb_policy_first_index(const struct rlb_cluster *c);

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
	/* n in-flight counts, by replica index: written only for a policy
	 * that needs_load, the rest of the time left as they were. */
	uint64_t *in_flight;
};

/* One malloc holding a selection for n replicas; free() it. NULL: ENOMEM. */
struct rlb_selection *rlb_selection_new(size_t n);
/*
 * The same in memory of the caller's: rlb_selection_size(n) bytes (0:
 * too many), suitably aligned, laid out by rlb_selection_at().
 */
size_t rlb_selection_size(size_t n);
struct rlb_selection *rlb_selection_at(void *mem, size_t n);

/*
 * One selection (design.md §3) on cluster c at time now: applies decay and
 * advances the round-robin counter, unless `peek`, in which case nothing
 * shared changes. Fills sel (from rlb_selection_new(c->nreplicas)).
 * Needs c->health attached. A policy that needs_load reads the replicas'
 * in-flight counts from the shared state (rlb_health_in_flight()).
 */
void rlb_select(struct rlb_cluster *c, bool peek, int64_t now,
		struct rlb_selection *sel);
/*
 * rlb_select() with the in-flight counts given: in_flight[i] is replica
 * i's connections open now, host-wide, for i < min(c->nreplicas,
 * sel->n) (NULL: read them, as rlb_select() does). Read only by a
 * policy that needs_load; the counts are an input, never written.
 */
void rlb_select_load(struct rlb_cluster *c, bool peek, int64_t now,
		     const uint64_t *in_flight, struct rlb_selection *sel);
/*
 * Whether replicas a and b of a sorted selection tie on every field of
 * the key before the random one (ignored: max_ignored_errors).
 */
bool rlb_selection_tied(const struct rlb_cluster *c,
			const struct rlb_selection *sel, uint64_t ignored,
			uint32_t a, uint32_t b);

/* ------------------------------------------------------------------ */
/* snapshot.c */

/*
 * A config ready for selection: the parsed model, the hostname priorities
 * derived from it and its attached health state. Built and freed only
 * here; shared by reference count (the runtime's threads, replicalbctl).
 */
struct rlb_snapshot {
	struct rlb_config *cfg; /* owned; its clusters have views, health */
	struct rlb_cluster_view *views; /* one per cluster of cfg, owned */
	atomic_uint refs;
};

/*
 * Take ownership of cfg and make it ready: each cluster's view (its
 * policy's priorities against its local_hostname, else cfg's, else
 * fqdn(), called only when a policy needs_hostname; fqdn may be NULL for
 * "") and its shared health, used as mode says (rlb_health_attach_all():
 * RLB_STATE_LOOK creates and changes nothing shared, RLB_STATE_TURN
 * charges nothing; prune: drop the state of replicas no longer in the
 * config, only when counting). Returns the snapshot with refs = 1, or
 * NULL with errno ENOMEM (cfg is freed).
 */
struct rlb_snapshot *rlb_snapshot_new(struct rlb_config *cfg,
				      const char *(*fqdn)(void),
				      enum rlb_state_mode mode, bool prune);
void rlb_snapshot_get(struct rlb_snapshot *snap);
/*
 * Build view v of cluster c, its policy's part against local hostname
 * local (NULL: ""); does not set c->view. 0, or -ENOMEM with v empty.
 * Free with rlb_view_free(), which empties v (a zeroed v is fine).
 */
int rlb_view_build(struct rlb_cluster_view *v, const struct rlb_cluster *c,
		   const char *local);
void rlb_view_free(struct rlb_cluster_view *v);
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

/* What the connection ledger tells the state (design.md §11.8, §12.13). */
enum rlb_conn_event {
	RLB_CONN_TAKE,	      /* a connect to the replica started */
	RLB_CONN_FORK,	      /* a fork starts: its child holds it too */
	RLB_CONN_FORKED,      /* in the parent, the fork is over */
	RLB_CONN_CHILD,	      /* in the child: the hold is its own */
	RLB_CONN_SENT,	      /* a descriptor of it sent (SCM_RIGHTS) */
	RLB_CONN_DROP,	      /* this process let go of it */
	RLB_CONN_ESTABLISHED, /* its connect established: counted */
	RLB_CONN_FAILED,      /* its connect failed: counted */
};
/*
 * Tell each of the n owners' clusters in snap of event ev of the socket
 * of inode ino (TAKE, FORK..., DROP) or of a connect to the replica
 * (ESTABLISHED, FAILED). Keeps errno.
 */
void rlb_snapshot_traffic(struct rlb_snapshot *snap,
			  const struct rlb_owner *owners, size_t n,
			  uint64_t ino, enum rlb_conn_event ev);
/*
 * A descriptor of socket ino was received (SCM_RIGHTS): this process
 * holds it too in every cluster of snap whose ledger has it (clusters
 * with no state on this host are not looked at). Its owners into owners
 * (RLB_MAX_OWNERS): their number, 0 when it is no connection counted.
 */
size_t rlb_snapshot_receive(struct rlb_snapshot *snap, uint64_t ino,
			    struct rlb_owner *owners);

/* ------------------------------------------------------------------ */
/* answer.c */

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
 * How a consumer resolves a replica's real host name: the preload
 * library's per-process cache over libc's getaddrinfo (dnscache.c); an
 * NSS module's resolver that never re-enters NSS. ask() answers question
 * q about host (service may be NULL) with a malloc'd answer (NULL when
 * out of memory), cached for ttl_s seconds (pinned: an IP literal, kept
 * for good); *fresh when it was just asked of the real resolver.
 */
struct rlb_resolver {
	struct rlb_dns_answer *(*ask)(const char *host, const char *service,
				      const struct addrinfo *q, int64_t ttl_s,
				      bool pinned, bool *fresh);
};

/*
 * A question that replicas with IP literals answer without the resolver
 * (answer.c): the family asked, the caller's port (network order), and
 * the socket types of the answer, each with its protocol.
 */
struct rlb_literal_question {
	int family; /* AF_UNSPEC, AF_INET or AF_INET6 */
	uint16_t port;
	size_t ntypes;
	int socktype[3];
	int protocol[3];
};

/* What a sink says after each address it was given. */
enum rlb_answer_next {
	RLB_ANSWER_MORE,   /* go on */
	RLB_ANSWER_ENOUGH, /* stop: the answer is complete */
	RLB_ANSWER_NOMEM,  /* stop: out of memory */
};

/*
 * What a consumer does with an answer: skip() (may be NULL) leaves
 * replica idx out before it is resolved; address() takes each address of
 * replica idx in selection order (an addrinfo node to link, a hostent
 * entry, the next replica to fail over to) and records it as handed out
 * where the consumer tracks connects.
 */
struct rlb_answer_sink {
	bool (*skip)(void *ctx, const struct rlb_cluster *c, size_t idx);
	enum rlb_answer_next (*address)(void *ctx, struct rlb_cluster *c,
					size_t idx,
					const struct rlb_dns_addr *a);
	void *ctx;
	/*
	 * Optional, for the hot path, instead of address(): the addresses
	 * of replicas order[0 .. n), each one whose literals answer lq
	 * (rlb_literal_question), in that order: of each replica, its
	 * literals of lq's family, with its port or lq's, once for each of
	 * lq's types. One call for a run of replicas keeps the call and the
	 * copies of a callback per address out of the answer (and the
	 * sink builds each entry from the snapshot's bytes: a sockaddr
	 * built here and copied there would be read back wider than its
	 * stores, a failed store forward each). Returns MORE or NOMEM;
	 * *answered: the first of order[] that had an address (n: none).
	 */
	enum rlb_answer_next (*literals)(void *ctx, struct rlb_cluster *c,
					 const uint32_t *order, size_t n,
					 const struct rlb_literal_question *lq,
					 size_t *answered);
};

/*
 * The answer for virtual name of cluster c to question q (design.md §4):
 * one selection (peek: nothing written, no round-robin turn), then for
 * each replica in selection order its addresses that fit q, with its own
 * port or else `service`, given to sink. Replicas whose addresses are IP
 * literals answer without the resolver where q is one libc answers
 * plainly for a number; the others through res. A replica whose name
 * resolves in no family counts one error (§5.5), but in a peek, which
 * writes nothing (the preload's failover pick, the NSS module's
 * turnless look). Returns 0 when some
 * replica answered, *first its host string; else the EAI_* code of the
 * last failure (EAI_MEMORY: out of memory, or the sink said so).
 */
int rlb_answer(struct rlb_cluster *c, const char *service,
	       const struct addrinfo *q, bool peek,
	       const struct rlb_resolver *res,
	       const struct rlb_answer_sink *sink, const char **first);

/* ------------------------------------------------------------------ */
/* format.c: answers in the shapes glibc's callers take */

/*
 * An answer's addresses in selection order (rlb_collect_sink()). Starts
 * empty ({0}) or in the caller's storage (RLB_ADDR_LIST_IN(array): no
 * allocation while the answer fits, as on a hot path); grows on the heap.
 */
struct rlb_addr_list {
	struct rlb_dns_addr *addrs;
	size_t n, cap;
	bool on_heap; /* addrs is malloc'd, not the caller's storage */
};
#define RLB_ADDR_LIST_IN(array)                                                \
	((struct rlb_addr_list){.addrs = (array),                              \
				.cap = sizeof(array) / sizeof((array)[0])})
/* A sink that appends every address to l (no skip, no literal runs). */
struct rlb_answer_sink rlb_collect_sink(struct rlb_addr_list *l);
void rlb_addr_list_free(struct rlb_addr_list *l);
/*
 * Keep, in order, the first of each distinct address of family af
 * (AF_UNSPEC: of either) in l (a hostent or a gaih list has no ports or
 * socket types); returns how many are left.
 */
size_t rlb_addr_list_unique(struct rlb_addr_list *l, int af);
/*
 * A sink wrapped by an observer: each address the inner sink takes is
 * then shown to observe() (the preload records it as handed out, for
 * connect tracking). o must outlive the sink.
 */
struct rlb_observed {
	const struct rlb_answer_sink *inner;
	void (*observe)(void *ctx, struct rlb_cluster *c, size_t idx,
			const struct rlb_dns_addr *a);
	void *ctx;
};
struct rlb_answer_sink rlb_observed_sink(struct rlb_observed *o);
/*
 * Bytes a hostent of n addresses of family af, named hname with the one
 * alias alias, takes in a buffer that starts at buf (its alignment
 * counts), computed once: rlb_format_hostent() uses exactly this many.
 */
size_t rlb_hostent_size(size_t n, int af, const char *hname, const char *alias,
			const char *buf);
/*
 * ret in buf as glibc lays a hostent out: from buf's first aligned byte
 * the address list and the aliases, then the addresses of l (all of
 * family af: rlb_addr_list_unique()), the name and the alias. 0, or
 * ERANGE when buflen is short of rlb_hostent_size().
 */
struct hostent;
int rlb_format_hostent(const struct rlb_addr_list *l, int af, const char *hname,
		       const char *alias, struct hostent *ret, char *buf,
		       size_t buflen);
/*
 * Bytes the gaih_addrtuple list of n addresses named name takes from buf
 * (have_first: the caller preallocated the first tuple).
 */
size_t rlb_gaih_size(size_t n, const char *name, bool have_first,
		     const char *buf);
/*
 * The list of l's addresses for gethostbyname4_r (<nss.h>), each named
 * name, in l's order: when *pat is not NULL (the caller preallocated a
 * tuple, as getaddrinfo does) the first address is stored there, the
 * rest and the name in buf; *pat is the list's head. 0, ENOENT when l is
 * empty, or ERANGE when buflen is short of rlb_gaih_size().
 */
struct gaih_addrtuple;
int rlb_format_gaih(const struct rlb_addr_list *l, const char *name,
		    struct gaih_addrtuple **pat, char *buf, size_t buflen);

/* ------------------------------------------------------------------ */
/* members.c */

/* What asking one name, or a refresh, gave (design.md §15). */
enum rlb_dns_outcome {
	RLB_DNS_NONE,	   /* not asked yet */
	RLB_DNS_OK,	   /* records */
	RLB_DNS_EMPTY,	   /* the name exists, with no such records */
	RLB_DNS_NXDOMAIN,  /* the name does not exist */
	RLB_DNS_FAILED,	   /* no answer, a server error */
	RLB_DNS_MALFORMED, /* an answer that does not parse */
};
const char *rlb_dns_outcome_name(enum rlb_dns_outcome o);

/*
 * One question of an ask: (name, type) in, its answer out. name is a
 * valid absolute name (rlb_dns_name_valid(), trailing dot or not).
 */
struct rlb_dns_question {
	const char *name;
	uint16_t type; /* RLB_DNS_T_* */
	uint8_t *buf;  /* the answer, whatever its RCODE */
	size_t cap;    /* bytes at buf */
	ssize_t len;   /* out: the answer's length; -1: none, see err */
	int err;       /* out, with len -1: ETIMEDOUT (no server answered
			* in time), ECONNREFUSED, EMSGSIZE (over cap) ... */
};

/*
 * How membership asks DNS: ask() asks q[0 .. n) together and returns
 * when each has its answer or its error, at the latest at deadline_ms
 * (monotonic; INT64_MAX: the resolver's own schedule only). Keeps errno.
 * rlb_dns_stub is the library's own stub resolver (dns_client.c); tests
 * give their own.
 */
struct rlb_dns_client {
	void (*ask)(struct rlb_dns_question *q, size_t n, int64_t deadline_ms);
};

/* dns_client.c */

/*
 * The stub: resolv.conf's servers (read again at every ask), timeout,
 * attempts, rotate and use-vc, and RES_OPTIONS outside secure-execution
 * mode; every question of an ask in flight at once on one UDP socket per
 * server (at most 64), TCP after an answer with TC set; a server that
 * answers SERVFAIL, NOTIMP or REFUSED, or whose port is closed, passes
 * the question on to the next server, as glibc's res_send() does. Every
 * system call goes through the seam, and none takes a lock of libc's:
 * a fork() while a thread of ours asks copies no lock held (design.md
 * §13.4).
 */
extern const struct rlb_dns_client rlb_dns_stub;
/*
 * The longest one question of the stub takes to fail under the
 * resolv.conf in force: glibc's own schedule for one name
 * (rlb_resolv_conf_budget_ms()). Milliseconds.
 */
int64_t rlb_dns_stub_budget_ms(void);
/* Test seam: ask with rc (NULL: resolv.conf again), kept by the caller. */
void rlb_dns_stub_use(const struct rlb_resolv_conf *rc);

/* One replica DNS gave. */
struct rlb_member {
	char *host;	   /* SRV target; a dns address's text */
	int port;	   /* SRV port; else 0: the cluster's */
	uint16_t priority; /* SRV priority; 0 for dns */
	uint16_t weight;   /* SRV weight */
	bool literal;	   /* addr is the replica's address (dns) */
	struct rlb_addr addr;
	/* SRV: the target's addresses from the answer's additional
	 * section (malloc'd), used without asking again; none: the
	 * target is resolved as any replica host. */
	struct rlb_addr *glue;
	size_t nglue;
	/* SRV: the target's own questions failed (DNS down): the
	 * addresses it had are kept (rlb_membership_apply()). */
	bool glue_failed;
	enum rlb_replica_source source;
	uint8_t view; /* the question that gave it (views[] below) */
};

/* One question of a refresh, for replicalbctl -v and warnings. */
struct rlb_dns_source_view {
	const char *name; /* the cluster's srv or dns string */
	uint16_t type;	  /* RLB_DNS_T_* */
	enum rlb_dns_outcome outcome;
	size_t nrecords;
	uint32_t ttl;
	char why[96]; /* "3 records", "NXDOMAIN", "no answer (...)" */
};

/* The members one refresh found. */
struct rlb_members_answer {
	enum rlb_dns_outcome outcome; /* of the whole refresh */
	size_t n, cap;
	struct rlb_member *m;
	uint32_t ttl; /* smallest TTL of the records; UINT32_MAX: none */
	size_t nviews;
	struct rlb_dns_source_view views[3]; /* srv; dns A, AAAA */
};

/*
 * Ask cluster c's sources now (no lock is needed or should be held: it
 * waits for DNS). Its questions are asked together (srv; dns A and
 * AAAA), then, together again, the addresses of the SRV targets that the
 * answer gave none for and the reverse names of dns members for the
 * hostname policies, these by deadline_ms at the latest (monotonic;
 * INT64_MAX: none): a target not resolved in time is resolved as any
 * replica host. Fills *a (free with rlb_members_answer_free()): its
 * outcome and members in answer order, each (host, port) once. Returns
 * 0, or -ENOMEM (outcome RLB_DNS_FAILED). Keeps errno.
 */
int rlb_members_ask(const struct rlb_cluster *c,
		    const struct rlb_dns_client *dns, int64_t deadline_ms,
		    struct rlb_members_answer *a);
void rlb_members_answer_free(struct rlb_members_answer *a);
/* Whether a has a member of (host, port) already. */
bool rlb_members_has(const struct rlb_members_answer *a, const char *host,
		     int port);

/*
 * The membership in force of one DNS cluster, kept by its owner across
 * snapshots and reloads (the runtime's, under its lock; replicalbctl's).
 */
struct rlb_membership {
	uint64_t cluster;	       /* rlb_cluster.name_hash */
	struct rlb_members_answer now; /* the members in force */
	bool answered;		       /* `now` came from DNS at all */
	int64_t answered_ms;	       /* monotonic: when `now` arrived */
	int64_t asked_ms;	       /* latest refresh, good or not */
	int64_t due_ms;		       /* the next refresh */
	int64_t nx_since_ms;	       /* NXDOMAIN since (0: not) */
	enum rlb_dns_outcome outcome;  /* of the latest refresh */
	size_t nviews;		       /* its questions */
	struct rlb_dns_source_view views[3];
	unsigned failures; /* failed refreshes in a row (the back-off) */
	bool shared;	   /* `now` came from the host's shared answer */
	int64_t warned_ms; /* rate limit of the warning */
	enum rlb_dns_outcome warned_outcome;
};

void rlb_membership_init(struct rlb_membership *ms,
			 const struct rlb_cluster *c);
void rlb_membership_clear(struct rlb_membership *ms);
/*
 * Take refresh answer a (emptied) into ms at now_ms (design.md §15):
 * records replace the members; a failure, a malformed or an empty answer
 * keeps the last good ones, with one rate-limited warning; NXDOMAIN
 * keeps them for dns_hold_nx seconds, then empties them. Sets the next
 * refresh: min(dns_cache_ttl, record TTL), at least dns_refresh_floor_ms;
 * after a failed or malformed one, a back-off: the floor, doubled with
 * every failure in a row, at most max(floor, dns_cache_ttl). An SRV
 * member whose target's own questions failed keeps the addresses it had.
 * Returns whether the members changed (a new snapshot is due).
 */
bool rlb_membership_apply(struct rlb_membership *ms,
			  const struct rlb_cluster *c,
			  struct rlb_members_answer *a, int64_t now_ms);
/*
 * Append the members of ms (NULL: none) to c, a cluster of a config
 * copy with its config replicas only, as replicas of their source; a
 * member with a config replica's identity is left out. 0 or -ENOMEM.
 */
int rlb_members_add(struct rlb_cluster *c, const struct rlb_membership *ms);

/*
 * The host's shared answer of a DNS cluster (design.md §15.6): the
 * members in force as one text file that every process of the state can
 * read. rlb_members_encode() writes answer `now` (or, with nxdomain, the
 * word that DNS said there are none) of cluster hash `cluster`, answered
 * at wall_ms, into *out (malloc'd, *outlen bytes): 0 or -ENOMEM.
 * rlb_members_decode() reads one back into *a (free with
 * rlb_members_answer_free()), checking everything: its hash, the
 * cluster, every field, each member once, a time no more than a minute
 * ahead of now_wall_ms. 0, -EINVAL (to be set aside) or -ENOMEM.
 */
int rlb_members_encode(const struct rlb_members_answer *now, bool nxdomain,
		       uint64_t cluster, int64_t wall_ms, char **out,
		       size_t *outlen);
int rlb_members_decode(const char *buf, size_t len, uint64_t cluster,
		       int64_t now_wall_ms, struct rlb_members_answer *a,
		       bool *nxdomain, int64_t *wall_ms);
/*
 * Reading the shared answer: the side file STATE_DIR/NAME.members (under
 * the state files' rules), at most RLB_SHARED_MAX_BYTES, used while DNS
 * cannot be asked when no older than RLB_SHARED_MAX_AGE_MS. Its key is of
 * the cluster's name and sources: another config's sources for the same
 * name are another answer.
 */
#define RLB_SHARED_MAX_BYTES  (1u << 20)
#define RLB_SHARED_MAX_AGE_MS (3600 * 1000)
#define RLB_SHARED_EXT	      "members"
struct rlb_shared_answer {
	bool ok;		 /* a valid answer was read into `a` */
	bool nx;		 /* of NXDOMAIN */
	int64_t wall_ms, age_ms; /* when it was answered, and its age */
	struct rlb_members_answer a;
};
uint64_t rlb_members_shared_key(uint64_t name_hash, const char *srv,
				const char *dns);
/*
 * Cluster `name`'s shared answer of key in dir into *sh (sh->ok false:
 * none, or not valid, and then set aside with set_aside). Free sh->a
 * with rlb_members_answer_free().
 */
void rlb_members_shared_read(const char *dir, const char *name, uint64_t key,
			     bool set_aside, struct rlb_shared_answer *sh);
/* How long an answer with TTL ttl is fresh: the refresh interval. */
int64_t rlb_membership_fresh_ms(const struct rlb_cluster *c, uint32_t ttl);
/*
 * What a process does with shared answer sh of cluster c (design.md
 * §15.6), the one rule for every product: had_wall_ms is the wall time of
 * the shared answer its members came from (0: none), answered whether it
 * has members from an answer at all.
 *	FRESH	another process answered since, and it is fresh: take it,
 *		ask DNS nothing;
 *	STALE	nothing of its own yet, and it is no older than
 *		RLB_SHARED_MAX_AGE_MS: take it now, and ask DNS at once;
 *	NONE	ask DNS (no answer, or too old, or not newer than ours).
 */
enum rlb_shared_use {
	RLB_SHARED_NONE,
	RLB_SHARED_FRESH,
	RLB_SHARED_STALE,
};
enum rlb_shared_use rlb_shared_answer_use(const struct rlb_shared_answer *sh,
					  const struct rlb_cluster *c,
					  int64_t had_wall_ms, bool answered);
/*
 * Take decoded shared answer a (emptied) into ms at now_ms as an answer
 * age_ms old: its members (or none, for NXDOMAIN), the next refresh due
 * when it would have been for its writer (now or past: stale).
 */
void rlb_membership_adopt(struct rlb_membership *ms,
			  const struct rlb_cluster *c,
			  struct rlb_members_answer *a, int64_t now_ms,
			  int64_t age_ms);

#endif /* RLB_ENGINE_H */
