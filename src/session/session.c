/* session.c - what every product of the engine keeps for a process
 * (design.md §10.1, §13): the snapshot in force and each thread's cache
 * of it, hot reload with the keep-last-good rule, DNS membership and its
 * refresh, the local hostname, and the process's one fork handler, with
 * a registry where each product adds its own locks in their order. The
 * product (rlb_session_product) says how its snapshots use the state and
 * what it sets up at the start. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>
#include <unistd.h>

#include "session/session.h"

/* How often the resolution path may stat() the config files. */
#define RELOAD_INTERVAL_MS 1000

/*
 * The snapshot in force, holding one reference of its own. A reload
 * builds the new snapshot outside cfg_lock and swaps it in under it;
 * threads pick it up through their caches below. The last reference
 * frees.
 */
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rlb_snapshot *_Atomic current;
static bool disabled;
static atomic_llong next_check_ms;
static atomic_flag reload_busy = ATOMIC_FLAG_INIT;
/*
 * The files of the last broken config (empty if it was not broken): it is
 * reported once, and parsed again only once one of them changes. Touched
 * only by the thread holding reload_busy (or by init).
 */
static struct rlb_config_files broken;

/*
 * DNS membership (design.md §15). When the loaded config has clusters
 * with srv or dns sources, it stays here as `base`, never attached, and
 * each snapshot is a copy of it with the members in force added. The
 * memberships outlive snapshots and reloads (matched by cluster name).
 * members_lock guards base, the memberships and their refresh flags, and
 * is held while a snapshot is built from them and published, so that
 * snapshots are published in the order their members were; never across
 * a DNS query.
 */
static pthread_mutex_t members_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t members_cond = PTHREAD_COND_INITIALIZER;
static struct rlb_config *base;
struct session_membership {
	struct rlb_membership ms;
	bool busy;	 /* a refresh is asking DNS */
	bool asked;	 /* a refresh has ended: no resolution waits again */
	int64_t wall_ms; /* when the members in force were answered (wall
			  * clock, ms; 0: never), here or by another
			  * process of the host (the shared answer) */
};
static struct session_membership *memberships;
static size_t nmemberships;
/* How memberships ask DNS: the library's own stub (tests: their own). */
static const struct rlb_dns_client *_Atomic dns_client = &rlb_dns_stub;
/*
 * The earliest refresh due of a membership not being refreshed: before
 * it, a resolution of a DNS cluster with members takes no lock at all.
 * Written under members_lock (recompute_due()).
 */
static _Atomic int64_t members_due;

/* members_due from the memberships. Under members_lock. */
static void recompute_due(void)
{
	int64_t due = INT64_MAX;

	for (size_t i = 0; i < nmemberships; i++)
		if (!memberships[i].busy && memberships[i].ms.due_ms < due)
			due = memberships[i].ms.due_ms;
	atomic_store_explicit(&members_due, due, memory_order_release);
}

static const char *known_fqdn(void);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_bool init_done;

/*
 * Each thread caches the snapshot it last used, holding one reference,
 * and only takes cfg_lock when a reload has bumped cfg_gen: resolving a
 * name takes no lock at all. tls_depth counts acquires not yet released,
 * so the cache never changes under a caller still using it.
 */
static atomic_uint cfg_gen = 1;
static RLB_TLS struct rlb_snapshot *tls_snap;
static RLB_TLS unsigned tls_gen;
static RLB_TLS unsigned tls_depth;
static pthread_key_t tls_key;
static bool tls_key_ok;

/*
 * A thread that ends gives back the reference its cache held, and forgets
 * it: a pthread key destructor of the program's that runs later may
 * resolve again and must not find a snapshot it no longer holds.
 */
static void thread_cache_destroy(void *snap)
{
	if (snap == tls_snap) {
		tls_snap = NULL;
		tls_gen = 0;
	}
	rlb_snapshot_put(snap);
}

/*
 * Fork: the process's one pthread_atfork handler, so that every lock the
 * library owns is held across fork() in one order and nothing is copied
 * into a child half-changed. The products add their locks to it, each
 * with its place in the one lock order of the library (session.h, the
 * RLB_FORK_* keys; a thread holding a later lock never takes an earlier
 * one). Prepare runs in that order, parent and child in the reverse.
 * Health state (state/) takes no lock at all. No thread of the library's
 * ever holds a lock of libc's at a fork: its DNS refreshes use the
 * library's own stub resolver, never libc's (design.md §13.4).
 */
