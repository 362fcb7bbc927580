/* base/base.h - the seam to the system (libc.c), helpers (util.c) and logging
 * (log.c): what every other folder builds on. */
#ifndef RLB_BASE_H
#define RLB_BASE_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define RLB_PRINTF(f, a) __attribute__((format(printf, f, a)))
/*
 * Thread-local variables. A preloaded library gets static TLS, reserved
 * by the loader at start-up, whose access costs no __tls_get_addr(): the
 * default. A product that is dlopen()ed (the NSS module) builds the core
 * with RLB_TLS_MODEL "global-dynamic" instead.
 */
#ifndef RLB_TLS_MODEL
#define RLB_TLS_MODEL "initial-exec"
#endif
#define RLB_TLS __thread __attribute__((tls_model(RLB_TLS_MODEL)))

/* Limits that keep every structure bounded. */
#define RLB_MAX_REPLICAS 4096 /* per cluster */
#define RLB_MAX_PINNED	 16   /* pinned addresses per replica */
#define RLB_MAX_HOST	 255  /* bytes of a host string */

/* ------------------------------------------------------------------ */
/* env.c */

/* The environment variables replicalb reads (design.md §2.6). */
enum rlb_env_id {
	RLB_ENV_CONFIG,
	RLB_ENV_APP,
	RLB_ENV_LOAD_BALANCING,
	RLB_ENV_CONNECT_FAILOVER,
	RLB_ENV_HOSTNAME,
	RLB_ENV_STATE_DIR,
	RLB_ENV_LOG_LEVEL,
	RLB_ENV_DISABLE,
	RLB_ENV_LIBRARY, /* read by the wrapper only */
	RLB_ENV_XDG_RUNTIME_DIR,
	RLB_ENV_HOME,
	RLB_ENV_COUNT,
};

/* One variable: its name and what it does. None is read in
 * secure-execution mode (setuid, file capabilities). */
struct rlb_env_var {
	const char *name;
	const char *meaning;
};
extern const struct rlb_env_var rlb_env_vars[RLB_ENV_COUNT];

/*
 * A variable as the library must read it: NULL in secure-execution mode
 * (AT_SECURE), otherwise getenv(); an empty value counts as unset.
 */
const char *rlb_env(enum rlb_env_id id);
bool rlb_secure_mode(void);

/* ------------------------------------------------------------------ */
/* util.c */

/*
 * Whether a connect that failed with err is the replica's failure, one
 * error against it (design.md §5.1): refused, timed out, unreachable,
 * down, reset. Anything else (EMFILE, ENOBUFS, EADDRNOTAVAIL, EACCES, a
 * signal ...) is the program's or ours. The library and the probe count
 * by this one list.
 */
bool rlb_errno_counts(int err);

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
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*close)(int);
};

/* The table, bound on first use; never NULL entries on glibc. */
struct rlb_libc *rlb_libc(void);
/* Put back every entry a test replaced: the functions as first bound. */
void rlb_libc_reset(void);

#endif /* RLB_BASE_H */
