/* runtime.c - process-wide state of the library: the snapshot in force,
 * hot reload, charging failures, the local hostname, and the library's
 * one fork handler. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/preload.h"

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
 * Fork: the library's one pthread_atfork handler, so that every lock the
 * library owns is held across fork() in one order and nothing is copied
 * into a child half-changed. Lock order, everywhere in the library:
 *
 *	cfg_lock (runtime.c)
 *	  -> static hostent lock (resolve.c)
 *	    -> DNS cache lock (dnscache.c)
 *	      -> dropped-attempts lock (track.c)
 *
 * (a thread holding a later lock never takes an earlier one). Health
 * state (health.c) takes no lock at all. What a child resets: the locks
 * above, the reload in progress, the random source (util.c), and the
 * pending connects (track.c): they are the parent's to count.
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&cfg_lock);
	rlb_resolve_fork_lock();
	rlb_dnscache_fork_lock();
	rlb_track_fork_lock();
}

static void atfork_parent(void)
{
	rlb_track_fork_unlock();
	rlb_dnscache_fork_unlock();
	rlb_resolve_fork_unlock();
	pthread_mutex_unlock(&cfg_lock);
}

static void atfork_child(void)
{
	rlb_track_after_fork_child();
	rlb_track_fork_unlock();
	rlb_dnscache_fork_unlock();
	rlb_resolve_fork_unlock();
	pthread_mutex_unlock(&cfg_lock);
	/* A reload another thread was doing is not going on in the child. */
	atomic_flag_clear(&reload_busy);
	rlb_util_after_fork_child();
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
	snap = rlb_snapshot_new(cfg, rlb_runtime_fqdn, !initial);
	if (!snap) {
		rlb_log(RLB_LOG_ERROR, "%s: out of memory preparing config",
			src.path);
		goto out_free_diag;
	}
	pthread_mutex_lock(&cfg_lock);
	old = current;
	current = snap;
	atomic_fetch_add_explicit(&cfg_gen, 1, memory_order_release);
	pthread_mutex_unlock(&cfg_lock);
	if (old) {
		rlb_log(RLB_LOG_INFO, "reloaded %s", src.path);
		rlb_snapshot_put(old);
	}
out_free_diag:
	rlb_diag_free(&diag);
}

/* What connect tracking reports to and asks of the snapshot's owner. */
static const struct rlb_track_ops track_ops = {
	.charge = rlb_runtime_charge,
	.next_address = rlb_runtime_next_address,
};

static void runtime_init(void)
{
	enum rlb_log_level level;
	int saved = errno;
	const char *off = rlb_env(RLB_ENV_DISABLE);

	disabled = off && strcmp(off, "0") != 0;
	if (disabled)
		goto out;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	rlb_track_set_ops(&track_ops);
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
	errno = saved;
}

/* At most one thread at a time, at most once a second, looks for a
 * changed config file; others go on with the snapshot they have. */
static void maybe_reload(void)
{
	long long now = rlb_monotonic_ms();
	bool changed;

	if (now < atomic_load_explicit(&next_check_ms, memory_order_relaxed))
		return;
	if (atomic_flag_test_and_set(&reload_busy))
		return;
	atomic_store(&next_check_ms, now + RELOAD_INTERVAL_MS);
	pthread_mutex_lock(&cfg_lock);
	changed = !current || rlb_config_changed(current->cfg);
	pthread_mutex_unlock(&cfg_lock);
	/* A broken version is parsed once, not every second. */
	if (changed && !(broken.n && !rlb_config_files_changed(&broken)))
		load_config(false);
	atomic_flag_clear(&reload_busy);
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

struct rlb_snapshot *rlb_runtime_acquire(void)
{
	int saved = errno;
	unsigned gen;

	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		pthread_once(&init_once, runtime_init);
	if (disabled)
		return NULL;
	maybe_reload();
	gen = atomic_load_explicit(&cfg_gen, memory_order_acquire);
	if (tls_gen != gen && tls_depth == 0)
		refresh_thread_cache();
	errno = saved;
	if (!tls_snap)
		return NULL;
	tls_depth++;
	return tls_snap;
}

void rlb_runtime_release(struct rlb_snapshot *snap)
{
	if (snap && tls_depth > 0)
		tls_depth--;
}

void rlb_runtime_charge(const struct rlb_failure *f)
{
	struct rlb_snapshot *snap;

	if (f->n == 0 || !(snap = rlb_runtime_acquire()))
		return;
	rlb_snapshot_charge(snap, f);
	rlb_runtime_release(snap);
}

bool rlb_runtime_next_address(const struct rlb_owner *tried, size_t ntried,
			      const struct sockaddr *failed, socklen_t len,
			      struct sockaddr_storage *out, socklen_t *outlen)
{
	struct rlb_snapshot *snap = rlb_runtime_acquire();
	bool found;

	if (!snap)
		return false;
	found = rlb_resolve_next_address(snap->cfg, tried, ntried, failed, len,
					 out, outlen);
	rlb_runtime_release(snap);
	return found;
}

static char fqdn[RLB_MAX_HOST + 1];
static pthread_once_t fqdn_once = PTHREAD_ONCE_INIT;

static void compute_fqdn(void)
{
	rlb_local_fqdn(fqdn, sizeof(fqdn));
}

const char *rlb_runtime_fqdn(void)
{
	pthread_once(&fqdn_once, compute_fqdn);
	return fqdn;
}