struct fork_hook {
	int order;
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
};
#define FORK_HOOKS_MAX 16
static struct fork_hook fork_hooks[FORK_HOOKS_MAX];
static size_t nfork_hooks;

void rlb_session_atfork(int order, void (*prepare)(void), void (*parent)(void),
			void (*child)(void))
{
	size_t i = nfork_hooks;

	if (nfork_hooks == FORK_HOOKS_MAX)
		return;
	/* Kept sorted by order; registered at the start, by one thread. */
	for (; i > 0 && fork_hooks[i - 1].order > order; i--)
		fork_hooks[i] = fork_hooks[i - 1];
	fork_hooks[i] = (struct fork_hook){order, prepare, parent, child};
	nfork_hooks++;
}

static void atfork_prepare(void)
{
	for (size_t i = 0; i < nfork_hooks; i++)
		if (fork_hooks[i].prepare)
			fork_hooks[i].prepare();
}

static void atfork_parent(void)
{
	for (size_t i = nfork_hooks; i-- > 0;)
		if (fork_hooks[i].parent)
			fork_hooks[i].parent();
}

static void atfork_child(void)
{
	for (size_t i = nfork_hooks; i-- > 0;)
		if (fork_hooks[i].child)
			fork_hooks[i].child();
}

static void members_fork_lock(void)
{
	pthread_mutex_lock(&members_lock);
}

static void members_fork_unlock(void)
{
	pthread_mutex_unlock(&members_lock);
}

/* In the child: no refresh goes on (the threads asking DNS stayed in
 * the parent), nor a reload; the random source is the child's own. */
static void members_fork_child(void)
{
	for (size_t i = 0; i < nmemberships; i++)
		memberships[i].busy = false;
	recompute_due();
	pthread_mutex_unlock(&members_lock);
	atomic_flag_clear(&reload_busy);
	rlb_util_after_fork_child();
}

static void cfg_fork_lock(void)
{
	pthread_mutex_lock(&cfg_lock);
}

static void cfg_fork_unlock(void)
{
	pthread_mutex_unlock(&cfg_lock);
}

static void apply_logging(const struct rlb_config *cfg)
{
	enum rlb_log_level level = RLB_LOG_WARNING;
	const char *env = rlb_env(RLB_ENV_LOG_LEVEL);

	if (cfg) {
		rlb_log_configure(cfg->log_level, cfg->log_target);
		return;
	}
	if (env)
		rlb_log_level_parse(env, &level);
	rlb_log_configure(level, RLB_LOG_STDERR);
}

/* Report a broken config once: its first error and how many follow. */
static void report_broken(const struct rlb_diag *diag, bool keeping)
{
	if (diag->n == 0)
		return;
	rlb_log(RLB_LOG_ERROR, "%s%s%s", diag->msgs[0],
		diag->n > 1 ? " (and more errors: run replicalbctl check)" : "",
		keeping ? "; keeping the last good config"
			: "; passing everything through");
}

/* Make snap the snapshot in force; the one it replaces, to put. */
static struct rlb_snapshot *publish(struct rlb_snapshot *snap)
{
	struct rlb_snapshot *old;

	pthread_mutex_lock(&cfg_lock);
	old = current;
	current = snap;
	atomic_fetch_add_explicit(&cfg_gen, 1, memory_order_release);
	pthread_mutex_unlock(&cfg_lock);
	return old;
}

static bool has_dns_clusters(const struct rlb_config *cfg)
{
	for (size_t i = 0; i < cfg->nclusters; i++)
		if (cfg->clusters[i].srv || cfg->clusters[i].dns)
			return true;
	return false;
}

