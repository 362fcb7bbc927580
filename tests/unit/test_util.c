/* test_util.c - hashing, random numbers, diagnostics and logging. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
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

#include "engine/engine.h"

static void test_util_hash_never_reserved(void **state)
{
	/* 0 and 1 mark empty and dropped slots of the health table. */
	for (unsigned i = 0; i < 100000; i++) {
		uint64_t h = rlb_hash64(&i, sizeof(i), 0);

		assert_true(h > 1);
	}
	assert_int_not_equal(rlb_hash64("a", 1, 0), rlb_hash64("b", 1, 0));
	assert_int_not_equal(rlb_hash64("a", 1, 0), rlb_hash64("a", 1, 7));
}

static void test_util_random_spread(void **state)
{
	unsigned buckets[8] = {0};

	for (int i = 0; i < 80000; i++)
		buckets[rlb_random_u32() % 8]++;
	for (int b = 0; b < 8; b++) {
		assert_in_range(buckets[b], 9000, 11000);
	}
}

static void test_util_random_reseeded_after_fork(void **state)
{
	int fds[2];
	uint32_t parent[4], child[4];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	rlb_random_u32();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		rlb_util_after_fork_child();
		for (int i = 0; i < 4; i++)
			child[i] = rlb_random_u32();
		_exit(write(fds[1], child, sizeof(child)) == sizeof(child) ? 0
									   : 1);
	}
	for (int i = 0; i < 4; i++)
		parent[i] = rlb_random_u32();
	assert_int_equal(read(fds[0], child, sizeof(child)), sizeof(child));
	waitpid(pid, NULL, 0);
	close(fds[0]);
	close(fds[1]);
	/* Without the reseed the child would repeat the parent's draws. */
	assert_memory_not_equal(parent, child, sizeof(child));
}

/* A scripted source: the next of n values, round and round. */
struct script {
	const uint32_t *v;
	size_t n, next;
};

static uint32_t script_next(void *arg)
{
	struct script *s = arg;

	return s->v[s->next++ % s->n];
}

static void test_util_random_source_scripts_draws(void **state)
{
	static const uint32_t v[] = {7, 0, UINT32_MAX};
	struct script s = {v, 3, 0};
	uint32_t after[4];

	rlb_random_set_source(script_next, &s);
	for (int i = 0; i < 6; i++)
		assert_int_equal(rlb_random_u32(), v[i % 3]);
	rlb_random_set_source(NULL, NULL);
	assert_int_equal(s.next, 6);
	/* The generator again: not the script, and the script is not asked. */
	for (int i = 0; i < 4; i++)
		after[i] = rlb_random_u32();
	assert_int_equal(s.next, 6);
	assert_false(after[0] == 7 && after[1] == 0 && after[2] == UINT32_MAX &&
		     after[3] == 7);
}

/* A batch of draws is that many single draws, in order. */
static void test_util_random_fill_is_single_draws(void **state)
{
	static const uint32_t v[] = {5, 1, 9, 2, 8};
	struct script s = {v, 5, 0};
	uint32_t out[7] = {0};

	rlb_random_set_source(script_next, &s);
	rlb_random_fill(out, 7);
	rlb_random_set_source(NULL, NULL);
	assert_int_equal(s.next, 7);
	for (int i = 0; i < 7; i++)
		assert_int_equal(out[i], v[i % 5]);
	/* The generator: draws that differ, the state moved on. */
	rlb_random_fill(out, 4);
	out[4] = rlb_random_u32();
	assert_false(out[0] == out[1] && out[1] == out[2] && out[2] == out[3] &&
		     out[3] == out[4]);
}

static uint32_t always_zero(void *arg)
{
	return 0;
}

static void *draw_four(void *arg)
{
	uint32_t *out = arg;

	for (int i = 0; i < 4; i++)
		out[i] = rlb_random_u32();
	return NULL;
}

