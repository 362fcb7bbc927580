/* base/base.h - the seam to the system (libc.c), helpers (util.c) and logging
 * (log.c): what every other folder builds on. */
#ifndef RLB_BASE_H
#define RLB_BASE_H

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

/*
 * Per-thread scratch memory for work sized by a cluster (a selection over
 * many replicas): rlb_scratch_take() lends a buffer of at least len bytes
 * (this thread's cached one, else malloc'd; NULL when out of memory) and
 * its size in *cap; rlb_scratch_put() gives it back with that size, to be
 * cached for the next call (or freed). Nested takers get buffers of
 * their own. A thread's cache is freed when it exits. This keeps the
 * large allocations of every resolution out of malloc, where they would
 * merge the small free chunks that the answer's nodes are taken from.
 */
void *rlb_scratch_take(size_t len, size_t *cap);
void rlb_scratch_put(void *p, size_t cap);

/* 64-bit FNV-1a over bytes; never returns 0 or 1 (reserved by health.c). */
uint64_t rlb_hash64(const void *data, size_t len, uint64_t seed);

/*
 * Per-thread random numbers (splitmix64), seeded from getrandom(), pid,
 * thread and time; reseeded automatically in a forked child (see
 * rlb_util_after_fork_child()).
 */
uint32_t rlb_random_u32(void);
/* n draws into out[], the same as n calls of rlb_random_u32(). */
void rlb_random_fill(uint32_t *out, size_t n);
void rlb_util_after_fork_child(void);

/*
 * Test seam: from now on rlb_random_u32() in the calling thread returns
 * fn(arg) instead, so that a test can script the draws of a selection.
 * fn NULL restores the generator. Other threads keep theirs; a child
 * forked by this thread inherits the source.
 */
void rlb_random_set_source(uint32_t (*fn)(void *arg), void *arg);

/*
 * Cancellation off for a section of the library's own that waits or
 * holds a lock (pthread_setcancelstate()): rlb_cancel_off() returns the
 * state to give rlb_cancel_restore(). A program's pthread_cancel() then
 * acts at its next cancellation point, never inside the section.
 */
int rlb_cancel_off(void);
void rlb_cancel_restore(int old);

/* Wall clock in whole seconds (time(NULL)); monotonic milliseconds. */
int64_t rlb_now(void);
int64_t rlb_monotonic_ms(void);

/*
 * The operation clock: one reading of the monotonic clock shared by the
 * steps of one short operation of this thread (a resolution: its reload
 * check, its selection's time, its health attach check), where each read
 * of its own cost about 4 ns of a 100 ns lookup. rlb_op_clock_begin(ms)
 * makes ms, a reading the caller has just made, this thread's operation
 * clock until rlb_op_clock_end(). Only gates and timestamps that tolerate
 * a reading as old as the operation use it (design.md §13.2):
 *
 * rlb_op_monotonic_ms(): the operation's reading, else a fresh one.
 * rlb_op_now(): the wall clock in seconds at that reading, derived from
 *   it and an offset to the wall clock read at most once a second per
 *   process (so a step of the wall clock is seen within a second); with
 *   no operation clock, rlb_now().
 */
