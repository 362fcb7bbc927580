/* test_probe.c - unit tests of probe.c: what counts (only the replica's
 * failures), what is ours (a failed socket(), EMFILE, ENOBUFS,
 * EADDRNOTAVAIL: counted nothing), batches within the descriptor limit,
 * connect_timeout_ms = 0 as no bound, a slow lookup that charges no other
 * replica, and a count that could not be stored. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl/ctl.h"

#define SLOW_NAME    "slow.probe.test" /* the fake resolver's slow name */
#define SLOW_MS	     1200	       /* how long its lookup takes */
#define MANY	     100	       /* replicas of the batch test */
#define MANY_NOFILE  40		       /* descriptors left to that test */
#define CONFIG_BYTES 16384

/* Per-test scratch: a state directory, a listener, a refusing port. */
struct fixture {
	char tmp[64];
	int listener; /* listening on 127.0.0.1:live */
	int refuser;  /* bound, never listening: 127.0.0.1:refused */
	int live;     /* port that accepts */
	int refused;  /* port that refuses */
	struct rlb_snapshot *snap;
};

static int bound_socket(int *port, bool listening)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	socklen_t len = sizeof(in);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&in, sizeof(in)) != 0 ||
	    (listening && listen(fd, 1024) != 0) ||
	    getsockname(fd, (struct sockaddr *)&in, &len) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(in.sin_port);
	return fd;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->tmp, "/tmp/rlb-probe-XXXXXX");
	if (!mkdtemp(f->tmp))
		goto out_free;
	f->listener = bound_socket(&f->live, true);
	f->refuser = bound_socket(&f->refused, false);
	if (f->listener < 0 || f->refuser < 0)
		goto out_free;
	rlb_log_configure(RLB_LOG_NONE, RLB_LOG_STDERR);
	*state = f;
	return 0;
out_free:
	free(f);
	return -1;
}

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	return remove(path);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rlb_libc_reset();
	/* State segments outlive the directory whose files name them. */
	if (f->snap)
		rlb_health_remove_state(f->snap->cfg, true, NULL);
	rlb_snapshot_put(f->snap);
	close(f->listener);
	close(f->refuser);
	nftw(f->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/*
 * Parse and prepare a config: the top-level settings, state_dir (NULL:
 * the scratch directory's state/), then the clusters text. The snapshot
 * is the fixture's.
 */
static struct rlb_config *load(struct fixture *f, const char *settings,
			       const char *state_dir, const char *fmt, ...)
{
	char *text = malloc(CONFIG_BYTES), dir[128];
	struct rlb_config *cfg = NULL;
	struct rlb_diag diag = {0};
	size_t used;
	va_list ap;

	assert_non_null(text);
	snprintf(dir, sizeof(dir), "%s/state", f->tmp);
	used = (size_t)snprintf(text, CONFIG_BYTES,
				"state_dir = \"%s\";\n%s\nclusters = (\n",
				state_dir ? state_dir : dir, settings);
	va_start(ap, fmt);
	used += (size_t)vsnprintf(text + used, CONFIG_BYTES - used, fmt, ap);
	va_end(ap);
	snprintf(text + used, CONFIG_BYTES - used, "\n);\n");
	if (rlb_config_parse_string(text, "probe.conf", &cfg, &diag) != 0) {
		for (size_t i = 0; i < diag.n; i++)
			print_error("%s\n", diag.msgs[i]);
		fail_msg("config does not parse:\n%s", text);
	}
	rlb_diag_free(&diag);
	free(text);
	f->snap = rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT, false);
	assert_non_null(f->snap);
	return f->snap->cfg;
}

static uint64_t errors_of(struct rlb_config *cfg, size_t ci, size_t i)
{
	return rlb_health_errors(&cfg->clusters[ci], i, rlb_now(), false);
}

/* ------------------------------------------------------------------ */
/* Injected failures */

static int fail_errno; /* what the fakes fail with */
static int fail_call;  /* socket(): fail only this call (1-based); 0: all */
static int socket_calls;

static int fake_socket(int domain, int type, int protocol)
{
	socket_calls++;
	if (fail_call == 0 || socket_calls == fail_call) {
		errno = fail_errno;
		return -1;
	}
	return socket(domain, type, protocol);
}

static int fake_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	errno = fail_errno;
	return -1;
}

static int (*real_getaddrinfo)(const char *, const char *,
			       const struct addrinfo *, struct addrinfo **);

