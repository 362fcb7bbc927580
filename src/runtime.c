/* runtime.c - process-wide state of the library: the config snapshot in
 * force, hot reload, fork handling and the local hostname. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlb.h"

/* How often the resolution path may stat() the config files. */
#define RELOAD_INTERVAL_MS 1000

/*
 * The snapshot in force, holding one reference of its own. A reload
 * builds the new snapshot outside cfg_lock and swaps it in under it;
 * threads pick it up through their caches below. The last reference
 * frees.
 */
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rlb_config *_Atomic current;
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
static RLB_TLS struct rlb_config *tls_cfg;
static RLB_TLS unsigned tls_gen;
static RLB_TLS unsigned tls_depth;
static pthread_key_t tls_key;
static bool tls_key_ok;

/* Drop one reference; the last one frees. */
static void put_config(struct rlb_config *cfg)
{
	if (cfg &&
	    atomic_fetch_sub_explicit(&cfg->refs, 1, memory_order_acq_rel) == 1)
		rlb_config_free(cfg);
}

/* A thread that ends gives back the reference its cache held. */
static void thread_cache_destroy(void *cfg)
{
	put_config(cfg);
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&cfg_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&cfg_lock);
}

static void atfork_child(void)
{
	pthread_mutex_unlock(&cfg_lock);
	/* A reload another thread was doing is not going on in the child. */
	atomic_flag_clear(&reload_busy);
	rlb_util_after_fork_child();
}

static void apply_logging(const struct rlb_config *cfg)
{
	enum rlb_log_level level = RLB_LOG_WARNING;
	const char *env = rlb_env("REPLICALB_LOG_LEVEL");

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
	struct rlb_config *cfg = NULL, *old;
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
	if (rlb_runtime_prepare(cfg, !initial) < 0) {
		rlb_log(RLB_LOG_ERROR, "%s: out of memory preparing config",
			src.path);
		rlb_config_free(cfg);
		goto out_free_diag;
	}
	apply_logging(cfg);
	pthread_mutex_lock(&cfg_lock);
	old = current;
	current = cfg;
	atomic_fetch_add_explicit(&cfg_gen, 1, memory_order_release);
	pthread_mutex_unlock(&cfg_lock);
	if (old) {
		rlb_log(RLB_LOG_INFO, "reloaded %s", src.path);
		put_config(old);
	}
out_free_diag:
	rlb_diag_free(&diag);
}

static void runtime_init(void)
{
	enum rlb_log_level level;
	int saved = errno;
	const char *off = rlb_env("REPLICALB_DISABLE");

	disabled = off && strcmp(off, "0") != 0;
	if (disabled)
		goto out;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	tls_key_ok = pthread_key_create(&tls_key, thread_cache_destroy) == 0;
	apply_logging(NULL);
	if (rlb_env("REPLICALB_LOG_LEVEL") &&
	    rlb_log_level_parse(rlb_env("REPLICALB_LOG_LEVEL"), &level) < 0)
		rlb_log(RLB_LOG_WARNING,
			"REPLICALB_LOG_LEVEL: unknown log level \"%s\"; valid: "
			"none, error, warning, info, debug",
			rlb_env("REPLICALB_LOG_LEVEL"));
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
	changed = !current || rlb_config_changed(current);
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
	struct rlb_config *old = tls_cfg;

	pthread_mutex_lock(&cfg_lock);
	tls_cfg = current;
	if (tls_cfg)
		atomic_fetch_add_explicit(&tls_cfg->refs, 1,
					  memory_order_relaxed);
	tls_gen = atomic_load_explicit(&cfg_gen, memory_order_relaxed);
	pthread_mutex_unlock(&cfg_lock);
	if (tls_key_ok)
		pthread_setspecific(tls_key, tls_cfg);
	put_config(old);
}

struct rlb_config *rlb_runtime_acquire(void)
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
	if (!tls_cfg)
		return NULL;
	tls_depth++;
	return tls_cfg;
}

void rlb_runtime_release(struct rlb_config *cfg)
{
	if (cfg && tls_depth > 0)
		tls_depth--;
}

static char fqdn[RLB_MAX_HOST + 1];
static pthread_once_t fqdn_once = PTHREAD_ONCE_INIT;

/* SPEC 3.2: canonical name of gethostname(), else gethostname(). */
static void compute_fqdn(void)
{
	struct addrinfo hints = {0}, *res = NULL;
	char host[RLB_MAX_HOST + 1] = "";
	int saved = errno;

	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	snprintf(fqdn, sizeof(fqdn), "%s", host);
	hints.ai_flags = AI_CANONNAME | AI_ADDRCONFIG;
	hints.ai_family = AF_UNSPEC;
	if (host[0] && rlb_libc()->getaddrinfo(host, NULL, &hints, &res) == 0) {
		if (res && res->ai_canonname && res->ai_canonname[0])
			snprintf(fqdn, sizeof(fqdn), "%s", res->ai_canonname);
		rlb_libc()->freeaddrinfo(res);
	}
	errno = saved;
}

const char *rlb_runtime_local_hostname(const struct rlb_config *cfg)
{
	if (cfg && cfg->local_hostname)
		return cfg->local_hostname;
	pthread_once(&fqdn_once, compute_fqdn);
	return fqdn;
}

int rlb_runtime_prepare(struct rlb_config *cfg, bool prune)
{
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];
		const char *local = "";

		if (rlb_policy_uses_hostname(c->s.load_balancing))
			local = c->local_hostname
					? c->local_hostname
					: rlb_runtime_local_hostname(cfg);
		if (rlb_policy_precompute(c, local) < 0)
			return -ENOMEM;
	}
	rlb_health_attach_all(cfg, prune);
	return 0;
}