void rlb_op_clock_begin(int64_t mono_ms);
void rlb_op_clock_end(void);
int64_t rlb_op_monotonic_ms(void);
int64_t rlb_op_now(void);

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
 * The seam to the system (design.md §10.3): every system call the library
 * makes, the libc wrappers of one, and the clock, as one table of function
 * pointers bound once (sqlite's aSyscall[]). Nothing outside libc.c calls
 * the system directly. The hooked names (the resolver functions, connect,
 * getsockopt, close) and socket are found with dlsym(RTLD_NEXT), never our
 * own exports; the others are libc's functions, with fixed arguments where
 * libc's are variadic (open, openat, fcntl, mremap). `now` is
 * clock_gettime(): rlb_now() and rlb_monotonic_ms() read it.
 *
 * RLB_LIBC_ENTRIES(X) lists the entries as X(return type, name, (parameters),
 * (arguments)), in the table's order: the struct below is made from it, and
 * so can a test's wrappers be (tests/unit/test_faults.c).
 */
/* clang-format off */
#define RLB_LIBC_ENTRIES(X)                                                    \
	/* the resolver (hooked) */                                            \
	X(int, getaddrinfo, (const char *node, const char *service,            \
		const struct addrinfo *hints, struct addrinfo **res),          \
		(node, service, hints, res))                                   \
	X(void, freeaddrinfo, (struct addrinfo *ai), (ai))                     \
	X(struct hostent *, gethostbyname, (const char *name), (name))         \
	X(struct hostent *, gethostbyname2, (const char *name, int af),        \
		(name, af))                                                    \
	X(int, gethostbyname_r, (const char *name, struct hostent *ret,        \
		char *buf, size_t len, struct hostent **result, int *h_errnop),\
		(name, ret, buf, len, result, h_errnop))                       \
	X(int, gethostbyname2_r, (const char *name, int af,                    \
		struct hostent *ret, char *buf, size_t len,                    \
		struct hostent **result, int *h_errnop),                       \
		(name, af, ret, buf, len, result, h_errnop))                   \
	/* sockets (connect, getsockopt, setsockopt, close hooked) */                      \
	X(int, socket, (int domain, int type, int protocol),                   \
		(domain, type, protocol))                                      \
	X(int, connect, (int fd, const struct sockaddr *sa, socklen_t len),    \
		(fd, sa, len))                                                 \
	X(int, getsockopt, (int fd, int level, int name, void *val,            \
		socklen_t *len), (fd, level, name, val, len))                  \
	X(int, setsockopt, (int fd, int level, int name, const void *val,      \
		socklen_t len), (fd, level, name, val, len))                   \
	X(int, getsockname, (int fd, struct sockaddr *sa, socklen_t *len),     \
		(fd, sa, len))                                                 \
	X(int, bind, (int fd, const struct sockaddr *sa, socklen_t len),       \
		(fd, sa, len))                                                 \
	X(int, close, (int fd), (fd))                                          \
	/* descriptors (hooked: the connection ledger follows them) */         \
	X(int, fcntl, (int fd, int cmd, long arg), (fd, cmd, arg))             \
	X(int, dup, (int fd), (fd))                                            \
	X(int, dup2, (int fd, int newfd), (fd, newfd))                         \
	X(int, dup3, (int fd, int newfd, int flags), (fd, newfd, flags))       \
	X(int, close_range, (unsigned first, unsigned last, int flags),        \
		(first, last, flags))                                          \
	X(ssize_t, sendmsg, (int fd, const struct msghdr *msg, int flags),     \
		(fd, msg, flags))                                              \
	X(ssize_t, recvmsg, (int fd, struct msghdr *msg, int flags),           \
		(fd, msg, flags))                                              \
	/* exec (hooked: what only close-on-exec descriptors hold goes) */    \
	X(int, execve, (const char *path, char *const argv[],                  \
		char *const envp[]), (path, argv, envp))                       \
	X(int, execv, (const char *path, char *const argv[]), (path, argv))    \
	X(int, execvp, (const char *file, char *const argv[]), (file, argv))   \
	X(int, execvpe, (const char *file, char *const argv[],                 \
		char *const envp[]), (file, argv, envp))                       \
	X(int, fexecve, (int fd, char *const argv[], char *const envp[]),      \
		(fd, argv, envp))                                              \
	X(int, poll, (struct pollfd *fds, nfds_t n, int timeout_ms),           \
		(fds, n, timeout_ms))                                          \
	/* files and directories */                                            \
	X(int, open, (const char *path, int flags, mode_t mode),               \
		(path, flags, mode))                                           \
	X(int, openat, (int dirfd, const char *path, int flags, mode_t mode),  \
		(dirfd, path, flags, mode))                                    \
	X(ssize_t, read, (int fd, void *buf, size_t len), (fd, buf, len))      \
	X(ssize_t, pread, (int fd, void *buf, size_t len, off_t off),          \
		(fd, buf, len, off))                                           \
	X(ssize_t, write, (int fd, const void *buf, size_t len),               \
		(fd, buf, len))                                                \
	X(int, stat, (const char *path, struct stat *st), (path, st))          \
	X(int, lstat, (const char *path, struct stat *st), (path, st))         \
	X(int, fstat, (int fd, struct stat *st), (fd, st))                     \
	X(int, fstatat, (int dirfd, const char *path, struct stat *st,         \
		int flags), (dirfd, path, st, flags))                          \
	X(int, statx, (int dirfd, const char *path, int flags,                 \
		unsigned mask, struct statx *stx),                             \
		(dirfd, path, flags, mask, stx))                               \
	X(int, access, (const char *path, int mode), (path, mode))             \
	X(char *, realpath, (const char *path, char *resolved),                \
		(path, resolved))                                              \
	X(int, mkdir, (const char *path, mode_t mode), (path, mode))           \
	X(int, chmod, (const char *path, mode_t mode), (path, mode))           \
	X(int, fchmod, (int fd, mode_t mode), (fd, mode))                      \
	X(int, flock, (int fd, int op), (fd, op))                              \
	X(int, ftruncate, (int fd, off_t len), (fd, len))                      \
	X(int, fallocate, (int fd, int mode, off_t off, off_t len),            \
		(fd, mode, off, len))                                          \
	X(int, renameat, (int olddirfd, const char *oldpath, int newdirfd,     \
		const char *newpath), (olddirfd, oldpath, newdirfd, newpath))  \
	X(int, linkat, (int olddirfd, const char *oldpath, int newdirfd,       \
		const char *newpath, int flags),                               \
		(olddirfd, oldpath, newdirfd, newpath, flags))                 \
	X(int, unlinkat, (int dirfd, const char *path, int flags),             \
		(dirfd, path, flags))                                          \
	X(ssize_t, readlinkat, (int dirfd, const char *path, char *buf,        \
		size_t len), (dirfd, path, buf, len))                          \
	X(DIR *, opendir, (const char *path), (path))                          \
	X(DIR *, fdopendir, (int fd), (fd))                                    \
	X(struct dirent *, readdir, (DIR *d), (d))                             \
	X(int, closedir, (DIR *d), (d))                                        \
	/* memory */                                                           \
	X(void *, mmap, (void *addr, size_t len, int prot, int flags, int fd,  \
		off_t off), (addr, len, prot, flags, fd, off))                 \
	X(int, munmap, (void *addr, size_t len), (addr, len))                  \
	X(void *, mremap, (void *old, size_t oldlen, size_t newlen, int flags, \
		void *new_addr), (old, oldlen, newlen, flags, new_addr))       \
	X(int, madvise, (void *addr, size_t len, int advice),                  \
		(addr, len, advice))                                           \
	X(int, memfd_create, (const char *name, unsigned flags),               \
		(name, flags))                                                 \
	/* SysV shared memory (the health state) */                            \
	X(int, shmget, (key_t key, size_t size, int flags),                    \
		(key, size, flags))                                            \
	X(void *, shmat, (int id, const void *addr, int flags),                \
		(id, addr, flags))                                             \
	X(int, shmdt, (const void *addr), (addr))                              \
	X(int, shmctl, (int id, int cmd, struct shmid_ds *buf),                \
		(id, cmd, buf))                                                \
	/* the process, signals, waiting */                                    \
	X(pid_t, getpid, (void), ())                                           \
	X(uid_t, geteuid, (void), ())                                          \
	X(ssize_t, getrandom, (void *buf, size_t len, unsigned flags),         \
		(buf, len, flags))                                             \
	X(int, gethostname, (char *name, size_t len), (name, len))             \
	X(int, getrlimit, (int resource, struct rlimit *rl), (resource, rl))   \
	X(int, sigaction, (int sig, const struct sigaction *sa,                \
		struct sigaction *old), (sig, sa, old))                        \
	X(int, pthread_sigmask, (int how, const sigset_t *set,                 \
		sigset_t *old), (how, set, old))                               \
	X(int, nanosleep, (const struct timespec *req, struct timespec *rem),  \
		(req, rem))                                                    \
	X(long, futex, (uint32_t *word, int op, uint32_t val,                  \
		const struct timespec *timeout), (word, op, val, timeout))     \
	X(int, pthread_create, (pthread_t *t, const pthread_attr_t *attr,      \
		void *(*fn)(void *), void *arg), (t, attr, fn, arg))           \
	/* the clock: clock_gettime() */                                       \
	X(int, now, (clockid_t clock, struct timespec *ts), (clock, ts))
/* clang-format on */

#define RLB_LIBC_FIELD(ret, name, params, args) ret(*name) params;
struct rlb_libc {
	RLB_LIBC_ENTRIES(RLB_LIBC_FIELD)
};
#undef RLB_LIBC_FIELD

/* Number of entries, and entry i's name (tests, diagnostics). */
#define RLB_LIBC_COUNT (sizeof(struct rlb_libc) / sizeof(void (*)(void)))
const char *rlb_libc_name(size_t i);

extern struct rlb_libc rlb_libc_table;
extern atomic_bool rlb_libc_bound;
void rlb_libc_bind(void);

/*
 * The table, bound on first use; never NULL entries. Once bound, one
 * acquire load: every system call of the library comes here. Tests may
 * overwrite entries to inject failures or set the clock.
 */
static inline struct rlb_libc *rlb_libc(void)
{
	if (!atomic_load_explicit(&rlb_libc_bound, memory_order_acquire))
		rlb_libc_bind();
	return &rlb_libc_table;
}

/* Put back every entry a test replaced: the functions as first bound. */
void rlb_libc_reset(void);

#endif /* RLB_BASE_H */