static bool same_string(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The membership of cluster name_hash, or NULL. Under members_lock. */
static struct session_membership *membership_of(uint64_t name_hash)
{
	for (size_t i = 0; i < nmemberships; i++)
		if (memberships[i].ms.cluster == name_hash)
			return &memberships[i];
	return NULL;
}

/* The cluster of base with name_hash, or NULL. Under members_lock. */
static const struct rlb_cluster *base_cluster(uint64_t name_hash)
{
	for (size_t i = 0; base && i < base->nclusters; i++)
		if (base->clusters[i].name_hash == name_hash)
			return &base->clusters[i];
	return NULL;
}

/*
 * Make cfg (NULL: none) the base, with a membership for each of its DNS
 * clusters: the one it had, when its sources are the same (a reload keeps
 * the members in force), else a new one. Under members_lock. 0, or
 * -ENOMEM with nothing changed and cfg freed.
 */
static int adopt_base(struct rlb_config *cfg)
{
	struct session_membership *next = NULL;
	size_t n = 0;

	for (size_t i = 0; cfg && i < cfg->nclusters; i++)
		n += cfg->clusters[i].srv || cfg->clusters[i].dns;
	if (n && !(next = calloc(n, sizeof(*next)))) {
		rlb_config_free(cfg);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; cfg && i < cfg->nclusters; i++) {
		const struct rlb_cluster *c = &cfg->clusters[i];
		struct session_membership *had, *m = &next[n];
		const struct rlb_cluster *was;

		if (!c->srv && !c->dns)
			continue;
		n++;
		/* The base still in force names the sources each answer is
		 * of; a cluster that asks the same keeps its members. */
		had = membership_of(c->name_hash);
		was = base_cluster(c->name_hash);
		if (had && was && same_string(was->srv, c->srv) &&
		    same_string(was->dns, c->dns)) {
			*m = *had;
			memset(had, 0, sizeof(*had));
			continue;
		}
		rlb_membership_init(&m->ms, c);
	}
	for (size_t i = 0; i < nmemberships; i++)
		rlb_membership_clear(&memberships[i].ms);
	free(memberships);
	memberships = next;
	nmemberships = n;
	recompute_due();
	rlb_config_free(base);
	base = cfg;
	/* A refresh that was asking for a cluster gone is answered into
	 * nothing; whoever waits on one must look again. */
	pthread_cond_broadcast(&members_cond);
	return 0;
}

/*
 * A snapshot of base with the members in force. Under members_lock.
 * NULL when out of memory.
 */
static struct rlb_snapshot *members_snapshot(bool prune,
					     const char *(*fqdn)(void))
{
	struct rlb_config *cfg = rlb_config_clone(base, true);

	if (!cfg)
		return NULL;
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];
		struct session_membership *m;

		if (!c->srv && !c->dns)
			continue;
		m = membership_of(c->name_hash);
		if (rlb_members_add(c, m ? &m->ms : NULL) < 0) {
			rlb_config_free(cfg);
			return NULL;
		}
	}
	return rlb_snapshot_new(cfg, fqdn, rlb_session_product.mode, prune);
}

/*
 * Load the config from the environment's lookup; on success make it the
 * current one. Keeps the current one on any failure.
 */
static void load_config(bool initial)
{
	struct rlb_config_source src;
	struct rlb_diag diag = {0};
	struct rlb_config *cfg = NULL;
	struct rlb_snapshot *snap, *old;
	int rc;

	rlb_config_source_from_env(&src);
	rlb_config_files_free(&broken);
	rc = rlb_config_load_ex(&src, &cfg, &diag, &broken);
	if (rc == -ENOENT) {
		/* No config: pass through silently (keep a running one). */
		goto out_free_diag;
	}
	if (rc < 0) {
		report_broken(&diag, !initial && current);
		goto out_free_diag;
	}
	/*
	 * Only a reload drops the state of replicas that left the config: a
	 * fresh process whose apps.d overlay differs from another program's
	 * must not wipe that program's replicas.
	 */
	apply_logging(cfg);
	pthread_mutex_lock(&members_lock);
	if (has_dns_clusters(cfg)) {
		if (adopt_base(cfg) < 0)
			snap = NULL;
		else
			snap = members_snapshot(!initial, rlb_session_fqdn);
	} else {
		adopt_base(NULL);
		snap = rlb_snapshot_new(cfg, rlb_session_fqdn,
					rlb_session_product.mode, !initial);
	}
	if (!snap) {
		pthread_mutex_unlock(&members_lock);
		rlb_log(RLB_LOG_ERROR, "%s: out of memory preparing config",
			src.path);
		goto out_free_diag;
	}
	old = publish(snap);
	pthread_mutex_unlock(&members_lock);
	if (old) {
		rlb_log(RLB_LOG_INFO, "reloaded %s", src.path);
		rlb_snapshot_put(old);
	}
out_free_diag:
	rlb_diag_free(&diag);
}

