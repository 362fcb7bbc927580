/* test_faults.c - every entry of the seam (base.h, RLB_LIBC_ENTRIES) made to
 * fail at its first, second, ... call while a program resolves a virtual
 * name, connects to its replicas and to an address of no replica, and asks
 * libc about a name that is not virtual (design.md §10.3; sqlite's I/O
 * error tests). Each round checks that the program survives, that what is
 * not ours gets libc's answer, and that health counts exactly the refused
 * connects made - then puts the seam back with rlb_libc_reset(). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "preload/preload.h"
#include "preload/track_internal.h"
#include "tests/unit/dnswire.h"

/* Failures injected per entry at most: its first MAX_K calls. */
#define MAX_K	   6
#define TIMEOUT_MS 200

enum {
#define ENTRY(ret, name, params, args) E_##name,
	RLB_LIBC_ENTRIES(ENTRY)
#undef ENTRY
		E_COUNT
};
_Static_assert(E_COUNT == RLB_LIBC_COUNT, "one index per seam entry");

/* The steps of a scenario: where an injected fault fired. */
enum step {
	S_NONE,
	S_LOAD,
	S_ACQUIRE,
	S_RESOLVE,
	S_CONNECT_OK,
	S_CONNECT_REFUSED,
	S_CONNECT_NB,
	S_CLOSE,
	S_OTHER,
	S_NONVIRTUAL,
	S_FQDN,
	S_DNS,
	S_STATE_RW,
	S_STATE_RO,
	S_STATE_RESET,
	S_STATE_REMOVE,
};
static const char *const step_names[] = {
	"none",
	"load",
	"acquire",
	"resolve",
	"connect ok",
	"refused",
	"nonblocking",
	"close",
	"not a replica",
	"not virtual",
	"fqdn",
	"dns members",
	"state first use",
	"state look",
	"state reset",
	"remove-state",
};

static struct rlb_libc real;	/* the seam as bound, clock faked */
static unsigned calls[E_COUNT]; /* calls of each entry this round */
static int armed = -1;		/* entry to fail, -1: none */
static unsigned fail_at;	/* its call to fail: 1, 2, ... */
static unsigned fired;		/* faults fired this round */
static enum step step, fired_step;

static char tmpdir[] = "/tmp/rlb-test-faults-XXXXXX";
static char cfg_path[256];
static int listen_ok = -1, bound_refused = -1, bound_other = -1;
static int port_ok, port_refused, port_other;
static int devnull = -1, saved_stderr = -1;
static int64_t clock_offset_ms;
/* g.cluster, in a state directory of its own: first used in each round
 * read-write (gcfg) and read-only (glook), then removed. */
static struct rlb_config *gcfg, *glook;
static char gdir[256];
/* The faults after which g.cluster's state was private, and its look. */
static char private_after[600], unseen_after[600];
/* Every segment made while the test runs: removed at the end, whatever
 * an injected fault left behind (ours only, never ipcrm --all). */
static int made[4096];
static size_t nmade;

/* The clock through the seam: the real one, moved on by each round. */
static int fake_now(clockid_t clock, struct timespec *ts)
{
	int rc = clock_gettime(clock, ts);
	int64_t ns = (int64_t)ts->tv_nsec + clock_offset_ms % 1000 * 1000000;

	ts->tv_sec += clock_offset_ms / 1000 + ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	return rc;
}

static bool fault_hit(int e)
{
	if (++calls[e] != fail_at || e != armed)
		return false;
	fired++;
	fired_step = step;
	return true;
}

static int fail_int(int err)
{
	errno = err;
	return -1;
}

static void *fail_ptr(int err)
{
	errno = err;
	return NULL;
}

/* close(2) and closedir(3) release what they are given even when they
 * report an error: do it, then fail. */
static int fail_after(int rc, int err)
{
	(void)rc;
	errno = err;
	return -1;
}

/* A blocking connect can be interrupted; a non-blocking one never is
 * (it returns at once): out of local ports instead. */
