/* test_runtime.c - the config in force: lookup from the environment, hot
 * reload, a broken edit keeping the last good config, snapshots that stay
 * valid while in use, REPLICALB_DISABLE, resolution from a thread's key
 * destructors. */
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
#include <unistd.h>
#include <cmocka.h>

#include "preload/preload.h"
#include "clock.h"
#include "fixture.h"

static char tmpdir[] = "/tmp/rlb-test-runtime-XXXXXX";
static char path[256];
static int err_pipe[2] = {-1, -1};

static int saved_stderr = -1;

static void write_config(const char *policy, const char *extra)
{
	fx_write_file(path,
		      "load_balancing = \"%s\";\n%s"
		      "clusters = ( { name = \"rt.cluster\";\n"
		      "  replicas = ( \"127.0.0.2\", \"127.0.0.3\" ); } );\n",
		      policy, extra);
}

/* What the library wrote to stderr since the last call. */
static void read_stderr(char *buf, size_t len)
{
	ssize_t n = read(err_pipe[0], buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
}

static int setup(void **state)
{
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(path, sizeof(path), "%s/replicalb.conf", tmpdir);
	setenv("REPLICALB_CONFIG", path, 1);
	setenv("REPLICALB_STATE_DIR", tmpdir, 1);
	unsetenv("REPLICALB_DISABLE");
	unsetenv("REPLICALB_LOAD_BALANCING");
	/* Catch the library's messages; non-blocking so reads never hang. */
	if (pipe2(err_pipe, O_NONBLOCK) != 0)
		return -1;
	saved_stderr = dup(STDERR_FILENO);
	dup2(err_pipe[1], STDERR_FILENO);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	close(err_pipe[0]);
	close(err_pipe[1]);
	/* Segments outlive the directory that names them. */
	rlb_health_remove_state(&(struct rlb_config){.state_dir = tmpdir}, true,
				NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The policy of rt.cluster in the config in force now. */
static enum rlb_policy policy_in_force(void)
{
	struct rlb_snapshot *snap = rlb_session_acquire();
	enum rlb_policy p;

	assert_non_null(snap);
	p = rlb_config_find(snap->cfg, "RT.cluster.")->s.load_balancing;
	rlb_session_release(snap);
	return p;
}

/* Rewrite the config and move the clock past the reload interval. */
static void edit_config(const char *policy, const char *extra)
{
	write_config(policy, extra);
	test_clock_advance(1100);
}

/* In a child, before anything initialised the runtime. */
static void test_runtime_disable_passes_through(void **state)
{
	pid_t pid;
	int status;

	write_config("in_order", "");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("REPLICALB_DISABLE", "1", 1);
		_exit(rlb_session_acquire() == NULL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_runtime_loads_and_reloads(void **state)
{
	char err[512];

	write_config("in_order", "");
	assert_int_equal(policy_in_force(), RLB_POLICY_IN_ORDER);
	read_stderr(err, sizeof(err));
	assert_string_equal(err, "");

	/* An edit is in force within about a second. */
	edit_config("round_robin", "");
	assert_int_equal(policy_in_force(), RLB_POLICY_ROUND_ROBIN);
}

static void test_runtime_snapshot_stable_while_used(void **state)
{
	struct rlb_snapshot *outer, *inner;

	outer = rlb_session_acquire();
	assert_non_null(outer);
	edit_config("random", "");
	/* A nested use (a hook inside a hook) keeps the caller's snapshot. */
	inner = rlb_session_acquire();
	assert_ptr_equal(inner, outer);
	rlb_session_release(inner);
	assert_int_equal(
		rlb_config_find(outer->cfg, "rt.cluster")->s.load_balancing,
		RLB_POLICY_ROUND_ROBIN);
	rlb_session_release(outer);
	/* Released: the next use sees the new one. */
	assert_int_equal(policy_in_force(), RLB_POLICY_RANDOM);
}

/* A use's clock reading serves the whole use, nested ones included. */
static void test_runtime_use_shares_one_clock_reading(void **state)
{
	struct rlb_snapshot *outer, *inner;
	int64_t at;

	outer = rlb_session_acquire();
	assert_non_null(outer);
	at = rlb_op_monotonic_ms();
	test_clock_advance(50);
	inner = rlb_session_acquire();
	assert_int_equal(rlb_op_monotonic_ms(), at);
	rlb_session_release(inner);
	assert_int_equal(rlb_op_monotonic_ms(), at);
	rlb_session_release(outer);
	assert_true(rlb_op_monotonic_ms() >= at + 50);
}

static void test_runtime_broken_edit_keeps_last_good(void **state)
{
	char err[1024];

	read_stderr(err, sizeof(err));
	edit_config("nearest", "");
	assert_int_equal(policy_in_force(), RLB_POLICY_RANDOM);
	/* One message, with file and line, saying what happens. */
	read_stderr(err, sizeof(err));
	assert_non_null(strstr(err, "replicalb.conf:1: unknown load_balancing "
				    "\"nearest\"; did you mean "
				    "\"nearest_hostname\"?"));
	assert_non_null(strstr(err, "keeping the last good config"));
	assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);

	/* Not reported again while the file stays as it is. */
	test_clock_advance(1100);
	rlb_session_release(rlb_session_acquire());
	read_stderr(err, sizeof(err));
	assert_string_equal(err, "");

	/* Fixed: in force again. */
	edit_config("in_order", "");
	assert_int_equal(policy_in_force(), RLB_POLICY_IN_ORDER);
}

/* log_target = "syslog": messages leave stderr alone (design.md §8). */
static void test_runtime_log_target_syslog(void **state)
{
	char err[512];

	edit_config("in_order", "log_target = \"syslog\";\n");
	assert_int_equal(policy_in_force(), RLB_POLICY_IN_ORDER);
	read_stderr(err, sizeof(err));
	rlb_log(RLB_LOG_ERROR, "to syslog, not stderr");
	read_stderr(err, sizeof(err));
	assert_string_equal(err, "");
	edit_config("in_order", "");
	assert_int_equal(policy_in_force(), RLB_POLICY_IN_ORDER);
	rlb_log(RLB_LOG_ERROR, "back on stderr");
	read_stderr(err, sizeof(err));
	assert_non_null(strstr(err, "]: back on stderr\n"));
}

static void test_runtime_local_hostname_from_config(void **state)
{
	struct rlb_snapshot *snap;
	struct rlb_config *cfg;

	edit_config("nearest_hostname", "local_hostname = \"ch-1.dc1\";\n");
	snap = rlb_session_acquire();
	assert_non_null(snap);
	cfg = snap->cfg;
	assert_string_equal(cfg->local_hostname, "ch-1.dc1");
	/* Hostname priorities are computed at load, against it: the
	 * replica "127.0.0.2" differs from "ch-1.dc1" in all 8 bytes they
	 * share. */
	assert_non_null(rlb_config_find(cfg, "rt.cluster")->view->host_prio);
	assert_int_equal(rlb_config_find(cfg, "rt.cluster")->view->host_prio[0],
			 8);
	rlb_session_release(snap);
	/* Without a config value: this host's name, never NULL. */
	assert_non_null(rlb_session_fqdn());
}

/*
 * A program's pthread key destructor that resolves at thread exit, after
 * the library's own destructor gave back the thread's cached snapshot
 * (it runs first: its key is older), and after an edit that the reload
 * check picks up inside that very call. The reload frees the snapshot
 * the thread cached; nothing may touch it again (this was a
 * heap-use-after-free in refresh_thread_cache under ASan).
 */
static pthread_key_t program_key;
static pthread_barrier_t exit_barrier;
static int policy_at_exit = -1;

/* The policy of rt.cluster now, or -1: no cmocka asserts off the main
 * thread. */
static int policy_now(void)
{
	struct rlb_snapshot *snap = rlb_session_acquire();
	struct rlb_cluster *c;
	int p = -1;

	if (!snap)
		return -1;
	c = rlb_config_find(snap->cfg, "rt.cluster");
	if (c)
		p = (int)c->s.load_balancing;
	rlb_session_release(snap);
	return p;
}

static void program_destructor(void *arg)
{
	policy_at_exit = policy_now();
}

static void *resolve_then_exit(void *arg)
{
	/* Caches the snapshot in force now, newer than the main thread's. */
	policy_now();
	pthread_setspecific(program_key, &program_key);
	pthread_barrier_wait(&exit_barrier);
	/* The main thread edits the config and waits out the interval. */
	pthread_barrier_wait(&exit_barrier);
	return NULL;
}

static void test_runtime_resolve_in_key_destructor(void **state)
{
	pthread_t t;

	/* Sanitizer reports go to the test's log, not to the pipe. */
	dup2(saved_stderr, STDERR_FILENO);
	/* The library's key exists (runtime started); the program's is
	 * newer, so its destructor runs after the library's. */
	policy_in_force();
	assert_int_equal(pthread_key_create(&program_key, program_destructor),
			 0);
	assert_int_equal(pthread_barrier_init(&exit_barrier, NULL, 2), 0);
	/* A reload that only the new thread sees: the main thread does not
	 * share the snapshot that thread caches. */
	edit_config("in_order", "");
	assert_int_equal(pthread_create(&t, NULL, resolve_then_exit, NULL), 0);
	pthread_barrier_wait(&exit_barrier);
	edit_config("round_robin", "");
	pthread_barrier_wait(&exit_barrier);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* The reload happened in the destructor's call. */
	assert_int_equal(policy_at_exit, RLB_POLICY_ROUND_ROBIN);
	assert_int_equal(policy_in_force(), RLB_POLICY_ROUND_ROBIN);
	pthread_barrier_destroy(&exit_barrier);
	pthread_key_delete(program_key);
	dup2(err_pipe[1], STDERR_FILENO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtime_disable_passes_through),
		cmocka_unit_test(test_runtime_loads_and_reloads),
		cmocka_unit_test(test_runtime_snapshot_stable_while_used),
		cmocka_unit_test(test_runtime_use_shares_one_clock_reading),
		cmocka_unit_test(test_runtime_broken_edit_keeps_last_good),
		cmocka_unit_test(test_runtime_log_target_syslog),
		cmocka_unit_test(test_runtime_local_hostname_from_config),
		cmocka_unit_test(test_runtime_resolve_in_key_destructor),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