static void test_util_random_source_per_thread(void **state)
{
	uint32_t other[4];
	pthread_t t;

	rlb_random_set_source(always_zero, NULL);
	assert_int_equal(pthread_create(&t, NULL, draw_four, other), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(rlb_random_u32(), 0);
	rlb_random_set_source(NULL, NULL);
	/* Four zeros from the generator: odds of 2^-128. */
	assert_false(other[0] == 0 && other[1] == 0 && other[2] == 0 &&
		     other[3] == 0);
}

static void test_util_ascii_lower(void **state)
{
	char buf[8];

	rlb_ascii_lower(buf, "AbC.DeF-Z", sizeof(buf));
	assert_string_equal(buf, "abc.def");
	rlb_ascii_lower(buf, "\xc3\x89X", sizeof(buf));
	assert_string_equal(buf, "\xc3\x89x");
}

static void test_util_diag_collects(void **state)
{
	struct rlb_diag d = {0};

	rlb_diag_add(&d, "%s:%d: %s", "f.conf", 3, "bad");
	rlb_diag_add(&d, "second");
	assert_int_equal(d.n, 2);
	assert_string_equal(d.msgs[0], "f.conf:3: bad");
	assert_string_equal(d.msgs[1], "second");
	rlb_diag_free(&d);
	assert_int_equal(d.n, 0);
	assert_null(d.msgs);
}

/* Run rlb_log with stderr captured; returns what was written. */
static void capture_log(enum rlb_log_level conf, enum rlb_log_level level,
			const char *msg, char *out, size_t outlen)
{
	int fds[2], saved_fd = dup(STDERR_FILENO);
	ssize_t n;

	assert_int_equal(pipe(fds), 0);
	dup2(fds[1], STDERR_FILENO);
	rlb_log_configure(conf, RLB_LOG_STDERR);
	errno = EAGAIN;
	rlb_log(level, "%s", msg);
	assert_int_equal(errno, EAGAIN);
	dup2(saved_fd, STDERR_FILENO);
	close(saved_fd);
	close(fds[1]);
	n = read(fds[0], out, outlen - 1);
	out[n > 0 ? n : 0] = '\0';
	close(fds[0]);
}

static void test_util_log_prefix_and_levels(void **state)
{
	char out[256], want[64];

	snprintf(want, sizeof(want), "replicalb[%d]: hello\n", (int)getpid());
	capture_log(RLB_LOG_WARNING, RLB_LOG_ERROR, "hello", out, sizeof(out));
	assert_string_equal(out, want);
	capture_log(RLB_LOG_WARNING, RLB_LOG_INFO, "hidden", out, sizeof(out));
	assert_string_equal(out, "");
	capture_log(RLB_LOG_NONE, RLB_LOG_ERROR, "hidden", out, sizeof(out));
	assert_string_equal(out, "");
	capture_log(RLB_LOG_DEBUG, RLB_LOG_DEBUG, "hello", out, sizeof(out));
	assert_string_equal(out, want);
	rlb_log_configure(RLB_LOG_WARNING, RLB_LOG_STDERR);
}

static void test_util_log_level_names(void **state)
{
	enum rlb_log_level l = RLB_LOG_ERROR; /* not what is parsed */

	assert_int_equal(rlb_log_level_parse("debug", &l), 0);
	assert_int_equal(l, RLB_LOG_DEBUG);
	assert_int_equal(rlb_log_level_parse("None", &l), 0);
	assert_int_equal(l, RLB_LOG_NONE);
	assert_int_equal(rlb_log_level_parse("loud", &l), -1);
	assert_string_equal(rlb_log_level_name(RLB_LOG_WARNING), "warning");
}

static void test_util_env_empty_is_unset(void **state)
{
	setenv("REPLICALB_APP", "", 1);
	assert_null(rlb_env(RLB_ENV_APP));
	setenv("REPLICALB_APP", "x", 1);
	assert_string_equal(rlb_env(RLB_ENV_APP), "x");
	unsetenv("REPLICALB_APP");
	assert_false(rlb_secure_mode());
	/* Every variable of the table has a name and a meaning. */
	for (int v = 0; v < RLB_ENV_COUNT; v++) {
		assert_non_null(rlb_env_vars[v].name);
		assert_non_null(rlb_env_vars[v].meaning);
	}
}

static int fake_close(int fd)
{
	return -1;
}

/* A clock of the test's own: monotonic and wall ms, and reads counted. */
static int64_t fake_mono_ms, fake_wall_ms;
static int fake_wall_reads, fake_mono_reads;

static int fake_clock(clockid_t clock, struct timespec *ts)
{
	bool wall = clock == CLOCK_REALTIME_COARSE || clock == CLOCK_REALTIME;
	int64_t ms = wall ? fake_wall_ms : fake_mono_ms;

	if (wall)
		fake_wall_reads++;
	else
		fake_mono_reads++;
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = ms % 1000 * 1000000;
	return 0;
}

/*
 * The operation clock: one reading serves the operation; the wall clock
 * is derived from it, read again at most once a second, so a step of the
 * wall clock shows within a second of monotonic time.
 */
static void test_util_op_clock_shares_one_reading(void **state)
{
	int reads;

	rlb_libc()->now = fake_clock;
	fake_mono_ms = 5000000;
	fake_wall_ms = 1700000000500;
	/* No operation: each call reads. */
	assert_int_equal(rlb_op_now(), 1700000000);
	assert_int_equal(rlb_op_monotonic_ms(), 5000000);
	rlb_op_clock_begin(rlb_monotonic_ms());
	assert_int_equal(rlb_op_now(), 1700000000);
	fake_mono_ms += 400; /* the operation's reading stays */
	reads = fake_mono_reads + fake_wall_reads;
	assert_int_equal(rlb_op_monotonic_ms(), 5000000);
	assert_int_equal(rlb_op_now(), 1700000000);
	assert_int_equal(fake_mono_reads + fake_wall_reads, reads);
	rlb_op_clock_end();
	/* The next operation, 600 ms on: wall time derived, no wall read. */
	fake_mono_ms += 200;
	fake_wall_ms += 600;
	rlb_op_clock_begin(rlb_monotonic_ms());
	reads = fake_wall_reads;
	assert_int_equal(rlb_op_now(), 1700000001);
	assert_int_equal(fake_wall_reads, reads);
	rlb_op_clock_end();
	/* The wall clock steps an hour; within the second it is not seen,
	 * after it, it is. */
	fake_wall_ms += 3600 * 1000;
	fake_mono_ms += 100;
	fake_wall_ms += 100;
	rlb_op_clock_begin(rlb_monotonic_ms());
	assert_int_equal(rlb_op_now(), 1700000001);
	rlb_op_clock_end();
	fake_mono_ms += 1000;
	fake_wall_ms += 1000;
	rlb_op_clock_begin(rlb_monotonic_ms());
	assert_int_equal(rlb_op_now(), 1700000002 + 3600);
	rlb_op_clock_end();
	assert_int_equal(rlb_op_now(), 1700000002 + 3600);
	rlb_libc_reset();
}

/* Tests replace seam entries; one call puts every one back. */
static void test_util_libc_reset_restores_the_bound_functions(void **state)
{
	struct rlb_libc saved = *rlb_libc();

	rlb_libc()->close = fake_close;
	rlb_libc()->getaddrinfo = NULL;
	rlb_libc_reset();
	assert_memory_equal(rlb_libc(), &saved, sizeof(saved));
	assert_ptr_not_equal(rlb_libc()->close, fake_close);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_util_libc_reset_restores_the_bound_functions),
		cmocka_unit_test(test_util_hash_never_reserved),
		cmocka_unit_test(test_util_op_clock_shares_one_reading),
		cmocka_unit_test(test_util_random_spread),
		cmocka_unit_test(test_util_random_reseeded_after_fork),
		cmocka_unit_test(test_util_random_source_scripts_draws),
		cmocka_unit_test(test_util_random_fill_is_single_draws),
		cmocka_unit_test(test_util_random_source_per_thread),
		cmocka_unit_test(test_util_ascii_lower),
		cmocka_unit_test(test_util_diag_collects),
		cmocka_unit_test(test_util_log_prefix_and_levels),
		cmocka_unit_test(test_util_log_level_names),
		cmocka_unit_test(test_util_env_empty_is_unset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