/* The real resolver, except that SLOW_NAME takes SLOW_MS to resolve
 * (to 127.0.0.1). */
static int slow_getaddrinfo(const char *node, const char *service,
			    const struct addrinfo *hints, struct addrinfo **res)
{
	if (node && strcmp(node, SLOW_NAME) == 0) {
		struct timespec ts = {SLOW_MS / 1000,
				      SLOW_MS % 1000 * 1000000L};

		nanosleep(&ts, NULL);
		node = "127.0.0.1";
	}
	return real_getaddrinfo(node, service, hints, res);
}

/* ------------------------------------------------------------------ */
/* Tests */

/* A refused connect is the replica's: one error, stored, counted. */
static void test_probe_refused_counts_and_stores(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg =
		load(f, "connect_timeout_ms = 500;", NULL,
		     "{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\", "
		     "\"127.0.0.1:%d\" ); }",
		     f->refused, f->live);
	struct rlb_probe_result *res;
	size_t n = 0;

	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(n, 2);
	assert_int_equal(res[0].outcome, RLB_PROBE_FAILED);
	assert_int_equal(res[0].err, ECONNREFUSED);
	assert_true(res[0].counted);
	assert_int_equal(res[1].outcome, RLB_PROBE_OK);
	assert_false(res[1].counted);
	assert_int_equal(errors_of(cfg, 0, 0), 1);
	assert_int_equal(errors_of(cfg, 0, 1), 0);
	free(res);
}

/* connect_timeout_ms = 0 is no bound: a live replica answers. */
static void test_probe_timeout_zero_is_no_bound(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg =
		load(f, "connect_timeout_ms = 0;", NULL,
		     "{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\", "
		     "\"127.0.0.1:%d\" ); }",
		     f->live, f->refused);
	struct rlb_probe_result *res;
	size_t n = 0;

	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(res[0].outcome, RLB_PROBE_OK);
	assert_int_equal(res[1].outcome, RLB_PROBE_FAILED);
	assert_int_equal(res[1].err, ECONNREFUSED);
	assert_int_equal(errors_of(cfg, 0, 0), 0);
	assert_int_equal(errors_of(cfg, 0, 1), 1);
	free(res);
}

/* A failed socket() is ours: reported, counted nothing. */
static void probe_socket_failure(struct fixture *f, int err)
{
	struct rlb_config *cfg = load(
		f, "connect_timeout_ms = 500;", NULL,
		"{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\" ); }",
		f->refused);
	struct rlb_probe_result *res;
	size_t n = 0;

	fail_errno = err;
	fail_call = 0;
	socket_calls = 0;
	rlb_libc()->socket = fake_socket;
	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(res[0].outcome, RLB_PROBE_LOCAL);
	assert_int_equal(res[0].local_err, err);
	assert_false(res[0].counted);
	assert_int_equal(errors_of(cfg, 0, 0), 0);
	free(res);
}

static void test_probe_socket_emfile_counts_nothing(void **state)
{
	probe_socket_failure(*state, EMFILE);
}

static void test_probe_socket_enobufs_counts_nothing(void **state)
{
	probe_socket_failure(*state, ENOBUFS);
}

/* A local connect() error (no local port left) is ours too. */
static void test_probe_connect_eaddrnotavail_counts_nothing(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = load(
		f, "connect_timeout_ms = 500;", NULL,
		"{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\" ); }",
		f->refused);
	struct rlb_probe_result *res;
	size_t n = 0;

	fail_errno = EADDRNOTAVAIL;
	rlb_libc()->connect = fake_connect;
	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(res[0].outcome, RLB_PROBE_LOCAL);
	assert_int_equal(res[0].local_err, EADDRNOTAVAIL);
	assert_false(res[0].counted);
	assert_int_equal(errors_of(cfg, 0, 0), 0);
	free(res);
}

/* ENOBUFS while another connect is in flight: tried again once it is
 * over, and both replicas are probed. */
static void test_probe_enobufs_retried_after_others(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg =
		load(f, "connect_timeout_ms = 500;", NULL,
		     "{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\", "
		     "\"127.0.0.1:%d\" ); }",
		     f->live, f->refused);
	struct rlb_probe_result *res;
	size_t n = 0;

	fail_errno = ENOBUFS;
	fail_call = 2;
	socket_calls = 0;
	rlb_libc()->socket = fake_socket;
	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(socket_calls, 3);
	assert_int_equal(res[0].outcome, RLB_PROBE_OK);
	assert_int_equal(res[1].outcome, RLB_PROBE_FAILED);
	assert_int_equal(res[1].err, ECONNREFUSED);
	assert_true(res[1].counted);
	free(res);
}