static void session_init(void)
{
	enum rlb_log_level level;
	int saved = errno;
	/* Cancelled in the load (a file's open or read), pthread_once would
	 * run this again: a second fork handler, whose prepare would take
	 * members_lock twice, and a second key. */
	int cancel = rlb_cancel_off();
	const char *off = rlb_env(RLB_ENV_DISABLE);

	disabled = off && strcmp(off, "0") != 0;
	if (disabled)
		goto out;
	rlb_session_atfork(RLB_FORK_MEMBERS, members_fork_lock,
			   members_fork_unlock, members_fork_child);
	rlb_session_atfork(RLB_FORK_CONFIG, cfg_fork_lock, cfg_fork_unlock,
			   cfg_fork_unlock);
	if (rlb_session_product.init)
		rlb_session_product.init();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	tls_key_ok = pthread_key_create(&tls_key, thread_cache_destroy) == 0;
	apply_logging(NULL);
	if (rlb_env(RLB_ENV_LOG_LEVEL) &&
	    rlb_log_level_parse(rlb_env(RLB_ENV_LOG_LEVEL), &level) < 0)
		rlb_log(RLB_LOG_WARNING,
			"%s: unknown log level \"%s\"; valid: "
			"none, error, warning, info, debug",
			rlb_env_vars[RLB_ENV_LOG_LEVEL].name,
			rlb_env(RLB_ENV_LOG_LEVEL));
	load_config(true);
	atomic_store(&next_check_ms, rlb_monotonic_ms() + RELOAD_INTERVAL_MS);
out:
	atomic_store_explicit(&init_done, true, memory_order_release);
	rlb_cancel_restore(cancel);
	errno = saved;
}

/* At most one thread at a time, at most once a second, looks for a
 * changed config file; others go on with the snapshot they have. */
static void maybe_reload(int64_t now)
{
	bool changed;
	int saved, cancel;

	if (now < atomic_load_explicit(&next_check_ms, memory_order_relaxed))
		return;
	if (atomic_flag_test_and_set(&reload_busy))
		return;
	/* The check (stat(), a load) is the only thing here errno sees. */
	saved = errno;
	/* A thread cancelled in the load (open, read, close) would keep
	 * reload_busy for good: no reload ever again. */
	cancel = rlb_cancel_off();
	atomic_store(&next_check_ms, now + RELOAD_INTERVAL_MS);
	pthread_mutex_lock(&cfg_lock);
	changed = !current || rlb_config_changed(current->cfg);
	pthread_mutex_unlock(&cfg_lock);
	/* A broken version is parsed once, not every second. */
	if (changed && !(broken.n && !rlb_config_files_changed(&broken)))
		load_config(false);
	atomic_flag_clear(&reload_busy);
	rlb_cancel_restore(cancel);
	errno = saved;
}

/*
 * Refresh this thread's cached snapshot when a reload published a new
 * one. Never while the thread still uses the old one (nested use).
 */
static void refresh_thread_cache(void)
{
	struct rlb_snapshot *old = tls_snap;

	pthread_mutex_lock(&cfg_lock);
	tls_snap = current;
	if (tls_snap)
		rlb_snapshot_get(tls_snap);
	tls_gen = atomic_load_explicit(&cfg_gen, memory_order_relaxed);
	pthread_mutex_unlock(&cfg_lock);
	if (tls_key_ok)
		pthread_setspecific(tls_key, tls_snap);
	rlb_snapshot_put(old);
}

/* This thread's cached snapshot, held (NULL: unconfigured). */
static struct rlb_snapshot *hold_cached(int64_t now)
{
	if (!tls_snap)
		return NULL;
	/* The outermost use's reading serves the whole of it. */
	if (tls_depth++ == 0)
		rlb_op_clock_begin(now);
	return tls_snap;
}

struct rlb_snapshot *rlb_session_acquire(void)
{
	unsigned gen;
	int64_t now;
	int saved;

	if (!atomic_load_explicit(&init_done, memory_order_acquire)) {
		saved = errno;
		pthread_once(&init_once, session_init);
		errno = saved;
	}
	if (disabled)
		return NULL;
	now = rlb_monotonic_ms();
	maybe_reload(now);
	gen = atomic_load_explicit(&cfg_gen, memory_order_acquire);
	if (tls_gen != gen && tls_depth == 0) {
		saved = errno;
		refresh_thread_cache();
		errno = saved;
	}
	return hold_cached(now);
}

