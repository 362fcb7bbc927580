/* test_runtime.c - the config in force: lookup from the environment, hot
 * reload, a broken edit keeping the last good config, snapshots that stay
 * valid while in use, REPLICALB_DISABLE. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlb.h"

static char tmpdir[] = "/tmp/rlb-test-runtime-XXXXXX";
static char path[256];
static int err_pipe[2] = {-1, -1};
static int saved_stderr = -1;

static void write_config(const char *policy, const char *extra)
{
	char tmp[300];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fprintf(f,
		"load_balancing = \"%s\";\n%s"
		"clusters = ( { name = \"rt.cluster\";\n"
		"  replicas = ( \"127.0.0.2\", \"127.0.0.3\" ); } );\n",
		policy, extra);
	assert_int_equal(fclose(f), 0);
	/* A rename, as editors and config managers do. */
	assert_int_equal(rename(tmp, path), 0);
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
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
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
		_exit(rlb_runtime_acquire() == NULL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_runtime_loads_and_reloads(void **state)
{
	struct rlb_config *a, *b;
	char err[512];

	write_config("in_order", "");
	a = rlb_runtime_acquire();
	assert_non_null(a);
	assert_int_equal(rlb_config_find(a, "RT.cluster.")->s.load_balancing,
			 RLB_POLICY_IN_ORDER);
	rlb_runtime_release(a);
	read_stderr(err, sizeof(err));
	assert_string_equal(err, "");

	/* An edit is in force within about a second. */
	write_config("round_robin", "");
	usleep(1100 * 1000);
	b = rlb_runtime_acquire();
	assert_non_null(b);
	assert_int_equal(rlb_config_find(b, "rt.cluster")->s.load_balancing,
			 RLB_POLICY_ROUND_ROBIN);
	rlb_runtime_release(b);
}

static void test_runtime_snapshot_stable_while_used(void **state)
{
	struct rlb_config *outer, *inner;

	outer = rlb_runtime_acquire();
	assert_non_null(outer);
	write_config("random", "");
	usleep(1100 * 1000);
	/* A nested use (a hook inside a hook) keeps the caller's snapshot. */
	inner = rlb_runtime_acquire();
	assert_ptr_equal(inner, outer);
	rlb_runtime_release(inner);
	assert_int_equal(rlb_config_find(outer, "rt.cluster")->s.load_balancing,
			 RLB_POLICY_ROUND_ROBIN);
	rlb_runtime_release(outer);
	/* Released: the next use sees the new one. */
	inner = rlb_runtime_acquire();
	assert_int_equal(rlb_config_find(inner, "rt.cluster")->s.load_balancing,
			 RLB_POLICY_RANDOM);
	rlb_runtime_release(inner);
}

static void test_runtime_broken_edit_keeps_last_good(void **state)
{
	struct rlb_config *cfg;
	char err[1024];

	read_stderr(err, sizeof(err));
	write_config("nearest", "");
	usleep(1100 * 1000);
	cfg = rlb_runtime_acquire();
	assert_non_null(cfg);
	assert_int_equal(rlb_config_find(cfg, "rt.cluster")->s.load_balancing,
			 RLB_POLICY_RANDOM);
	rlb_runtime_release(cfg);
	/* One message, with file and line, saying what happens. */
	read_stderr(err, sizeof(err));
	assert_non_null(strstr(err, "replicalb.conf:1: unknown load_balancing "
				    "\"nearest\"; did you mean "
				    "\"nearest_hostname\"?"));
	assert_non_null(strstr(err, "keeping the last good config"));
	assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);

	/* Not reported again while the file stays as it is. */
	usleep(1100 * 1000);
	rlb_runtime_release(rlb_runtime_acquire());
	read_stderr(err, sizeof(err));
	assert_string_equal(err, "");

	/* Fixed: in force again. */
	write_config("in_order", "");
	usleep(1100 * 1000);
	cfg = rlb_runtime_acquire();
	assert_int_equal(rlb_config_find(cfg, "rt.cluster")->s.load_balancing,
			 RLB_POLICY_IN_ORDER);
	rlb_runtime_release(cfg);
}

static void test_runtime_local_hostname_from_config(void **state)
{
	struct rlb_config *cfg;

	write_config("nearest_hostname", "local_hostname = \"ch-1.dc1\";\n");
	usleep(1100 * 1000);
	cfg = rlb_runtime_acquire();
	assert_non_null(cfg);
	assert_string_equal(rlb_runtime_local_hostname(cfg), "ch-1.dc1");
	/* Hostname priorities are computed at load, against it: the
	 * replica "127.0.0.2" differs from "ch-1.dc1" in all 8 bytes they
	 * share. */
	assert_non_null(rlb_config_find(cfg, "rt.cluster")->host_prio);
	assert_int_equal(rlb_config_find(cfg, "rt.cluster")->host_prio[0], 8);
	rlb_runtime_release(cfg);
	/* Without a config value: this host's name, never NULL. */
	assert_non_null(rlb_runtime_local_hostname(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtime_disable_passes_through),
		cmocka_unit_test(test_runtime_loads_and_reloads),
		cmocka_unit_test(test_runtime_snapshot_stable_while_used),
		cmocka_unit_test(test_runtime_broken_edit_keeps_last_good),
		cmocka_unit_test(test_runtime_local_hostname_from_config),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