static int fail_connect(int fd)
{
	int flags = real.fcntl(fd, F_GETFL, 0);

	return fail_int(flags >= 0 && (flags & O_NONBLOCK) ? EADDRNOTAVAIL
							   : EINTR);
}

static int fail_gethostbyname_r(struct hostent **result, int *h_errnop)
{
	*result = NULL;
	*h_errnop = TRY_AGAIN;
	return EAGAIN;
}

/* What each entry's failure looks like: its contract's error, with the
 * errno a real system could give there. */
#define NOFAIL		      ((void)0)
#define FAIL_getaddrinfo      return (errno = EIO, EAI_AGAIN)
#define FAIL_freeaddrinfo     NOFAIL
#define FAIL_gethostbyname    return (h_errno = TRY_AGAIN, NULL)
#define FAIL_gethostbyname2   return (h_errno = TRY_AGAIN, NULL)
#define FAIL_gethostbyname_r  return fail_gethostbyname_r(result, h_errnop)
#define FAIL_gethostbyname2_r return fail_gethostbyname_r(result, h_errnop)
#define FAIL_socket	      return fail_int(EMFILE)
#define FAIL_connect	      return fail_connect(fd)
#define FAIL_getsockopt	      return fail_int(ENOMEM)
#define FAIL_setsockopt	      return fail_int(ENOMEM)
#define FAIL_close	      return fail_after(real.close(fd), EIO)
#define FAIL_fcntl	      return fail_int(ENOMEM)
#define FAIL_poll	      return fail_int(EINTR)
#define FAIL_open	      return fail_int(EMFILE)
#define FAIL_openat	      return fail_int(EMFILE)
#define FAIL_read	      return fail_int(EIO)
#define FAIL_pread	      return fail_int(EIO)
#define FAIL_write	      return fail_int(EIO)
#define FAIL_stat	      return fail_int(ENOMEM)
#define FAIL_lstat	      return fail_int(ENOMEM)
#define FAIL_fstat	      return fail_int(EIO)
#define FAIL_fstatat	      return fail_int(EIO)
#define FAIL_statx	      return fail_int(ENOMEM)
#define FAIL_access	      return fail_int(EIO)
#define FAIL_realpath	      return fail_ptr(ENOMEM)
#define FAIL_mkdir	      return fail_int(EIO)
#define FAIL_chmod	      return fail_int(EIO)
#define FAIL_fchmod	      return fail_int(EIO)
#define FAIL_flock	      return fail_int(EINTR)
#define FAIL_ftruncate	      return fail_int(EIO)
#define FAIL_fallocate	      return fail_int(EIO)
#define FAIL_renameat	      return fail_int(EIO)
#define FAIL_linkat	      return fail_int(EIO)
#define FAIL_unlinkat	      return fail_int(EIO)
#define FAIL_opendir	      return fail_ptr(EMFILE)
#define FAIL_fdopendir	      return fail_ptr(ENOMEM)
#define FAIL_readdir	      return fail_ptr(EIO)
#define FAIL_closedir	      return fail_after(real.closedir(d), EIO)
#define FAIL_mmap	      return (errno = ENOMEM, MAP_FAILED)
#define FAIL_munmap	      return fail_int(ENOMEM)
#define FAIL_mremap	      return (errno = ENOMEM, MAP_FAILED)
#define FAIL_madvise	      return fail_int(EAGAIN)
#define FAIL_memfd_create     return fail_int(EMFILE)
#define FAIL_shmget	      return fail_int(ENOSPC)
#define FAIL_shmat	      return (errno = EMFILE, (void *)-1)
#define FAIL_shmdt	      return fail_int(EINVAL)
#define FAIL_shmctl	      return fail_int(EINVAL)
#define FAIL_getpid	      NOFAIL
#define FAIL_geteuid	      NOFAIL
#define FAIL_getrandom	      return fail_int(EINTR)
#define FAIL_gethostname      return fail_int(ENAMETOOLONG)
#define FAIL_getrlimit	      return fail_int(EINVAL)
#define FAIL_sigaction	      return fail_int(EINVAL)
#define FAIL_pthread_sigmask  return EINVAL
#define FAIL_nanosleep	      return fail_int(EINTR)
#define FAIL_futex	      return fail_int(EINTR)
#define FAIL_syslog	      NOFAIL
#define FAIL_pthread_create   return EAGAIN
#define FAIL_res_ninit	      return fail_int(ENOMEM)
#define FAIL_res_nmkquery     return fail_int(EMSGSIZE)
#define FAIL_res_nsend	      return fail_int(ETIMEDOUT)
#define FAIL_res_nclose	      NOFAIL
#define FAIL_now	      return fail_int(EINVAL)
/* Entries that cannot fail (void, or no error in their contract). */
static const int never_fail[] = {E_freeaddrinfo, E_getpid, E_geteuid, E_syslog,
				 E_res_nclose};