struct rlb_snapshot *rlb_session_acquire_settled(bool *settled)
{
	int64_t now;

	*settled = false;
	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		return NULL;
	if (disabled) {
		*settled = true;
		return NULL;
	}
	now = rlb_monotonic_ms();
	if (now >= atomic_load_explicit(&next_check_ms, memory_order_relaxed))
		return NULL;
	if (tls_gen != atomic_load_explicit(&cfg_gen, memory_order_acquire) &&
	    tls_depth == 0)
		return NULL;
	*settled = true;
	return hold_cached(now);
}

void rlb_session_release(struct rlb_snapshot *snap)
{
	if (snap && tls_depth > 0 && --tls_depth == 0)
		rlb_op_clock_end();
}

struct rlb_snapshot *rlb_session_current(void)
{
	struct rlb_snapshot *snap;

	if (!atomic_load_explicit(&init_done, memory_order_acquire) || disabled)
		return NULL;
	/* No reload check, and no wait: exit() may come from a signal
	 * handler that interrupted a holder of cfg_lock. */
	if (pthread_mutex_trylock(&cfg_lock) != 0)
		return NULL;
	snap = atomic_load(&current);
	if (snap)
		rlb_snapshot_get(snap);
	pthread_mutex_unlock(&cfg_lock);
	return snap;
}

void rlb_session_set_dns(const struct rlb_dns_client *dns)
{
	atomic_store(&dns_client, dns ? dns : &rlb_dns_stub);
}

/*
 * Refresh the membership of cluster name_hash: take the host's shared
 * answer when it is newer than ours and fresh (or, while this process has
 * none, even stale: design.md §15.6), else ask its sources without any
 * lock; take the answer in, publish a snapshot when the members changed,
 * and share an answer DNS gave. The caller set the membership busy; this
 * clears it. A resolution waits for it (`waited`): its second round of
 * questions ends by the time glibc's lookup of one name may take from
 * the start (§15.3). Returns whether the members in force are stale (a
 * refresh is due at once).
 */
