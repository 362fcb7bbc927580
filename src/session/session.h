/* session/session.h - the layer between the engine and the products
 * (preload, the NSS module to come; design.md §10.1, §13): what a
 * process keeps whatever product it runs. The snapshot in force and a
 * per-thread cache of it, hot reload with the keep-last-good rule, DNS
 * membership and its refresh, the local hostname, and the one fork
 * handler with a registry of the products' locks. A product passes what
 * differs: how its snapshots use the shared state, and what it sets up
 * at the start (rlb_session_product). */
#ifndef RLB_SESSION_H
#define RLB_SESSION_H

#include "engine/engine.h"

/*
 * What the product linked with the session passes it; each product
 * defines the one object (the preload: runtime.c).
 * - mode: how every snapshot attaches the shared state (the preload
 *   counts, an NSS module only takes turns: RLB_STATE_TURN).
 * - init: called once at the session's start, before the config is
 *   loaded and before the fork handler is installed: the place to
 *   register fork hooks (rlb_session_atfork()) and the product's own
 *   wiring. May be NULL.
 * - local_fqdn: how the host's name is found for the hostname policies
 *   (NULL: rlb_local_fqdn(), which asks getaddrinfo; an NSS module must
 *   not re-enter NSS and passes its own).
 */
struct rlb_session_product {
	enum rlb_state_mode mode;
	void (*init)(void);
	void (*local_fqdn)(char *buf, size_t len);
};
extern const struct rlb_session_product rlb_session_product;

/*
 * The snapshot in force with a reference held, or NULL when disabled
 * (REPLICALB_DISABLE) or unconfigured. The first call starts the session;
 * later ones check for a changed file at most about once a second, one
 * thread at a time. Takes no lock unless a reload has published a new
 * snapshot. Release with rlb_session_release().
 */
struct rlb_snapshot *rlb_session_acquire(void);
void rlb_session_release(struct rlb_snapshot *snap);
/*
 * rlb_session_acquire() when it would take no lock and make no system
 * call (the session started, no reload check due, this thread's cache
 * current): *settled true, and the snapshot or NULL as acquire gives.
 * Else *settled false, NULL, and nothing done: the caller blocks signals
 * (the NSS module) and calls rlb_session_acquire().
 */
struct rlb_snapshot *rlb_session_acquire_settled(bool *settled);
/*
 * The snapshot in force with a reference of the caller's (put it with
 * rlb_snapshot_put()), without a reload check and without waiting for
 * any lock: for exit() and exec(), which may come from a signal handler.
 * NULL when the session never started, or a lock is held.
 */
struct rlb_snapshot *rlb_session_current(void);
/*
 * This host's FQDN (design.md §3.2), computed once per process with
 * rlb_local_fqdn(). Never NULL.
 */
const char *rlb_session_fqdn(void);
/*
 * Cluster c (of *snap, held) has DNS sources: refresh its members when
 * due (design.md §15). The very first answer is waited for (no longer
 * than glibc's lookup of one name may take); later ones, and every one
 * after a failed first, are asked in the background while resolution
 * goes on with the members in force. Not a cancellation point: a cancel
 * waits until it returns. Returns the cluster to answer from, in *snap
 * (which may have been replaced by the snapshot with the first members),
 * or NULL with no reference held. Keeps errno.
 */
struct rlb_cluster *rlb_session_members(struct rlb_cluster *c,
					struct rlb_snapshot **snap);
/*
 * first_members.c: the members each DNS cluster of cfg (a loaded config,
 * not yet a snapshot's) starts with in a new process of the host, added
 * to it, for a tool that runs once (replicalbctl): the host's shared
 * answer while it is fresh; else its sources asked of dns (NULL: the
 * stub) once, and a stale shared answer only if they fail, as a process
 * would ride on it. Nothing is written: the shared answer is left for
 * the library's processes. One entry per DNS cluster, in config order,
 * *n of them (free with rlb_session_first_members_free()); NULL when
 * out of memory.
 */
struct rlb_first_members {
	struct rlb_membership ms;
	int64_t shared_age_ms;	/* the shared answer used was this old; -1 */
	int64_t skipped_age_ms; /* DNS asked over one this old (stale); -1 */
	bool dns_failed;	/* DNS failed: the stale shared answer used */
};
struct rlb_first_members *
rlb_session_first_members(struct rlb_config *cfg,
			  const struct rlb_dns_client *dns, size_t *n);
void rlb_session_first_members_free(struct rlb_first_members *f, size_t n);
/* Test seam: memberships ask dns from now on (NULL: the library's stub). */
void rlb_session_set_dns(const struct rlb_dns_client *dns);

/*
 * The library's one lock order (design.md §13.4), as the keys of
 * rlb_session_atfork(): a thread holding a lock never takes one of a
 * smaller key. The session's own locks are MEMBERS and CONFIG; the
 * preload's the others.
 *
 *	LEDGER		the ledger's rows claimed for the child (track_ledger.c;
 *			first: it takes a snapshot, which may take cfg_lock)
 *	MEMBERS		members_lock (session.c)
 *	CONFIG		cfg_lock (session.c)
 *	HOSTENT		the static hostent lock (resolve.c)
 *	DNSCACHE	the DNS cache lock (dnscache.c)
 *	TRACK		replace_lock (track_addrs.c), then moves_lock, the
 *			dropped attempts (track_pending.c)
 */
enum rlb_fork_order {
	RLB_FORK_LEDGER = 10,
	RLB_FORK_MEMBERS = 20,
	RLB_FORK_CONFIG = 30,
	RLB_FORK_HOSTENT = 40,
	RLB_FORK_DNSCACHE = 50,
	RLB_FORK_TRACK = 60,
};
/*
 * Add a product's lock (or other fork step) to the fork handler: prepare
 * runs before fork() in ascending order, parent and child after it in
 * descending order; any may be NULL. Only from rlb_session_product.init.
 */
void rlb_session_atfork(int order, void (*prepare)(void), void (*parent)(void),
			void (*child)(void));

#endif /* RLB_SESSION_H */