static int record_shmget(key_t key, size_t size, int flags)
{
	int id = shmget(key, size, flags);

	if (id >= 0 && nmade < sizeof(made) / sizeof(made[0]))
		made[nmade++] = id;
	return id;
}

/* One wrapper per entry: counts, fails the armed call, else calls on. */
#define WRAP(ret, name, params, args)                                          \
	static ret fault_##name params                                         \
	{                                                                      \
		if (fault_hit(E_##name)) {                                     \
			FAIL_##name;                                           \
		}                                                              \
		return real.name args;                                         \
	}
RLB_LIBC_ENTRIES(WRAP)
#undef WRAP

static void install(int entry, unsigned k)
{
	struct rlb_libc *t = rlb_libc();

	memset(calls, 0, sizeof(calls));
	armed = entry;
	fail_at = k;
	fired = 0;
	fired_step = S_NONE;
#define SET(ret, name, params, args) t->name = fault_##name;
	RLB_LIBC_ENTRIES(SET)
#undef SET
}

static bool can_fail(int e)
{
	for (size_t i = 0; i < sizeof(never_fail) / sizeof(never_fail[0]); i++)
		if (never_fail[i] == e)
			return false;
	return true;
}

static int bound_socket(const char *addr, int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, addr, &sin.sin_addr);
	if (fd < 0 || bind(fd, (void *)&sin, sizeof(sin)) != 0 ||
	    getsockname(fd, (void *)&sin, &len) != 0)
		return -1;
	*port = ntohs(sin.sin_port);
	return fd;
}

