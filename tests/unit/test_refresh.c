/* test_refresh.c - DNS membership in a process (design.md §15.3): the first
 * resolution waits for the first answer, later refreshes run in the
 * background while resolution goes on with the members in force, counts
 * of members that stay are kept, a reload keeps the members. DNS is the
 * seam's resolver entries, answered from a script; the clock is the
 * seam's. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "preload/preload.h"
#include "clock.h"
#include "fixture.h"
#include "tests/unit/dnswire.h"

static char tmpdir[] = "/tmp/rlb-test-refresh-XXXXXX";
static char path[256];

#define SRV "_ch._tcp.rlb.test."
/*
 * The floor is 30 s and the test moves the library's clock past it to make
 * a refresh due: the real time a test takes never makes one due by itself.
 */
#define DUE_MS 31000

/* ------------------------------------------------------------------ */
/* The scripted server: one SRV answer, a gate to hold questions */

static pthread_mutex_t dns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dns_cond = PTHREAD_COND_INITIALIZER;
static struct dw answer_msg;
static bool answer_fails;
static bool gate_closed;
static unsigned asked, waiting;
/* The SRV name the server answers (the answer is built for it). */
static const char *served = SRV;

static void unlock_dns(void *arg)
{
	pthread_mutex_unlock(&dns_lock);
}

static ssize_t fake_ask(const char *name, uint16_t type, uint8_t *ans,
			size_t anslen)
{
	ssize_t n;

	/* No cmocka assert here: it runs on the library's refresh thread. */
	if (type != RLB_DNS_T_SRV || strcmp(name, served) != 0) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&dns_lock);
	/* A thread cancelled at the gate (the library let a cancel in)
	 * must not take the test's lock with it. */
	pthread_cleanup_push(unlock_dns, NULL);
	asked++;
	waiting++;
	pthread_cond_broadcast(&dns_cond);
	/* Bounded: a failed assertion that leaves the gate closed must not
	 * hang the test. */
	for (int i = 0; gate_closed && i < 100; i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&dns_cond, &dns_lock, &ts);
	}
	waiting--;
	if (answer_fails) {
		n = -1;
		errno = ETIMEDOUT;
	} else {
		n = (ssize_t)answer_msg.len;
		memcpy(ans, answer_msg.buf,
		       answer_msg.len < anslen ? answer_msg.len : anslen);
	}
	pthread_cleanup_pop(1);
	return n;
}

/* The library's DNS: the scripted server, and a switch that makes every
 * question fail at once (the client cannot even start). */
static bool client_broken;

static void fake_ask_all(struct rlb_dns_question *q, size_t n,
			 int64_t deadline_ms)
{
	if (!client_broken) {
		dw_ask_each(q, n, fake_ask);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		q[i].len = -1;
		q[i].err = ENOMEM;
	}
}

static const struct rlb_dns_client fake_dns = {.ask = fake_ask_all};

/* The server's next answer: these targets (port 9000 + index). */
static void serve(const char *const *targets, size_t n)
{
	pthread_mutex_lock(&dns_lock);
	dw_start(&answer_msg, served, 33, 0);
	for (size_t i = 0; i < n; i++)
		dw_srv(&answer_msg, served, 0, 1, 0, 9000, targets[i]);
	answer_fails = false;
	pthread_mutex_unlock(&dns_lock);
}

static unsigned questions(void)
{
	unsigned n;

	pthread_mutex_lock(&dns_lock);
	n = asked;
	pthread_mutex_unlock(&dns_lock);
	return n;
}

static void set_gate(bool closed)
{
	pthread_mutex_lock(&dns_lock);
	gate_closed = closed;
	pthread_cond_broadcast(&dns_cond);
	pthread_mutex_unlock(&dns_lock);
}

/* Wait (bounded) until a question is held at the gate. */
static void wait_held(void)
{
	pthread_mutex_lock(&dns_lock);
	for (int i = 0; i < 500 && !waiting; i++) {
		pthread_mutex_unlock(&dns_lock);
		usleep(10000);
		pthread_mutex_lock(&dns_lock);
	}
	assert_int_equal(waiting, 1);
	pthread_mutex_unlock(&dns_lock);
}

/* ------------------------------------------------------------------ */

/* The config with web.cluster asking srv (SRV, or another name). */
static void write_config_srv(const char *extra, const char *srv)
{
	fx_write_file(
		path,
		"%sclusters = ( { name = \"web.cluster\"; srv = \"%s\";\n"
		"  dns_refresh_floor_ms = 30000; dns_cache_ttl = 0;\n"
		"  distributed_replica_error_half_life = 86400;\n"
		"  load_balancing = \"in_order\"; },\n"
		"  { name = \"down.cluster\"; srv = \"_down._tcp.rlb.test\"; } "
		");\n",
		extra, srv);
}