static bool refresh_membership(uint64_t name_hash, bool waited)
{
	const struct rlb_dns_client *dns = atomic_load(&dns_client);
	int64_t deadline = INT64_MAX, had_wall = 0, now;
	struct rlb_cluster q = {0};
	struct rlb_members_answer a;
	struct rlb_shared_answer sh;
	struct session_membership *m;
	const struct rlb_cluster *c;
	struct rlb_snapshot *snap = NULL, *old = NULL;
	char dir[PATH_MAX], *state_dir = NULL, *share = NULL, *name = NULL;
	bool answered = false, use_shared, stale, changed = false;
	enum rlb_shared_use use;
	size_t share_len = 0;
	uint64_t key;

	pthread_mutex_lock(&members_lock);
	c = base_cluster(name_hash);
	m = membership_of(name_hash);
	if (c && m) {
		/* What the question needs, kept while base may change. */
		q.s = c->s;
		q.port = c->port;
		q.srv = c->srv ? strdup(c->srv) : NULL;
		q.dns = c->dns ? strdup(c->dns) : NULL;
		name = c->name ? strdup(c->name) : NULL;
		state_dir = base->state_dir ? strdup(base->state_dir) : NULL;
		answered = m->ms.answered;
		had_wall = m->wall_ms;
	}
	pthread_mutex_unlock(&members_lock);
	rlb_health_state_dir(&(struct rlb_config){.state_dir = state_dir}, dir,
			     sizeof(dir));
	memset(&sh, 0, sizeof(sh));
	/* The shared answer is of these sources: another config's sources
	 * for the same name are another answer. */
	key = rlb_members_shared_key(name_hash, q.srv, q.dns);
	if (name)
		rlb_members_shared_read(dir, name, key, true, &sh);
	/* Fresh: no DNS; stale while we have nothing: now, DNS after. */
	use = rlb_shared_answer_use(&sh, &q, had_wall, answered);
	use_shared = use != RLB_SHARED_NONE;
	stale = use == RLB_SHARED_STALE;
	if (!use_shared && waited && dns == &rlb_dns_stub)
		deadline = rlb_monotonic_ms() + rlb_dns_stub_budget_ms();
	memset(&a, 0, sizeof(a));
	a.outcome = RLB_DNS_FAILED;
	if (!use_shared && (q.srv || q.dns))
		rlb_members_ask(&q, dns, deadline, &a);
	pthread_mutex_lock(&members_lock);
	c = base_cluster(name_hash);
	m = membership_of(name_hash);
	now = rlb_monotonic_ms();
	/* A reload that changed the sources meanwhile made a new
	 * membership, which this answer (of the old ones) is not for, nor
	 * is its busy flag ours to clear. */
	if (!c || !m || !same_string(c->srv, q.srv) ||
	    !same_string(c->dns, q.dns))
		m = NULL;
	if (m && use_shared) {
		rlb_membership_adopt(&m->ms, c, &sh.a, now, sh.age_ms);
		m->wall_ms = sh.wall_ms;
		changed = true;
	} else if (m) {
		changed = rlb_membership_apply(&m->ms, c, &a, now);
	}
	if (changed && (snap = members_snapshot(false, known_fqdn)))
		old = publish(snap);
	else if (changed)
		/* Out of memory: the members are asked again. */
		m->ms.due_ms = 0;
	/* What DNS said, for every process of the host. */
	if (m && !use_shared && m->ms.answered &&
	    (m->ms.outcome == RLB_DNS_OK ||
	     (m->ms.outcome == RLB_DNS_NXDOMAIN && !m->ms.now.n))) {
		m->wall_ms = rlb_now() * 1000;
		if (rlb_members_encode(&m->ms.now,
				       m->ms.outcome == RLB_DNS_NXDOMAIN, key,
				       m->wall_ms, &share, &share_len) < 0)
			share = NULL;
	}
	rlb_members_answer_free(&a);
	rlb_members_answer_free(&sh.a);
	if (m)
		m->busy = false, m->asked = true;
	stale = stale && m && m->ms.due_ms <= now;
	recompute_due();
	pthread_cond_broadcast(&members_cond);
	pthread_mutex_unlock(&members_lock);
	rlb_snapshot_put(old);
	if (share) {
		rlb_health_side_write(dir, name, RLB_SHARED_EXT, share,
				      share_len);
		free(share);
	}
	free(q.srv);
	free(q.dns);
	free(name);
	free(state_dir);
	return stale;
}

static void *refresh_thread(void *arg)
{
	refresh_membership((uint64_t)(uintptr_t)arg, false);
	return NULL;
}

/*
 * Refresh in a thread of its own, which blocks every signal (a program's
 * handler must never run on it) and ends when done. False when no thread
 * could be made.
 */
static bool refresh_in_background(uint64_t name_hash)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	bool ok;

	_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t),
		       "a name hash fits a thread argument");
	sigfillset(&all);
	/* Without the mask, no thread: a handler of the program's must
	 * never run on ours (and `old` would be nothing to put back). */
	if (rlb_libc()->pthread_sigmask(SIG_SETMASK, &all, &old) != 0)
		return false;
	ok = pthread_attr_init(&attr) == 0;
	if (ok) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		ok = rlb_libc()->pthread_create(&t, &attr, refresh_thread,
						(void *)(uintptr_t)name_hash) ==
		     0;
		pthread_attr_destroy(&attr);
	}
	rlb_libc()->pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/*
 * Wait on members_cond (members_lock held) until the first refresh of
 * name_hash ends, at most until deadline (monotonic ms): bounded even if
 * the asking thread were stuck. The membership again, or NULL.
 */