static int setup(void **state)
{
	char text[1024];
	FILE *f;

	if (!mkdtemp(tmpdir))
		return -1;
	/* 127.0.0.2 accepts; 127.0.0.3 is bound and never listens, so it
	 * refuses, and so does 127.0.0.1 (the address of no replica). */
	listen_ok = bound_socket("127.0.0.2", &port_ok);
	bound_refused = bound_socket("127.0.0.3", &port_refused);
	bound_other = bound_socket("127.0.0.1", &port_other);
	if (listen_ok < 0 || bound_refused < 0 || bound_other < 0 ||
	    listen(listen_ok, 64) != 0)
		return -1;
	snprintf(text, sizeof(text),
		 "connect_timeout_ms = %d;\n"
		 "distributed_replica_error_half_life = 100000;\n"
		 "clusters = ( { name = \"f.cluster\"; load_balancing = "
		 "\"in_order\"; replicas = (\n"
		 " { host = \"ok\"; address = \"127.0.0.2\"; port = %d; },\n"
		 " { host = \"refuser\"; address = \"127.0.0.3\"; port = %d; "
		 "} ); },\n"
		 " { name = \"d.cluster\"; srv = \"_f._tcp.rlb.test\";\n"
		 "   dns_refresh_floor_ms = 10; dns_cache_ttl = 0; } );\n",
		 TIMEOUT_MS, port_ok, port_refused);
	snprintf(cfg_path, sizeof(cfg_path), "%s/replicalb.conf", tmpdir);
	f = fopen(cfg_path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		return -1;
	setenv("REPLICALB_CONFIG", cfg_path, 1);
	setenv("REPLICALB_STATE_DIR", tmpdir, 1);
	snprintf(gdir, sizeof(gdir), "%s/g", tmpdir);
	snprintf(text, sizeof(text),
		 "state_dir = \"%s\";\n"
		 "distributed_replica_error_half_life = 100000;\n"
		 "clusters = ( { name = \"g.cluster\"; replicas = (\n"
		 " { host = \"a\"; address = \"127.0.0.4\"; port = 9; },\n"
		 " { host = \"b\"; address = \"127.0.0.5\"; port = 9; } ); "
		 "} );\n",
		 gdir);
	{
		char gpath[300];
		struct rlb_config_source gsrc = {.path = gpath};

		snprintf(gpath, sizeof(gpath), "%s/g.conf", tmpdir);
		f = fopen(gpath, "w");
		if (!f || fputs(text, f) < 0 || fclose(f) != 0 ||
		    rlb_config_load(&gsrc, &gcfg, NULL) != 0 ||
		    rlb_config_load(&gsrc, &glook, NULL) != 0)
			return -1;
	}
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	saved_stderr = dup(STDERR_FILENO);
	return devnull >= 0 && saved_stderr >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	close(listen_ok);
	close(bound_refused);
	close(bound_other);
	close(devnull);
	close(saved_stderr);
	rlb_health_remove_state(gcfg, true, NULL);
	rlb_config_free(gcfg);
	rlb_config_free(glook);
	for (size_t i = 0; i < nmade; i++)
		shmctl(made[i], IPC_RMID, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* What a round found wrong, printed at the end (stderr is muted). */
static char problems[64][200];
static size_t nproblems, nproblems_all;

static void RLB_PRINTF(1, 2) problem(const char *fmt, ...)
{
	va_list ap;

	nproblems_all++;
	if (nproblems >= sizeof(problems) / sizeof(problems[0]))
		return;
	va_start(ap, fmt);
	vsnprintf(problems[nproblems++], sizeof(problems[0]), fmt, ap);
	va_end(ap);
}

/* Whether the armed fault fired during the step under way. */
static bool fired_here(enum step s)
{
	return fired && fired_step == s;
}

static struct sockaddr_in loopback(const char *addr, int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};

	inet_pton(AF_INET, addr, &sin.sin_addr);
	sin.sin_port = htons(port);
	return sin;
}

/* close through the hook; a descriptor left open by a failed close is
 * closed behind its back, as a program's next close would. */
static void track_close(int fd)
{
	step = S_CLOSE;
	errno = EBADMSG;
	if (rlb_track_close(fd) == 0) {
		if (errno != EBADMSG)
			problem("close changed errno to %d", errno);
		return;
	}
	if (!fired_here(S_CLOSE))
		problem("close failed (%s) with no fault", strerror(errno));
	syscall(SYS_close, fd);
}

/* libc's answer to the question the program asks of a name not ours. */
static int libc_rc;
static struct sockaddr_in libc_addr;
static const struct addrinfo nonvirtual_hints = {.ai_family = AF_INET,
						 .ai_socktype = SOCK_STREAM};

struct outcome {
	unsigned refused_made; /* connects to the refuser the kernel saw */
	unsigned refused_seen; /* ECONNREFUSED the program saw */
};

/* Append the armed fault ("shmget #1") to a list. */
static void note_fault(char *list, size_t size)
{
	size_t len = strlen(list);

	snprintf(list + len, size - len, "%s%s #%u", len ? ", " : "",
		 rlb_libc_name(armed), fail_at);
}

/*
 * The state layer at a cluster's first use, as a program and replicalbctl
 * meet it: g.cluster attached read-write (a segment made, its state file
 * linked), three errors counted, looked at read-only (status), reset,
 * detached, and its directory's state removed. The errors are always
 * counted in the process; the look sees them when the state is shared and
 * no fault hit the look, and never sees what was not counted (design.md
 * §12.4, §12.8).
 */
static void state_steps(void)
{
	struct rlb_cluster *c = &gcfg->clusters[0], *l = &glook->clusters[0];
	int64_t now = rlb_now();
	unsigned long long e;
	bool shared;
	int rc;

	step = S_STATE_RW;
	rlb_health_attach_all(gcfg, false);
	for (int n = 0; n < 3; n++)
		rlb_health_add_errors(c, 0, 1, now);
	e = rlb_health_errors(c, 0, now, false);
	if (e != 3)
		problem("state: %llu errors counted for 3", e);
	shared = strcmp(rlb_health_path(c->health), "(private)") != 0;
	if (!shared && !fired_here(S_STATE_RW))
		problem("state private with no fault");
	if (!shared)
		note_fault(private_after, sizeof(private_after));

	step = S_STATE_RO;
	rlb_health_attach_all_readonly(glook);
	e = rlb_health_errors(l, 0, now, true);
	if (e != 0 && e != 3)
		problem("state look: %llu errors, 3 counted", e);
	else if (e != (shared ? 3 : 0) && !fired_here(S_STATE_RO))
		problem("state look: %llu errors, 3 counted %s", e,
			shared ? "shared" : "privately");
	else if (shared && e == 0)
		note_fault(unseen_after, sizeof(unseen_after));
	if (rlb_health_errors(l, 1, now, true) != 0)
		problem("state look: errors invented for replica b");

	step = S_STATE_RESET;
	rlb_health_reset(c, SIZE_MAX);
	if ((e = rlb_health_errors(c, 0, now, false)) != 0)
		problem("state reset: %llu errors left", e);
	if ((e = rlb_health_errors(l, 0, now, true)) != 0)
		problem("state look after reset: %llu errors", e);

	step = S_STATE_REMOVE;
	rlb_health_detach(c->health);
	c->health = NULL;
	rlb_health_detach(l->health);
	l->health = NULL;
	rc = rlb_health_remove_state(gcfg, true, NULL);
	if (rc < 0 && !fired_here(S_STATE_REMOVE))
		problem("remove-state failed (%s) with no fault",
			strerror(errno));
}

/*
 * The DNS server of d.cluster, as the seam's resolver entries: one SRV
 * target with its address in the additional section (so its members need
 * no lookup of their own). No refresh thread: pthread_create fails, so a
 * refresh is asked in the scenario's own thread, where faults are seen.
 */
static int dns_nsend(res_state st, const unsigned char *msg, int len,
		     unsigned char *ans, int anslen)
{
	struct dw w;

	dw_start(&w, "_f._tcp.rlb.test", 33, 0);
	dw_srv(&w, "_f._tcp.rlb.test", 0, 0, 1, 9, "t.rlb.test");
	dw_glue(&w, "t.rlb.test", 0, "127.0.0.2");
	if (anslen < (int)w.len)
		return -1;
	memcpy(ans, w.buf, w.len);
	return (int)w.len;
}

static int no_thread(pthread_t *t, const pthread_attr_t *attr,
		     void *(*fn)(void *), void *arg)
{
	return EAGAIN;
}

/*
 * The program: load, acquire, resolve f.cluster, connect to each address
 * (blocking), once more non-blocking to the refuser, to an address of no
 * replica, then ask about "localhost". Returns errors counted against the
 * refuser and the good replica in *errs.
 */
static void scenario(struct outcome *out, uint64_t errs[2])
{
	struct rlb_config_source src = {.path = cfg_path};
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	struct rlb_snapshot *snap;
	struct rlb_cluster *c;
	struct rlb_config *cfg = NULL;
	struct sockaddr_in other = loopback("127.0.0.1", port_other);
	struct hostent he, *hp = NULL;
	char hbuf[1024], fqdn[256];
	int rc, fd, herr;

	memset(out, 0, sizeof(*out));
	errs[0] = errs[1] = 0;

	step = S_LOAD;
	rc = rlb_config_load(&src, &cfg, NULL);
	if (rc == 0)
		rlb_config_free(cfg);
	else if (!fired_here(S_LOAD))
		problem("config load failed (%d) with no fault", rc);

	step = S_ACQUIRE;
	snap = rlb_runtime_acquire();
	if (!snap || !(c = rlb_config_find(snap->cfg, "f.cluster"))) {
		problem("no snapshot in force");
		if (snap)
			rlb_runtime_release(snap);
		return;
	}
	rlb_health_reset(c, SIZE_MAX);

	step = S_RESOLVE;
	rc = rlb_resolve_getaddrinfo(c, NULL, &hints, &res);
	if (rc != 0 && !fired_here(S_RESOLVE))
		problem("resolve failed (%d) with no fault", rc);
	rc = rlb_resolve_gethostbyname(c, "f.cluster", AF_INET, &he, hbuf,
				       sizeof(hbuf), &hp, &herr);
	if (rc != 0 && !fired_here(S_RESOLVE))
		problem("gethostbyname_r failed (%d) with no fault", rc);

	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		struct sockaddr_in *sin = (void *)ai->ai_addr;
		bool refuser = ntohs(sin->sin_port) == port_refused;
		enum step s = refuser ? S_CONNECT_REFUSED : S_CONNECT_OK;
		unsigned connects;

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		step = s;
		connects = calls[E_connect];
		rc = rlb_track_connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (refuser) {
			/* Every real connect() to it was refused. */
			out->refused_made +=
				calls[E_connect] - connects -
				(armed == E_connect && fired_here(s));
			if (rc == -1 && errno == ECONNREFUSED)
				out->refused_seen++;
			else if (!fired_here(s))
				problem("refuser: rc %d errno %d", rc, errno);
		} else if (rc == 0) {
			int a = accept(listen_ok, NULL, NULL);

			if (a >= 0)
				close(a);
		} else if (!fired_here(s)) {
			problem("good replica: rc %d errno %d", rc, errno);
		}
		track_close(fd);
	}
	if (res)
		freeaddrinfo(res);

	/* A non-blocking program learns of the refusal from SO_ERROR. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_in sin = loopback("127.0.0.3", port_refused);
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		unsigned connects = calls[E_connect];
		int err = 0;
		socklen_t len = sizeof(err);

		step = S_CONNECT_NB;
		rc = rlb_track_connect(fd, (void *)&sin, sizeof(sin));
		out->refused_made +=
			calls[E_connect] - connects -
			(armed == E_connect && fired_here(S_CONNECT_NB));
		if (rc == -1 && errno == EINPROGRESS &&
		    poll(&p, 1, 2000) == 1 &&
		    rlb_track_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					 &len) == 0 &&
		    err == ECONNREFUSED)
			out->refused_seen++;
		else if (rc == -1 && errno == ECONNREFUSED)
			out->refused_seen++;
		else if (!fired_here(S_CONNECT_NB))
			problem("non-blocking: rc %d errno %d err %d", rc,
				errno, err);
		track_close(fd);
	}

	/* An address of no replica: libc's answer, nothing counted. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	step = S_OTHER;
	rc = rlb_track_connect(fd, (void *)&other, sizeof(other));
	if (!(rc == -1 && errno == ECONNREFUSED) &&
	    !(fired_here(S_OTHER) && armed == E_connect && errno == EINTR))
		problem("not a replica: rc %d errno %d", rc, errno);
	track_close(fd);

	/* A name not virtual: the hook's path, libc's answer. */
	step = S_NONVIRTUAL;
	if (rlb_config_find(snap->cfg, "localhost"))
		problem("localhost is virtual");
	res = NULL;
	rc = rlb_libc()->getaddrinfo("localhost", NULL, &nonvirtual_hints,
				     &res);
	if (fired_here(S_NONVIRTUAL) && armed == E_getaddrinfo) {
		if (rc != EAI_AGAIN)
			problem("localhost: %d, not the injected failure", rc);
	} else if (rc != libc_rc ||
		   (rc == 0 &&
		    memcmp(res->ai_addr, &libc_addr, sizeof(libc_addr)) != 0)) {
		problem("localhost: %d where libc says %d", rc, libc_rc);
	}
	if (rc == 0)
		rlb_libc()->freeaddrinfo(res);

	/* A DNS cluster: its members refreshed (the clock moved past the
	 * floor), here and now; the last good ones when that fails. */
	step = S_DNS;
	{
		struct rlb_cluster *d = rlb_config_find(snap->cfg, "d.cluster");

		res = NULL;
		if (d)
			d = rlb_runtime_members(d, &snap);
		if (!d) {
			problem("d.cluster: no cluster");
			return;
		}
		c = rlb_config_find(snap->cfg, "f.cluster");
		/* Answered once (the warm-up round): whatever fails now,
		 * the members in force answer. */
		rc = rlb_resolve_getaddrinfo(d, NULL, &hints, &res);
		if (rc != 0)
			problem("d.cluster: %d (%s)", rc,
				fired_here(S_DNS) ? "a fault while refreshing"
						  : "no fault");
		if (res)
			freeaddrinfo(res);
	}

	step = S_FQDN;
	errno = EBADMSG;
	rlb_local_fqdn(fqdn, sizeof(fqdn));
	if (errno != EBADMSG)
		problem("rlb_local_fqdn changed errno to %d", errno);
	state_steps();
	step = S_NONE;

	rlb_track_sweep();
	errs[0] = rlb_health_errors(c, 1, 0, false);
	errs[1] = rlb_health_errors(c, 0, 0, false);
	rlb_runtime_release(snap);
}

/* One round: the seam wrapped, entry e failing at its k-th call. */
static bool round_ok(int e, unsigned k, struct outcome *out)
{
	size_t before = nproblems_all;
	uint64_t errs[2];

	/* Past the reload interval: the runtime looks at the file. */
	clock_offset_ms += 1100;
	install(e, k);
	scenario(out, errs);
	armed = -1;
	rlb_libc_reset();
	/* What a fault kept remove-state from removing; the directory
	 * too, so that every round makes it again. */
	rlb_health_remove_state(gcfg, true, NULL);
	rmdir(gdir);
	if (errs[0] != out->refused_made)
		problem("%s #%u (in %s): %llu errors for %u refused connects",
			e >= 0 ? rlb_libc_name(e) : "-", k,
			step_names[fired_step], (unsigned long long)errs[0],
			out->refused_made);
	if (errs[1] != 0)
		problem("%s #%u: %llu errors invented for the good replica",
			e >= 0 ? rlb_libc_name(e) : "-", k,
			(unsigned long long)errs[1]);
	if (nproblems_all != before &&
	    nproblems <= sizeof(problems) / sizeof(problems[0]))
		snprintf(problems[nproblems - 1] +
				 strlen(problems[nproblems - 1]),
			 sizeof(problems[0]) - strlen(problems[nproblems - 1]),
			 " [%s #%u]", e >= 0 ? rlb_libc_name(e) : "-", k);
	return nproblems_all == before;
}

static void test_faults_every_entry(void **state)
{
	struct rlb_libc bound;
	struct addrinfo *res = NULL;
	struct outcome out;
	unsigned profile[E_COUNT];
	unsigned entries = 0, injected = 0, survived = 0, fired_total = 0;

	/* libc's own answer, before anything of ours runs. */
	libc_rc = getaddrinfo("localhost", NULL, &nonvirtual_hints, &res);
	if (libc_rc == 0) {
		memcpy(&libc_addr, res->ai_addr, sizeof(libc_addr));
		freeaddrinfo(res);
	}
	bound = *rlb_libc();
	real = bound;
	real.now = fake_now;
	real.shmget = record_shmget;
	real.res_ninit = dw_res_ninit;
	real.res_nmkquery = dw_res_nmkquery;
	real.res_nsend = dns_nsend;
	real.res_nclose = dw_res_nclose;
	real.pthread_create = no_thread;

	dup2(devnull, STDERR_FILENO);
	/* Warm-up: what happens once per process (tables, first load). */
	assert_true(round_ok(-1, 0, &out));
	/* The profile: how often a scenario calls each entry. */
	assert_true(round_ok(-1, 0, &out));
	memcpy(profile, calls, sizeof(profile));
	assert_int_equal(out.refused_made, 2);
	for (int e = 0; e < E_COUNT; e++) {
		if (!can_fail(e) || !profile[e])
			continue;
		entries++;
		for (unsigned k = 1; k <= profile[e] && k <= MAX_K; k++) {
			injected++;
			survived += round_ok(e, k, &out);
			fired_total += fired;
			assert_memory_equal(rlb_libc(), &bound, sizeof(bound));
		}
	}
	dup2(saved_stderr, STDERR_FILENO);

	for (size_t i = 0; i < nproblems; i++)
		print_message("fault: %s\n", problems[i]);
	for (int e = 0; e < E_COUNT; e++)
		if (profile[e] == 0)
			print_message("not called by the scenario: %s\n",
				      rlb_libc_name(e));
	print_message("state private (counted in the process only) after: "
		      "%s\n",
		      private_after[0] ? private_after : "none");
	print_message("state shared but unseen by a look that failed: %s\n",
		      unseen_after[0] ? unseen_after : "none");
	print_message("faults: %zu entries, %u called, %u failures injected "
		      "(%u fired), %u scenarios survived\n",
		      (size_t)E_COUNT, entries, injected, fired_total,
		      survived);
	assert_int_equal(nproblems_all, 0);
	assert_int_equal(survived, injected);
}

/* An unreadable clock stands still: never a jump back to 0. */
static void test_faults_clock_failure_keeps_time(void **state)
{
	int64_t before = rlb_monotonic_ms(), wall = rlb_now();

	real = *rlb_libc();
	install(E_now, 1);
	errno = EBADMSG;
	assert_true(rlb_monotonic_ms() >= before);
	assert_int_equal(errno, EBADMSG);
	install(E_now, 1);
	assert_true(rlb_now() >= wall);
	armed = -1;
	rlb_libc_reset();
}

/*
 * Regression (found by test_faults_every_entry, statx #4): a statx() that
 * fails for want of memory said "another socket now", and the bounded
 * blocking connect to a refusing replica then counted nothing. Only EBADF
 * means the descriptor is gone.
 */
static void test_faults_statx_failure_is_same_socket(void **state)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint64_t ino = rlb_pending_ino(fd);

	assert_true(ino != 0);
	real = *rlb_libc();
	for (unsigned k = 1; k <= 2; k++) {
		install(E_statx, k);
		errno = EBADMSG;
		assert_true(rlb_pending_is(fd, ino));
		assert_int_equal(errno, EBADMSG);
	}
	armed = -1;
	rlb_libc_reset();
	close(fd);
	assert_false(rlb_pending_is(fd, ino));
}