static void write_config(const char *extra)
{
	write_config_srv(extra, SRV);
}

static int setup(void **state)
{
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(path, sizeof(path), "%s/replicalb.conf", tmpdir);
	setenv("REPLICALB_CONFIG", path, 1);
	setenv("REPLICALB_STATE_DIR", tmpdir, 1);
	setenv("REPLICALB_LOG_LEVEL", "none", 1);
	rlb_libc_bind();
	rlb_session_set_dns(&fake_dns);
	test_clock_advance(0);
	write_config("");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	rlb_health_remove_state(&(struct rlb_config){.state_dir = tmpdir}, true,
				NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/*
 * One resolution's view: the members of web.cluster, as "host host ...",
 * through the hook's path (find, then members).
 */
static void members_now(char *buf, size_t len)
{
	struct rlb_snapshot *snap = rlb_session_acquire();
	struct rlb_cluster *c;
	size_t off = 0;

	assert_non_null(snap);
	c = rlb_config_find(snap->cfg, "web.cluster");
	assert_non_null(c);
	c = rlb_session_members(c, &snap);
	buf[0] = '\0';
	for (size_t i = 0; c && i < c->nreplicas && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
					i ? " " : "", c->replicas[i].host);
	if (c)
		rlb_session_release(snap);
}

/* Resolve until the members are `want` (bounded: 5 s). */
static void wait_members(const char *want)
{
	char got[512] = "";

	for (int i = 0; i < 500; i++) {
		members_now(got, sizeof(got));
		if (strcmp(got, want) == 0)
			return;
		usleep(10000);
	}
	assert_string_equal(got, want);
}

static void test_refresh_first_waits_then_background(void **state)
{
	static const char *const three[] = {"a.rlb.test", "b.rlb.test",
					    "c.rlb.test"};
	static const char *const four[] = {"a.rlb.test", "b.rlb.test",
					   "c.rlb.test", "d.rlb.test"};
	char got[512];
	unsigned before;

	serve(three, 3);
	/* The first resolution has the members: it waited for them. */
	members_now(got, sizeof(got));
	assert_string_equal(got, "a.rlb.test b.rlb.test c.rlb.test");
	assert_int_equal(questions(), 1);
	/* Not due (the floor): no question. */
	members_now(got, sizeof(got));
	assert_int_equal(questions(), 1);

	/* Due, and the server is slow: resolutions go on with the three. */
	serve(four, 4);
	set_gate(true);
	test_clock_advance(DUE_MS);
	before = questions();
	members_now(got, sizeof(got));
	assert_string_equal(got, "a.rlb.test b.rlb.test c.rlb.test");
	wait_held();
	for (int i = 0; i < 100; i++) {
		members_now(got, sizeof(got));
		assert_string_equal(got, "a.rlb.test b.rlb.test c.rlb.test");
	}
	/* One refresh at a time, however many resolutions. */
	assert_int_equal(questions(), before + 1);
	set_gate(false);
	wait_members("a.rlb.test b.rlb.test c.rlb.test d.rlb.test");
}

static void test_refresh_keeps_counts_and_last_good(void **state)
{
	static const char *const two[] = {"b.rlb.test", "d.rlb.test"};
	static const char *const three[] = {"b.rlb.test", "d.rlb.test",
					    "e.rlb.test"};
	struct rlb_snapshot *snap;
	struct rlb_cluster *c;
	char got[512];

	/* Four from the test before; count errors against b. */
	snap = rlb_session_acquire();
	c = rlb_config_find(snap->cfg, "web.cluster");
	assert_int_equal(c->nreplicas, 4);
	assert_string_equal(c->replicas[1].host, "b.rlb.test");
	rlb_health_add_errors(c, 1, 5, rlb_now());
	rlb_session_release(snap);

	/* a and c leave: b keeps its five errors. */
	serve(two, 2);
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	wait_members("b.rlb.test d.rlb.test");
	snap = rlb_session_acquire();
	c = rlb_config_find(snap->cfg, "web.cluster");
	assert_int_equal(rlb_health_errors(c, 0, rlb_now(), true), 5);
	rlb_session_release(snap);

	/* DNS down: the last good members stay. */
	pthread_mutex_lock(&dns_lock);
	answer_fails = true;
	pthread_mutex_unlock(&dns_lock);
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	for (int i = 0; i < 20; i++) {
		usleep(10000);
		members_now(got, sizeof(got));
		assert_string_equal(got, "b.rlb.test d.rlb.test");
	}

	/* A reload keeps the members in force, without asking. */
	set_gate(true);
	serve(three, 3);
	write_config("log_level = \"none\";\n");
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	assert_string_equal(got, "b.rlb.test d.rlb.test");
	set_gate(false);
	wait_members("b.rlb.test d.rlb.test e.rlb.test");
	snap = rlb_session_acquire();
	c = rlb_config_find(snap->cfg, "web.cluster");
	assert_int_equal(rlb_health_errors(c, 0, rlb_now(), true), 5);
	rlb_session_release(snap);
}

static int no_thread(pthread_t *t, const pthread_attr_t *attr,
		     void *(*fn)(void *), void *arg)
{
	return EAGAIN;
}

static void test_refresh_without_threads_or_resolver(void **state)
{
	static const char *const one[] = {"f.rlb.test"};
	static const char *const two[] = {"f.rlb.test", "g.rlb.test"};
	char got[512];

	set_gate(false);
	/* No thread to be had (RLIMIT_NPROC, seccomp): the resolution that
	 * finds the refresh due asks itself, and has the new members. */
	serve(one, 1);
	rlb_libc()->pthread_create = no_thread;
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	assert_string_equal(got, "f.rlb.test");
	/* the DNS client cannot even start: the last good stay. */
	serve(two, 2);
	client_broken = true;
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	assert_string_equal(got, "f.rlb.test");
	client_broken = false;
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	assert_string_equal(got, "f.rlb.test g.rlb.test");
}

/* A DNS cluster whose DNS never answered: a temporary failure. */
static void test_refresh_never_answered_is_eai_again(void **state)
{
	static const struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct rlb_snapshot *snap = rlb_session_acquire();
	struct addrinfo *res = NULL;
	struct hostent he, *hp = NULL;
	struct rlb_cluster *c;
	char buf[512];
	int herr = 0;

	assert_non_null(snap);
	c = rlb_config_find(snap->cfg, "down.cluster");
	assert_non_null(c);
	/* The server answers nothing for it (fake_ask: EINVAL). */
	c = rlb_session_members(c, &snap);
	assert_non_null(c);
	assert_int_equal(c->nreplicas, 0);
	assert_int_equal(rlb_resolve_getaddrinfo(c, "80", &hints, &res),
			 EAI_AGAIN);
	assert_null(res);
	assert_int_equal(rlb_resolve_gethostbyname(c, "down.cluster", AF_INET,
						   &he, buf, sizeof(buf), &hp,
						   &herr),
			 0);
	assert_null(hp);
	assert_int_equal(herr, TRY_AGAIN);
	rlb_session_release(snap);
}

/* A reload that changes a cluster's sources starts its membership anew. */
static void test_refresh_reload_new_sources(void **state)
{
	static const char *const one[] = {"h.rlb.test"};
	char got[512];

	serve(one, 1);
	set_gate(false);
	rlb_libc()->pthread_create = no_thread;
	test_clock_advance(DUE_MS);
	members_now(got, sizeof(got));
	assert_string_equal(got, "h.rlb.test");
	/* Another name, which the server does not answer: no members
	 * from the old name's answer. */
	write_config_srv("", "_other._tcp.rlb.test");
	test_clock_advance(1100);
	members_now(got, sizeof(got));
	assert_string_equal(got, "");
	/* Back: asked afresh, the first answer waited for. */
	write_config("");
	test_clock_advance(1100);
	members_now(got, sizeof(got));
	assert_string_equal(got, "h.rlb.test");
}

/* ------------------------------------------------------------------ */
/* Cancellation and fork around a first answer (issue 20) */

/* members_now() for another thread: no cmocka there. */
static void members_quiet(char *buf, size_t len)
{
	struct rlb_snapshot *snap = rlb_session_acquire();
	struct rlb_cluster *c =
		snap ? rlb_config_find(snap->cfg, "web.cluster") : NULL;
	size_t off = 0;

	buf[0] = '\0';
	if (!c) {
		rlb_session_release(snap);
		return;
	}
	c = rlb_session_members(c, &snap);
	for (size_t i = 0; c && i < c->nreplicas && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
					i ? " " : "", c->replicas[i].host);
	if (c)
		rlb_session_release(snap);
}

/* A program's thread: one resolution, then a cancellation point. */
static void *resolver_thread(void *arg)
{
	members_quiet(arg, 512);
	pthread_testcancel();
	return NULL;
}

/* Join t within ms; its return value into *ret. */
static bool join_within(pthread_t t, int ms, void **ret)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return pthread_timedjoin_np(t, ret, &ts) == 0;
}

/* A child that resolves once and exits: it must neither hang nor miss
 * the members. */
static void child_resolves(const char *want)
{
	pid_t pid = fork();
	int st = -1;

	assert_true(pid >= 0);
	if (pid == 0) {
		char got[512];

		alarm(5);
		members_quiet(got, sizeof(got));
		_exit(strcmp(got, want) == 0 ? 0 : 3);
	}
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(10000);
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A new cluster source, never asked, held at the server's gate. */
static void new_source(const char *srv)
{
	static const char *const one[] = {"h.rlb.test"};

	set_gate(true);
	served = srv;
	serve(one, 1);
	write_config_srv("", srv);
	test_clock_advance(1100);
}

/*
 * The thread asking for the first answer is cancelled while it waits
 * for DNS: before, its membership stayed busy and every later lookup
 * of the cluster waited for good. Now the cancel acts once the lookup
 * returns; a second thread, waiting for the same answer, and a forked
 * child both get the members.
 */
static void test_refresh_cancelled_asker_hangs_nothing(void **state)
{
	char got_a[512], got_b[512];
	pthread_t a, b;
	void *ret = NULL;

	new_source("_c1._tcp.rlb.test.");
	assert_int_equal(pthread_create(&a, NULL, resolver_thread, got_a), 0);
	wait_held();
	assert_int_equal(pthread_cancel(a), 0);
	assert_int_equal(pthread_create(&b, NULL, resolver_thread, got_b), 0);
	usleep(100000);
	set_gate(false);
	assert_true(join_within(a, 5000, &ret));
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_string_equal(got_a, "h.rlb.test");
	assert_true(join_within(b, 5000, &ret));
	assert_null(ret);
	assert_string_equal(got_b, "h.rlb.test");
	child_resolves("h.rlb.test");
}

/*
 * A thread waiting for another's first answer is cancelled: before, it
 * died holding members_lock, and every DNS-cluster lookup and every
 * fork() waited for good.
 */
static void test_refresh_cancelled_waiter_hangs_nothing(void **state)
{
	char got_a[512], got_b[512], got[512];
	pthread_t a, b;
	void *ret = NULL;

	new_source("_c2._tcp.rlb.test.");
	assert_int_equal(pthread_create(&a, NULL, resolver_thread, got_a), 0);
	wait_held();
	assert_int_equal(pthread_create(&b, NULL, resolver_thread, got_b), 0);
	usleep(100000);
	assert_int_equal(pthread_cancel(b), 0);
	usleep(100000);
	set_gate(false);
	assert_true(join_within(b, 5000, &ret));
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_true(join_within(a, 5000, &ret));
	assert_null(ret);
	assert_string_equal(got_a, "h.rlb.test");
	members_now(got, sizeof(got));
	assert_string_equal(got, "h.rlb.test");
	child_resolves("h.rlb.test");
}

/*
 * A first answer that failed is never waited for again: later lookups
 * answer at once with no members while the next refresh asks in the
 * background (before: each refresh due blocked a lookup again).
 */
static void test_refresh_failed_first_is_not_waited_again(void **state)
{
	char got[512];
	int64_t t0;

	/* Threads to be had again (the test before took them away). */
	rlb_libc()->pthread_create = pthread_create;
	new_source("_c3._tcp.rlb.test.");
	pthread_mutex_lock(&dns_lock);
	answer_fails = true;
	pthread_mutex_unlock(&dns_lock);
	set_gate(false);
	members_now(got, sizeof(got));
	assert_string_equal(got, "");
	/* The next refresh is held: the lookup does not wait for it. */
	set_gate(true);
	test_clock_advance(DUE_MS);
	t0 = rlb_monotonic_ms();
	members_now(got, sizeof(got));
	assert_string_equal(got, "");
	wait_held();
	for (int i = 0; i < 20; i++) {
		members_now(got, sizeof(got));
		assert_string_equal(got, "");
	}
	assert_true(rlb_monotonic_ms() - t0 < 1000);
	/* DNS back: the members come in the background. */
	new_source("_c3._tcp.rlb.test.");
	set_gate(false);
	wait_members("h.rlb.test");
	served = SRV;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refresh_first_waits_then_background),
		cmocka_unit_test(test_refresh_keeps_counts_and_last_good),
		cmocka_unit_test(test_refresh_without_threads_or_resolver),
		cmocka_unit_test(test_refresh_never_answered_is_eai_again),
		cmocka_unit_test(test_refresh_reload_new_sources),
		cmocka_unit_test(test_refresh_cancelled_asker_hangs_nothing),
		cmocka_unit_test(test_refresh_cancelled_waiter_hangs_nothing),
		cmocka_unit_test(test_refresh_failed_first_is_not_waited_again),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