/*
 * MANY replicas, MANY_NOFILE descriptors: probed in batches within the
 * limit, every one of them answers, no EMFILE. In a child: the limit
 * must not outlive the test.
 */
static void test_probe_fd_limit_batches(void **state)
{
	struct fixture *f = *state;
	char *text = malloc(CONFIG_BYTES);
	size_t used = 0;
	pid_t pid;
	int status;

	assert_non_null(text);
	for (int i = 0; i < MANY; i++)
		used += (size_t)snprintf(text + used, CONFIG_BYTES - used,
					 "%s{ host = \"r%d\"; port = %d; "
					 "address = \"127.0.0.1\"; }",
					 i ? ", " : "", i, f->live);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlb_config *cfg =
			load(f, "connect_timeout_ms = 2000;", NULL,
			     "{ name = \"many.cluster\"; replicas = ( %s ); }",
			     text);
		struct rlb_probe_result *res;
		struct rlimit rl;
		size_t n = 0;
		int bad = 0;

		/* The soft limit only: valgrind refuses to move the hard one.
		 */
		if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(100);
		rl.rlim_cur = MANY_NOFILE;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(100);
		res = rlb_probe(cfg, &n);
		if (!res || n != MANY)
			_exit(101);
		for (size_t k = 0; k < n; k++)
			if (res[k].outcome != RLB_PROBE_OK ||
			    errors_of(cfg, 0, k) != 0)
				bad++;
		free(res);
		free(text);
		rlb_health_remove_state(cfg, true, NULL);
		rlb_snapshot_put(f->snap);
		_exit(bad > 99 ? 99 : bad);
	}
	free(text);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * One cluster's lookup takes SLOW_MS, far past the bound: it charges
 * neither the other cluster's live replica (whose connect had started
 * before it) nor its own replica, which answers once resolved.
 */
static void test_probe_slow_lookup_charges_no_other(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = load(
		f, "connect_timeout_ms = 300;", NULL,
		"{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\" ); },"
		"{ name = \"b.cluster\"; replicas = ( \"" SLOW_NAME
		":%d\" ); }",
		f->live, f->live);
	struct rlb_probe_result *res;
	size_t n = 0;

	real_getaddrinfo = rlb_libc()->getaddrinfo;
	rlb_libc()->getaddrinfo = slow_getaddrinfo;
	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(n, 2);
	assert_int_equal(res[0].outcome, RLB_PROBE_OK);
	assert_int_equal(res[1].outcome, RLB_PROBE_OK);
	assert_true(res[0].ms < SLOW_MS);
	assert_true(res[1].ms < SLOW_MS);
	assert_int_equal(errors_of(cfg, 0, 0), 0);
	assert_int_equal(errors_of(cfg, 1, 0), 0);
	free(res);
}

/*
 * A state directory that cannot be made (a file is in the way): the
 * state is private, so the refused replica's error is not stored and
 * must not be reported as counted.
 */
static void test_probe_unstored_count_is_not_counted(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = load(
		f, "connect_timeout_ms = 500;", "/dev/null/state",
		"{ name = \"a.cluster\"; replicas = ( \"127.0.0.1:%d\" ); }",
		f->refused);
	struct rlb_probe_result *res;
	size_t n = 0;

	assert_string_equal(rlb_health_path(cfg->clusters[0].health),
			    "(private)");
	res = rlb_probe(cfg, &n);
	assert_non_null(res);
	assert_int_equal(res[0].outcome, RLB_PROBE_FAILED);
	assert_int_equal(res[0].err, ECONNREFUSED);
	assert_false(res[0].counted);
	free(res);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_probe_refused_counts_and_stores),
		T(test_probe_timeout_zero_is_no_bound),
		T(test_probe_socket_emfile_counts_nothing),
		T(test_probe_socket_enobufs_counts_nothing),
		T(test_probe_connect_eaddrnotavail_counts_nothing),
		T(test_probe_enobufs_retried_after_others),
		T(test_probe_fd_limit_batches),
		T(test_probe_slow_lookup_charges_no_other),
		T(test_probe_unstored_count_is_not_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