/*
 * Regression (found by test_faults_every_entry under valgrind, fstat #6):
 * when fstat() of the state directory failed, the read-only look and
 * remove-state logged why from a buffer nothing had written. The reason
 * is now the fstat error's text.
 */
static void test_faults_state_dir_fstat_failure_says_why(void **state)
{
	struct rlb_cluster *l = &glook->clusters[0];
	char path[300], buf[4096];
	ssize_t n;
	int fd;

	rlb_health_attach_all(gcfg, false);
	rlb_health_add_errors(&gcfg->clusters[0], 0, 1, rlb_now());
	snprintf(path, sizeof(path), "%s/log", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	dup2(fd, STDERR_FILENO);
	real = *rlb_libc();
	install(E_fstat, 1);
	rlb_health_attach_all_readonly(glook);
	assert_int_equal(rlb_health_errors(l, 0, 0, true), 0);
	install(E_fstat, 1);
	assert_int_equal(rlb_health_remove_state(gcfg, true, NULL), -1);
	armed = -1;
	rlb_libc_reset();
	dup2(saved_stderr, STDERR_FILENO);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	assert_non_null(strstr(buf, "not read (Input/output error)"));
	assert_non_null(strstr(buf, "not used (Input/output error)"));
	rlb_health_detach(l->health);
	l->health = NULL;
	rlb_health_detach(gcfg->clusters[0].health);
	gcfg->clusters[0].health = NULL;
	assert_true(rlb_health_remove_state(gcfg, true, NULL) >= 2);
	rmdir(gdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_faults_state_dir_fstat_failure_says_why),
		cmocka_unit_test(test_faults_statx_failure_is_same_socket),
		cmocka_unit_test(test_faults_clock_failure_keeps_time),
		cmocka_unit_test(test_faults_every_entry),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