static struct session_membership *wait_first(uint64_t name_hash,
					     int64_t deadline)
{
	struct session_membership *m = membership_of(name_hash);

	while (m && m->busy && !m->asked) {
		struct timespec ts;
		int64_t now = rlb_monotonic_ms();

		if (now >= deadline)
			break;
		/* The seam's clock, as rlb_monotonic_ms() reads it. */
		rlb_libc()->now(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (deadline - now) / 1000;
		ts.tv_nsec += (deadline - now) % 1000 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_clockwait(&members_cond, &members_lock,
				       CLOCK_MONOTONIC, &ts);
		m = membership_of(name_hash);
	}
	return m;
}

struct rlb_cluster *rlb_session_members(struct rlb_cluster *c,
					struct rlb_snapshot **snap)
{
	uint64_t name_hash = c->name_hash;
	char name[RLB_MAX_HOST + 1];
	struct session_membership *m;
	bool first = false, background = false;
	int saved = errno, cancel;
	int64_t now = rlb_op_monotonic_ms(), wait_ms;

	/* Nothing due (or all in flight), and members to answer with. */
	if (c->nreplicas &&
	    now < atomic_load_explicit(&members_due, memory_order_acquire))
		return c;
	/*
	 * No cancellation from here on: a program thread cancelled while it
	 * waits for DNS, or asks, would leave members_lock held or the
	 * membership busy for good (issue 20). The cancel acts at the
	 * program's next cancellation point, as one in glibc's own lookup
	 * does once the lookup is done.
	 */
	cancel = rlb_cancel_off();
	pthread_mutex_lock(&members_lock);
	m = membership_of(name_hash);
	if (m && !m->ms.answered && !m->asked) {
		/* Never asked: the very first resolution waits for the
		 * first answer, one thread asking, the others waiting. */
		if (m->busy) {
			/* Bounded by the asker's own bound, and a second;
			 * resolv.conf is read with members_lock free. */
			pthread_mutex_unlock(&members_lock);
			wait_ms = rlb_dns_stub_budget_ms() + 1000;
			pthread_mutex_lock(&members_lock);
			m = wait_first(name_hash, rlb_monotonic_ms() + wait_ms);
		} else {
			m->busy = first = true;
		}
	} else if (m && !m->busy && now >= m->ms.due_ms) {
		/* Due, or no answer yet after a failed first one: in the
		 * background; this resolution answers with what is in
		 * force (none: EAI_AGAIN) and never waits again. */
		m->busy = background = true;
	}
	if (first || background)
		recompute_due();
	pthread_mutex_unlock(&members_lock);
	/* Without a thread, this resolution asks, as the first one does
	 * (and no longer than glibc's lookup of one name would take). */
	if (background && !refresh_in_background(name_hash))
		first = true;
	if (first && refresh_membership(name_hash, true)) {
		/* A stale shared answer answers now; DNS is asked at once,
		 * in the background. */
		pthread_mutex_lock(&members_lock);
		m = membership_of(name_hash);
		background = m && !m->busy;
		if (background)
			m->busy = true;
		recompute_due();
		pthread_mutex_unlock(&members_lock);
		if (background && !refresh_in_background(name_hash)) {
			pthread_mutex_lock(&members_lock);
			if ((m = membership_of(name_hash)))
				m->busy = false;
			recompute_due();
			pthread_mutex_unlock(&members_lock);
		}
	}
	if (first || (m && !background && c->nreplicas == 0)) {
		/* The members just came, or came while we waited: the
		 * snapshot that has them. */
		snprintf(name, sizeof(name), "%s", c->name);
		rlb_session_release(*snap);
		*snap = rlb_session_acquire();
		c = *snap ? rlb_config_find((*snap)->cfg, name) : NULL;
		if (!c && *snap)
			rlb_session_release(*snap);
	}
	rlb_cancel_restore(cancel);
	errno = saved;
	return c;
}

static char fqdn[RLB_MAX_HOST + 1];
static pthread_once_t fqdn_once = PTHREAD_ONCE_INIT;
static atomic_bool fqdn_done;

static void compute_fqdn(void)
{
	if (rlb_session_product.local_fqdn)
		rlb_session_product.local_fqdn(fqdn, sizeof(fqdn));
	else
		rlb_local_fqdn(fqdn, sizeof(fqdn));
	atomic_store_explicit(&fqdn_done, true, memory_order_release);
}

/*
 * The FQDN as already known, never asked: what a snapshot built on a
 * refresh thread uses, since asking is libc's getaddrinfo(), whose locks
 * a fork() must never find held by a thread of ours. A cluster whose
 * policy compares host names was in the snapshot the program's own
 * thread built first, which asked.
 */
static const char *known_fqdn(void)
{
	return atomic_load_explicit(&fqdn_done, memory_order_acquire) ? fqdn
								      : "";
}

const char *rlb_session_fqdn(void)
{
	pthread_once(&fqdn_once, compute_fqdn);
	return fqdn;
}
