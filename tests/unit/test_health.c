/* test_health.c - unit tests of health.c: decay, cap, cross-process
 * counters, reloads, corrupt and unsafe state files, held locks, files
 * truncated or hard-linked while in use, the state directory. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "fixture.h"
#include "engine/engine.h"

/* The largest file the tests read (a name file is one short line). */
/* The connection ledger after n slots: 256 rows of 32 bytes, then
 * entries of 96, 32 per slot, at least 256 (design.md §12.13), written
 * out, not taken from the code. */
#define LEDGER_BYTES(n) (256 * 32 + ((n)*32 < 256 ? 256 : (n)*32) * 96)
#define FILE_SIZE	4096
#define NCHILDREN	8
/* Enough to overlap on two CPUs: 500 each rarely catches a lost update. */
#define ADDS_PER_CHILD 50000

/* Per-test scratch directory; the state dir inside it does not exist yet. */
struct fixture {
	char tmp[64];
	char state[128];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->tmp, "/tmp/rlb-health-XXXXXX");
	if (!mkdtemp(f->tmp)) {
		free(f);
		return -1;
	}
	snprintf(f->state, sizeof(f->state), "%s/state", f->tmp);
	rlb_log_configure(RLB_LOG_NONE, RLB_LOG_STDERR);
	*state = f;
	return 0;
}

static int count_lines_with(const char *text, const char *needle);

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	return remove(path);
}

/* Remove the segments that name files under path name (nftw). */
static int rm_segment(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	char text[128] = "";
	int fd, id;

	if (type != FTW_F || st->st_size > 100)
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	if (read(fd, text, sizeof(text) - 1) > 0 &&
	    sscanf(text, "replicalb-state %*d shm %d", &id) == 1)
		shmctl(id, IPC_RMID, NULL);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	nftw(f->tmp, rm_segment, 16, FTW_PHYS);
	/* And those no state file names any more (a test's damage). */
	rlb_health_remove_state(&(struct rlb_config){.state_dir = f->state},
				true, NULL);
	nftw(f->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	/* And those of directories a test made and removed. */
	rlb_health_gc(NULL);
	free(f);
	return 0;
}

/*
 * Configs alive in this process: reachable from here, they are not leaks
 * to valgrind in forked children, which _exit() without freeing them.
 */
static struct rlb_config *live_cfgs[16];

static void live_track(struct rlb_config *cfg, struct rlb_config *old)
{
	for (size_t i = 0; i < sizeof(live_cfgs) / sizeof(live_cfgs[0]); i++) {
		if (live_cfgs[i] == old) {
			live_cfgs[i] = cfg;
			return;
		}
	}
}

/* A config built by hand, as config.c would leave it: one cluster. */
static struct rlb_config *cfg_new(const char *dir, const char *name,
				  const char *const *hosts, size_t n)
{
	struct rlb_config *cfg = calloc(1, sizeof(*cfg));
	struct rlb_cluster *c;

	assert_non_null(cfg);
	cfg->state_dir = dir ? strdup(dir) : NULL;
	cfg->nclusters = 1;
	cfg->clusters = c = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->name = strdup(name);
	c->name_hash = rlb_hash64(name, strlen(name), 0);
	c->s.half_life = 60;
	c->s.error_cap = 1000;
	c->nreplicas = n;
	c->replicas = calloc(n, sizeof(*c->replicas));
	assert_non_null(c->replicas);
	for (size_t i = 0; i < n; i++) {
		c->replicas[i].host = strdup(hosts[i]);
		c->replicas[i].priority = 1;
		c->replicas[i].identity =
			rlb_hash64(hosts[i], strlen(hosts[i]), 0);
	}
	live_track(cfg, NULL);
	return cfg;
}

/* n replicas named PREFIX0, PREFIX1, ... */
static struct rlb_config *cfg_new_many(const char *dir, const char *name,
				       const char *prefix, size_t n)
{
	char **hosts = calloc(n, sizeof(*hosts));
	struct rlb_config *cfg;

	assert_non_null(hosts);
	for (size_t i = 0; i < n; i++)
		assert_true(asprintf(&hosts[i], "%s%zu", prefix, i) > 0);
	cfg = cfg_new(dir, name, (const char *const *)hosts, n);
	for (size_t i = 0; i < n; i++)
		free(hosts[i]);
	free(hosts);
	return cfg;
}

static void cfg_free(struct rlb_config *cfg)
{
	live_track(NULL, cfg);
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];

		rlb_health_detach(c->health);
		for (size_t j = 0; j < c->nreplicas; j++)
			free(c->replicas[j].host);
		free(c->replicas);
		free(c->name);
	}
	free(cfg->clusters);
	free(cfg->state_dir);
	free(cfg);
}

/*
 * Attach cfg's health as a config load does, then use every cluster once
 * (its path, as `replicalbctl status` reads it): health is attached at
 * first use.
 */
static void attach_now(struct rlb_config *cfg, bool prune)
{
	rlb_health_attach_all(cfg, RLB_STATE_COUNT, prune);
	for (size_t i = 0; i < cfg->nclusters; i++)
		rlb_health_path(cfg->clusters[i].health);
}

static struct rlb_config *attach1(const char *dir, const char *name,
				  const char *const *hosts, size_t n,
				  bool prune)
{
	struct rlb_config *cfg = cfg_new(dir, name, hosts, n);

	attach_now(cfg, prune);
	assert_non_null(cfg->clusters[0].health);
	return cfg;
}

static bool is_private(const struct rlb_config *cfg)
{
	return strcmp(rlb_health_path(cfg->clusters[0].health), "(private)") ==
	       0;
}

/* Number of entries of dir whose name starts with prefix. */
static int count_prefix(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void write_file(const char *path, const void *data, size_t len,
		       mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* Capture what the library writes to stderr (its log). */
struct capture {
	char path[64];
	int saved;
};

static void capture_begin(struct capture *cap)
{
	int fd;

	strcpy(cap->path, "/tmp/rlb-health-log-XXXXXX");
	fd = mkstemp(cap->path);
	assert_true(fd >= 0);
	fflush(stderr);
	cap->saved = dup(STDERR_FILENO);
	assert_true(cap->saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	close(fd);
	rlb_log_configure(RLB_LOG_WARNING, RLB_LOG_STDERR);
}

/* The captured text, malloc'd. */
static char *capture_end(struct capture *cap)
{
	char *text = calloc(1, 8192);
	int fd;

	rlb_log_configure(RLB_LOG_NONE, RLB_LOG_STDERR);
	dup2(cap->saved, STDERR_FILENO);
	close(cap->saved);
	assert_non_null(text);
	fd = open(cap->path, O_RDONLY);
	assert_true(fd >= 0);
	assert_true(read(fd, text, 8191) >= 0);
	close(fd);
	unlink(cap->path);
	return text;
}

static const char *const hosts_ab[] = {"a.example", "b.example"};

/* ------------------------------------------------------------------ */
/* Decay and cap */

static void test_health_tv24_decay_sequence(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 1, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	static const struct {
		int64_t now;
		uint64_t errors;
		int64_t t;
	} steps[] = {
		{1059, 5, 1000}, {1061, 2, 1061}, {1120, 2, 1061},
		{1121, 1, 1121}, {1300, 0, 1300},
	};

	assert_int_equal(rlb_health_decay_time(c), 0);
	rlb_health_decay(c, 1000);
	assert_int_equal(rlb_health_decay_time(c), 1000);
	fx_add_errors(c, 0, 5);
	assert_int_equal(rlb_health_errors(c, 0, 1000, false), 5);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		rlb_health_decay(c, steps[i].now);
		assert_int_equal(rlb_health_errors(c, 0, steps[i].now, false),
				 steps[i].errors);
		assert_int_equal(rlb_health_decay_time(c), steps[i].t);
	}
	cfg_free(cfg);
}

/*
 * The decay refinement (design.md §5): an error that arrives long after
 * the last selection first brings the decay up to date, so the next
 * selection sees it in full. Without it, the selection 2.5 half-lives
 * later would shift the fresh error away: status showed 0.
 */
static void test_health_late_error_counts_in_full(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	c->s.half_life = 1;
	rlb_health_decay(c, 1000); /* a selection: T = 1000 */
	rlb_health_add_errors(c, 0, 1, 1002);
	assert_int_equal(rlb_health_decay_time(c), 1002);
	rlb_health_decay(c, 1002); /* the next selection */
	assert_int_equal(rlb_health_errors(c, 0, 1002, false), 1);
	assert_int_equal(rlb_health_errors(c, 0, 1002, true), 1);
	/* Older errors got the decay they were owed: 8 >> 2 = 2, + 1. */
	fx_add_errors(c, 1, 8);
	rlb_health_add_errors(c, 1, 1, 1004);
	assert_int_equal(rlb_health_errors(c, 1, 1004, false), 3);
	/* Replica 0's 1 was halved twice to 0 by that add; within the
	 * same half-life nothing more is owed and T stays. */
	rlb_health_add_errors(c, 0, 1, 1004);
	assert_int_equal(rlb_health_decay_time(c), 1004);
	assert_int_equal(rlb_health_errors(c, 0, 1004, false), 1);
	cfg_free(cfg);
}

/*
 * Decay moves T for the whole segment, so it shifts every slot: a replica
 * this process does not know (one that left the DNS membership for a
 * while, or one only another process's apps.d overlay has) decays as if
 * it had been there (design.md §15.4).
 */
static void test_health_decay_shifts_replicas_not_known_here(void **state)
{
	static const char *const hosts_a[] = {"a.example"};
	struct fixture *f = *state;
	struct rlb_config *both = attach1(f->state, "db", hosts_ab, 2, false);
	struct rlb_config *one = attach1(f->state, "db", hosts_a, 1, false);
	struct rlb_cluster *cb = &both->clusters[0], *c1 = &one->clusters[0];

	cb->s.half_life = c1->s.half_life = 1;
	rlb_health_decay(cb, 1000);
	fx_add_errors(cb, 1, 8); /* b.example, which `one` does not have */
	fx_add_errors(cb, 0, 8);
	/* `one` moves T three half-lives on: 8 >> 3 = 1, b included. */
	rlb_health_decay(c1, 1003);
	assert_int_equal(rlb_health_decay_time(cb), 1003);
	assert_int_equal(rlb_health_errors(cb, 0, 1003, false), 1);
	assert_int_equal(rlb_health_errors(cb, 1, 1003, false), 1);
	/* A failure charged by identity finds the slot (a member gone). */
	rlb_health_add_by_identity(c1, cb->replicas[1].identity, 2, 1003,
				   false);
	assert_int_equal(rlb_health_errors(cb, 1, 1003, false), 3);
	cfg_free(one);
	cfg_free(both);
}

/* Half-life 0: an add never wipes another add no selection has seen. */
static void test_health_zero_half_life_adds_accumulate(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	c->s.half_life = 0;
	rlb_health_decay(c, 1000);
	rlb_health_add_errors(c, 0, 1, 1005);
	rlb_health_add_errors(c, 0, 1, 1009);
	assert_int_equal(rlb_health_errors(c, 0, 1009, false), 2);
	cfg_free(cfg);
}

/*
 * Slowdowns (ClickHouse's slowdown_count): uncapped, not reduced by
 * max_ignored_errors (that is select.c's business), decayed with the
 * errors, reset with them, and the recovery estimate takes the larger.
 */
static void test_health_slowdowns_decay_uncapped(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	c->s.half_life = 10;
	c->s.error_cap = 4;
	rlb_health_decay(c, 1000);
	rlb_health_add_slowdowns(c, 0, 16, 1000);
	fx_add_errors(c, 0, 16);
	assert_int_equal(rlb_health_slowdowns(c, 0, 1000, false), 16);
	assert_int_equal(rlb_health_errors(c, 0, 1000, false), 4);
	/* bit_length(16) = 5 half-lives of 10 s. */
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 1000), 50);
	assert_int_equal(rlb_health_slowdowns(c, 0, 1020, true), 4);
	rlb_health_decay(c, 1020);
	assert_int_equal(rlb_health_slowdowns(c, 0, 1020, false), 4);
	assert_int_equal(rlb_health_errors(c, 0, 1020, false), 1);
	assert_int_equal(rlb_health_slowdowns(c, 1, 1020, false), 0);
	rlb_health_reset(c, 0);
	assert_int_equal(rlb_health_slowdowns(c, 0, 1020, false), 0);
	cfg_free(cfg);
}

/*
 * A selection's read: the counts, decayed as the selection decays, and
 * whether they decide anything (errors beyond max_ignored_errors, or
 * slowdowns).
 */
static void test_health_select_counts_say_when_they_decide(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	uint64_t e[2], sd[2];

	c->s.half_life = 10;
	c->s.error_cap = 100;
	c->s.max_ignored_errors = 2;
	assert_true(rlb_health_select_counts(c, 2, 1000, false, e, sd));
	assert_int_equal(e[0] + e[1] + sd[0] + sd[1], 0);
	fx_add_errors(c, 1, 2);
	assert_true(rlb_health_select_counts(c, 2, 1000, false, e, sd));
	assert_int_equal(e[1], 2);
	fx_add_errors(c, 1, 2);
	assert_false(rlb_health_select_counts(c, 2, 1000, false, e, sd));
	assert_int_equal(e[1], 4);
	/* A peek sees the decay to come (4 -> 2, within the ignored). */
	assert_true(rlb_health_select_counts(c, 2, 1010, true, e, sd));
	assert_int_equal(e[1], 2);
	assert_int_equal(rlb_health_errors(c, 1, 1010, false), 4);
	/* A selection makes it. */
	assert_true(rlb_health_select_counts(c, 2, 1010, false, e, sd));
	assert_int_equal(rlb_health_errors(c, 1, 1010, false), 2);
	rlb_health_add_slowdowns(c, 0, 1, 1010);
	assert_false(rlb_health_select_counts(c, 2, 1010, false, e, sd));
	assert_int_equal(sd[0], 1);
	cfg_free(cfg);
}

static void test_health_tv25_zero_half_life(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	c->s.half_life = 0;
	rlb_health_decay(c, 1000);
	fx_add_errors(c, 0, 7);
	fx_add_errors(c, 1, 3);
	assert_int_equal(rlb_health_errors(c, 0, 1000, true), 0);
	assert_int_equal(rlb_health_errors(c, 0, 1000, false), 7);
	/* Even within the same second: k is "large". */
	rlb_health_decay(c, 1000);
	assert_int_equal(rlb_health_errors(c, 0, 1000, false), 0);
	assert_int_equal(rlb_health_errors(c, 1, 1000, false), 0);
	fx_add_errors(c, 0, 7);
	rlb_health_decay(c, 5000);
	assert_int_equal(rlb_health_errors(c, 0, 5000, false), 0);
	assert_int_equal(rlb_health_decay_time(c), 5000);
	cfg_free(cfg);
}

static void test_health_tv26_cap(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 1, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	int64_t now = 1000;

	rlb_health_decay(c, now);
	fx_add_errors(c, 0, 999);
	fx_add_errors(c, 0, 3);
	assert_int_equal(rlb_health_errors(c, 0, now, false), 1000);
	fx_add_errors(c, 0, UINT64_MAX);
	assert_int_equal(rlb_health_errors(c, 0, now, false), 1000);
	for (int i = 1; i <= 9; i++) {
		now += 60;
		rlb_health_decay(c, now);
	}
	assert_int_equal(rlb_health_errors(c, 0, now, false), 1);
	rlb_health_decay(c, now + 59);
	assert_int_equal(rlb_health_errors(c, 0, now, false), 1);
	now += 60;
	rlb_health_decay(c, now);
	assert_int_equal(rlb_health_errors(c, 0, now, false), 0);
	assert_int_equal(now - 1000, 600);

	/* A lowered cap applies at the next increment. */
	fx_add_errors(c, 0, 500);
	c->s.error_cap = 10;
	fx_add_errors(c, 0, 1);
	assert_int_equal(rlb_health_errors(c, 0, now, false), 10);
	cfg_free(cfg);
}

static void test_health_clock_backwards_does_nothing(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 1, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	rlb_health_decay(c, 1000);
	fx_add_errors(c, 0, 8);
	assert_int_equal(rlb_health_errors(c, 0, 900, true), 8);
	rlb_health_decay(c, 900);
	assert_int_equal(rlb_health_errors(c, 0, 900, false), 8);
	assert_int_equal(rlb_health_decay_time(c), 1000);
	rlb_health_decay(c, 1060);
	assert_int_equal(rlb_health_errors(c, 0, 1060, false), 4);
	cfg_free(cfg);
}

static void test_health_shift_of_64_or_more_zeroes(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 1, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	c->s.half_life = 1;
	c->s.error_cap = INT64_MAX;
	rlb_health_decay(c, 1000);
	fx_add_errors(c, 0, UINT64_MAX);
	assert_int_equal(rlb_health_errors(c, 0, 1000, false), INT64_MAX);
	rlb_health_decay(c, 1062);
	assert_int_equal(rlb_health_errors(c, 0, 1062, false), 1);
	fx_add_errors(c, 0, INT64_MAX);
	assert_int_equal(rlb_health_errors(c, 0, 1126, true), 0);
	rlb_health_decay(c, 1126);
	assert_int_equal(rlb_health_errors(c, 0, 1126, false), 0);
	fx_add_errors(c, 0, INT64_MAX);
	rlb_health_decay(c, INT64_MAX);
	assert_int_equal(rlb_health_errors(c, 0, INT64_MAX, false), 0);
	assert_int_equal(rlb_health_decay_time(c), INT64_MAX);
	cfg_free(cfg);
}

static void test_health_remainder_discarded(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 1, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	rlb_health_decay(c, 1000);
	fx_add_errors(c, 0, 16);
	rlb_health_decay(c, 1090);
	assert_int_equal(rlb_health_decay_time(c), 1090);
	assert_int_equal(rlb_health_errors(c, 0, 1090, false), 8);
	/* With the remainder kept, T would be 1060 and this would halve. */
	rlb_health_decay(c, 1149);
	assert_int_equal(rlb_health_errors(c, 0, 1149, false), 8);
	rlb_health_decay(c, 1150);
	assert_int_equal(rlb_health_errors(c, 0, 1150, false), 4);
	cfg_free(cfg);
}

static void test_health_decayed_view_changes_nothing(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	/* No T yet: the first selection only starts the clock. */
	fx_add_errors(c, 0, 5);
	assert_int_equal(rlb_health_errors(c, 0, 99999, true), 5);
	rlb_health_decay(c, 1000);
	fx_add_errors(c, 1, 12);
	assert_int_equal(rlb_health_errors(c, 0, 1130, true), 1);
	assert_int_equal(rlb_health_errors(c, 1, 1130, true), 3);
	assert_int_equal(rlb_health_errors(c, 0, 1130, false), 5);
	assert_int_equal(rlb_health_decay_time(c), 1000);
	rlb_health_decay(c, 1130);
	assert_int_equal(rlb_health_errors(c, 0, 1130, false), 1);
	assert_int_equal(rlb_health_errors(c, 1, 1130, false), 3);
	cfg_free(cfg);
}

static void test_health_reset(void **state)
{
	struct fixture *f = *state;
	static const char *const hosts[] = {"a", "b", "c"};
	struct rlb_config *cfg = attach1(f->state, "db", hosts, 3, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	for (size_t i = 0; i < 3; i++)
		fx_add_errors(c, i, i + 1);
	rlb_health_reset(c, 1);
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 1);
	assert_int_equal(rlb_health_errors(c, 1, 0, false), 0);
	assert_int_equal(rlb_health_errors(c, 2, 0, false), 3);
	rlb_health_reset(c, 3); /* out of range: ignored */
	assert_int_equal(rlb_health_errors(c, 2, 0, false), 3);
	rlb_health_reset(c, SIZE_MAX);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(rlb_health_errors(c, i, 0, false), 0);
	cfg_free(cfg);
}

static void test_health_recovery_tv28(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	fx_add_errors(c, 0, 6);
	/* T unset: the full bit_length(6) * H. */
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 5000), 180);
	rlb_health_decay(c, 986);
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 1000), 166);
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 1166), 0);
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 99999), 0);
	assert_int_equal(rlb_health_recovery_seconds(c, 1, 1000), 0);
	c->s.half_life = 0;
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 1000), 0);
	cfg_free(cfg);
}

/* ------------------------------------------------------------------ */
/* Sharing between processes */

static void test_health_shared_between_attaches(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *c2 = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *a = &c1->clusters[0], *b = &c2->clusters[0];
	char expect[512];

	snprintf(expect, sizeof(expect), "%s/db.state", f->state);
	assert_string_equal(rlb_health_path(a->health), expect);
	fx_add_errors(a, 1, 4);
	assert_int_equal(rlb_health_errors(b, 1, 0, false), 4);
	assert_int_equal(rlb_health_rr_next(a), 0);
	assert_int_equal(rlb_health_rr_next(b), 1);
	assert_int_equal(rlb_health_rr_peek(a), 2);
	assert_int_equal(rlb_health_rr_peek(b), 2);
	rlb_health_decay(b, 777);
	assert_int_equal(rlb_health_decay_time(a), 777);
	cfg_free(c2);

	/* Attaching the same config again keeps everything. */
	attach_now(c1, true);
	assert_int_equal(rlb_health_errors(a, 1, 0, false), 4);
	assert_int_equal(rlb_health_rr_peek(a), 2);
	cfg_free(c1);
}

/*
 * Start line in shared memory: [0] opens it, [1] counts children ready,
 * so that they all hammer the counters at once.
 */
static atomic_int *gate_new(void)
{
	atomic_int *g = mmap(NULL, 2 * sizeof(*g), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(g != MAP_FAILED);
	return g;
}

static void gate_wait(atomic_int *g)
{
	atomic_fetch_add(&g[1], 1);
	while (!atomic_load(&g[0]))
		sched_yield();
}

static void gate_open(atomic_int *g, int n)
{
	while (atomic_load(&g[1]) < n)
		sched_yield();
	atomic_store(&g[0], 1);
}

/* Child body: ADDS_PER_CHILD increments of replica 0; own attach or
 * inherited mapping. */
static int child_add(const char *dir, struct rlb_config *inherited,
		     atomic_int *gate)
{
	struct rlb_config *cfg = inherited;
	int rc = 0;

	if (!cfg) {
		cfg = cfg_new(dir, "db", hosts_ab, 2);
		cfg->clusters[0].s.error_cap = 1000000;
		attach_now(cfg, false);
		if (strcmp(rlb_health_path(cfg->clusters[0].health),
			   "(private)") == 0)
			rc = 2;
	}
	gate_wait(gate);
	for (int i = 0; i < ADDS_PER_CHILD; i++)
		fx_add_errors(&cfg->clusters[0], 0, 1);
	if (!inherited)
		cfg_free(cfg);
	return rc;
}

static void wait_children(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		int status;

		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

static void test_health_fork_adds_exactly(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	atomic_int *gate = gate_new();
	pid_t pids[NCHILDREN];

	assert_false(is_private(cfg));
	c->s.error_cap = 1000000;
	for (int i = 0; i < NCHILDREN; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			/* Half share our mapping, half map the file. */
			_exit(child_add(f->state, i % 2 ? cfg : NULL, gate));
		}
	}
	gate_open(gate, NCHILDREN);
	wait_children(pids, NCHILDREN);
	munmap(gate, 2 * sizeof(*gate));
	assert_int_equal(rlb_health_errors(c, 0, 0, false),
			 NCHILDREN * ADDS_PER_CHILD);
	assert_int_equal(rlb_health_errors(c, 1, 0, false), 0);
	cfg_free(cfg);
}

static void test_health_fork_rr_distinct(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	const size_t per = 20000, n = NCHILDREN * per;
	atomic_int *gate = gate_new();
	pid_t pids[NCHILDREN];
	uint64_t *vals;
	uint64_t base;

	vals = mmap(NULL, n * sizeof(*vals), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(vals != MAP_FAILED);
	rlb_health_rr_next(c);
	base = rlb_health_rr_peek(c);
	for (int i = 0; i < NCHILDREN; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct rlb_config *own = cfg;

			if (i % 2) {
				own = cfg_new(f->state, "db", hosts_ab, 2);
				attach_now(own, false);
			}
			gate_wait(gate);
			for (size_t j = 0; j < per; j++)
				vals[i * per + j] =
					rlb_health_rr_next(&own->clusters[0]);
			if (own != cfg)
				cfg_free(own);
			_exit(0);
		}
	}
	gate_open(gate, NCHILDREN);
	wait_children(pids, NCHILDREN);
	munmap(gate, 2 * sizeof(*gate));
	assert_int_equal(rlb_health_rr_peek(c), base + n);
	/* Counting sort: every value in [base, base + n) exactly once. */
	{
		unsigned char *seen = calloc(n, 1);

		assert_non_null(seen);
		for (size_t j = 0; j < n; j++) {
			assert_in_range(vals[j], base, base + n - 1);
			assert_int_equal(seen[vals[j] - base], 0);
			seen[vals[j] - base] = 1;
		}
		free(seen);
	}
	munmap(vals, n * sizeof(*vals));
	cfg_free(cfg);
}

/* ------------------------------------------------------------------ */
/* Reloads */

static void test_health_reload_keeps_by_identity(void **state)
{
	struct fixture *f = *state;
	static const char *const reordered[] = {"new.example", "b.example",
						"a.example"};
	struct rlb_config *c1 = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *c2;
	struct rlb_cluster *a, *b;

	a = &c1->clusters[0];
	rlb_health_decay(a, 1000);
	fx_add_errors(a, 0, 3);
	fx_add_errors(a, 1, 5);
	rlb_health_rr_next(a);
	c2 = attach1(f->state, "db", reordered, 3, true);
	b = &c2->clusters[0];
	assert_false(is_private(c2));
	assert_int_equal(rlb_health_errors(b, 0, 1000, false), 0);
	assert_int_equal(rlb_health_errors(b, 1, 1000, false), 5);
	assert_int_equal(rlb_health_errors(b, 2, 1000, false), 3);
	assert_int_equal(rlb_health_rr_peek(b), 1);
	assert_int_equal(rlb_health_decay_time(b), 1000);
	/* Both versions of the config keep working on the same counters. */
	fx_add_errors(b, 0, 2);
	fx_add_errors(b, 2, 1);
	assert_int_equal(rlb_health_errors(a, 0, 1000, false), 4);
	cfg_free(c1);
	cfg_free(c2);
}

static void test_health_prune_drops_removed(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *c2, *c3;

	fx_add_errors(&c1->clusters[0], 0, 3);
	fx_add_errors(&c1->clusters[0], 1, 5);
	c2 = attach1(f->state, "db", hosts_ab, 1, true); /* b removed */
	assert_int_equal(rlb_health_errors(&c2->clusters[0], 0, 0, false), 3);
	cfg_free(c2);
	c3 = attach1(f->state, "db", hosts_ab, 2, true); /* b back */
	assert_int_equal(rlb_health_errors(&c3->clusters[0], 0, 0, false), 3);
	assert_int_equal(rlb_health_errors(&c3->clusters[0], 1, 0, false), 0);
	cfg_free(c3);
	cfg_free(c1);
}

static void test_health_prune_then_stale_config_reclaims(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *old = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *c2, *c3;

	fx_add_errors(&old->clusters[0], 1, 5);
	c2 = attach1(f->state, "db", hosts_ab, 1, true); /* b pruned */
	/* A process still on the old config finds b's slot gone. */
	assert_int_equal(rlb_health_errors(&old->clusters[0], 1, 0, false), 0);
	fx_add_errors(&old->clusters[0], 1, 2);
	c3 = attach1(f->state, "db", hosts_ab, 2, false);
	assert_int_equal(rlb_health_errors(&c3->clusters[0], 1, 0, false), 2);
	cfg_free(c3);
	cfg_free(c2);
	cfg_free(old);
}

static void test_health_no_prune_keeps_removed(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *c2, *c3;

	fx_add_errors(&c1->clusters[0], 1, 5);
	cfg_free(c1);
	c2 = attach1(f->state, "db", hosts_ab, 1, false);
	c3 = attach1(f->state, "db", hosts_ab, 2, false);
	assert_int_equal(rlb_health_errors(&c3->clusters[0], 1, 0, false), 5);
	cfg_free(c3);
	cfg_free(c2);
}

static void test_health_rebuild_when_full_of_tombstones(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *ca, *cb, *cc, *cd;
	const size_t n = RLB_MAX_REPLICAS;
	static const char *const hosts_c[] = {"b0", "new"};

	ca = cfg_new_many(f->state, "db", "a", n);
	attach_now(ca, true);
	fx_add_errors(&ca->clusters[0], 0, 7);
	/* b* fill the other half; pruning a* leaves no empty slot. */
	cb = cfg_new_many(f->state, "db", "b", n);
	attach_now(cb, true);
	assert_false(is_private(cb));
	fx_add_errors(&cb->clusters[0], 0, 4);
	fx_add_errors(&cb->clusters[0], n - 1, 9);
	cc = attach1(f->state, "db", hosts_c, 2, false);
	assert_false(is_private(cc));
	assert_int_equal(rlb_health_errors(&cc->clusters[0], 0, 0, false), 4);
	fx_add_errors(&cc->clusters[0], 1, 6);
	cd = attach1(f->state, "db", hosts_c, 2, false);
	assert_int_equal(rlb_health_errors(&cd->clusters[0], 1, 0, false), 6);
	/* Entries moved by the rebuild are found again. */
	assert_int_equal(rlb_health_errors(&cb->clusters[0], n - 1, 0, false),
			 9);
	assert_int_equal(rlb_health_errors(&cb->clusters[0], 0, 0, false), 4);
	assert_int_equal(rlb_health_errors(&ca->clusters[0], 0, 0, false), 0);
	cfg_free(ca);
	cfg_free(cb);
	cfg_free(cc);
	cfg_free(cd);
}

static void test_health_full_table_keeps_counted_entries(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *ca, *cb, *cc;
	const size_t n = RLB_MAX_REPLICAS;
	static const char *const hosts_c[] = {"c0"};

	ca = cfg_new_many(f->state, "db", "a", n);
	attach_now(ca, false);
	fx_add_errors(&ca->clusters[0], 0, 7);
	cb = cfg_new_many(f->state, "db", "b", n);
	attach_now(cb, false);
	assert_int_equal(rlb_health_errors(&ca->clusters[0], 0, 0, false), 7);
	/*
	 * 8192 live entries: a third config gets room in a successor of the
	 * same size, which keeps the entries that have counts.
	 */
	cc = attach1(f->state, "db", hosts_c, 1, false);
	assert_false(is_private(cc));
	fx_add_errors(&cc->clusters[0], 0, 2);
	assert_int_equal(rlb_health_errors(&cc->clusters[0], 0, 0, false), 2);
	assert_int_equal(rlb_health_errors(&ca->clusters[0], 0, 0, false), 7);
	cfg_free(ca);
	cfg_free(cb);
	cfg_free(cc);
}

/* ------------------------------------------------------------------ */
/* Segments: found, sized, checked (design.md §12) */

/* The segment that name file path names, or -1; its token into *token. */
static int named_segment(const char *path, uint64_t *token)
{
	char text[128] = "";
	unsigned long long tok = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW), id = -1;

	if (fd < 0)
		return -1;
	if (read(fd, text, sizeof(text) - 1) < 0 ||
	    sscanf(text, "replicalb-state %*d shm %d %llx", &id, &tok) != 2)
		id = -1;
	close(fd);
	if (token)
		*token = tok;
	return id;
}

/* The segment of cluster db in f's state directory, or -1. */
static int db_segment(const struct fixture *f)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/db.state", f->state);
	return named_segment(path, NULL);
}

static struct shmid_ds segment_stat(int id)
{
	struct shmid_ds ds;

	memset(&ds, 0, sizeof(ds));
	assert_int_equal(shmctl(id, IPC_STAT, &ds), 0);
	return ds;
}

/* Whether segment id is gone or marked for removal. */
static bool segment_removed(int id)
{
	struct shmid_ds ds;

	return shmctl(id, IPC_STAT, &ds) != 0 || (ds.shm_perm.mode & SHM_DEST);
}

static void test_health_sized_to_cluster(void **state)
{
	static const char *const hosts3[] = {"a", "b", "c"};
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts3, 3, false);
	struct rlb_config *big;
	struct shmid_ds ds;
	char path[512];
	int id;

	assert_false(is_private(c1));
	id = db_segment(f);
	assert_true(id >= 0);
	ds = segment_stat(id);
	/* 8 slots of 64 bytes for 3 replicas (load factor <= 1/2), then
	 * the ledger: 256 rows of 32 bytes, 256 entries of 96. */
	assert_int_equal(ds.shm_segsz, 128 + 8 * 64 + LEDGER_BYTES(8));
	assert_int_equal(ds.shm_perm.mode & 0777, 0600);
	assert_int_equal(ds.shm_perm.uid, geteuid());
	assert_int_equal(ds.shm_perm.cuid, geteuid());
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	assert_string_equal(rlb_health_path(c1->clusters[0].health), path);
	cfg_free(c1);

	big = cfg_new_many(f->state, "big", "h", RLB_MAX_REPLICAS);
	attach_now(big, false);
	snprintf(path, sizeof(path), "%s/big.state", f->state);
	id = named_segment(path, NULL);
	assert_true(id >= 0);
	assert_int_equal(segment_stat(id).shm_segsz,
			 128 + 2 * RLB_MAX_REPLICAS * 64 + 256 * 32 +
				 16384 * 96);
	cfg_free(big);
}

static void test_health_attached_at_first_use(void **state)
{
	struct fixture *f = *state;
	const size_t n = 2000;
	struct rlb_config *cfg = calloc(1, sizeof(*cfg));
	struct rlb_selection *sel;
	struct stat st;

	/* 2,000 clusters of one replica: loading costs no state at all. */
	assert_non_null(cfg);
	cfg->state_dir = strdup(f->state);
	cfg->nclusters = n;
	cfg->clusters = calloc(n, sizeof(*cfg->clusters));
	for (size_t i = 0; i < n; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];

		assert_true(asprintf(&c->name, "c%zu", i) > 0);
		c->name_hash = rlb_hash64(c->name, strlen(c->name), 0);
		c->s.half_life = 60;
		c->s.error_cap = 1000;
		c->nreplicas = 1;
		c->replicas = calloc(1, sizeof(*c->replicas));
		c->replicas[0].host = strdup("h");
		c->replicas[0].identity = rlb_hash64("h", 1, 0);
	}
	live_track(cfg, NULL);
	rlb_health_attach_all(cfg, RLB_STATE_COUNT, true);
	assert_int_equal(lstat(f->state, &st), -1);
	/* The first selection attaches its cluster, and only that one. */
	sel = rlb_selection_new(1);
	rlb_select(&cfg->clusters[7], false, 1000, sel);
	free(sel);
	assert_int_equal(count_prefix(f->state, "c"), 1);
	assert_int_equal(count_prefix(f->state, "c7.state"), 1);
	/* The first count and the first status read attach theirs. */
	rlb_health_add_errors(&cfg->clusters[9], 0, 1, 1000);
	rlb_health_path(cfg->clusters[11].health);
	assert_int_equal(count_prefix(f->state, "c"), 3);
	cfg_free(cfg);
}

/*
 * Cluster db reloaded with 10 replicas, the first of them "c" (one of the
 * 3 before): 10 do not fit 8 slots at load 1/2, so a larger segment
 * replaces the old one. Attached, pruning.
 */
static struct rlb_config *attach_grown(const char *dir)
{
	struct rlb_config *cfg = cfg_new_many(dir, "db", "r", 10);

	free(cfg->clusters[0].replicas[0].host);
	cfg->clusters[0].replicas[0].host = strdup("c");
	cfg->clusters[0].replicas[0].identity = rlb_hash64("c", 1, 0);
	attach_now(cfg, true);
	return cfg;
}

static void test_health_grows_when_reload_adds_replicas(void **state)
{
	static const char *const hosts3[] = {"a", "b", "c"};
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts3, 3, false);
	struct rlb_config *c2;
	struct rlb_cluster *a, *b;
	int id1, id2;

	a = &c1->clusters[0];
	rlb_health_decay(a, 1000);
	fx_add_errors(a, 0, 3);
	fx_add_errors(a, 2, 5);
	rlb_health_rr_next(a);
	id1 = db_segment(f);
	c2 = attach_grown(f->state);
	b = &c2->clusters[0];
	id2 = db_segment(f);
	assert_true(id2 >= 0);
	assert_int_not_equal(id1, id2);
	assert_int_equal(segment_stat(id2).shm_segsz,
			 128 + 32 * 64 + LEDGER_BYTES(32));
	/* The old one goes once its last user detaches. */
	assert_true(segment_removed(id1));
	assert_int_equal(rlb_health_errors(b, 0, 1000, false), 5);
	assert_int_equal(rlb_health_decay_time(b), 1000);
	assert_int_equal(rlb_health_rr_peek(b), 1);
	/* A process still on the old segment follows, counts included. */
	fx_add_errors(a, 1, 4);
	fx_add_errors(b, 0, 1);
	assert_int_equal(rlb_health_errors(a, 2, 1000, false), 6);
	assert_int_equal(rlb_health_errors(a, 1, 1000, false), 4);
	assert_int_equal(rlb_health_errors(a, 0, 1000, false), 0); /* pruned */
	cfg_free(c1);
	cfg_free(c2);
	c1 = attach1(f->state, "db", hosts3, 3, false);
	assert_int_equal(rlb_health_errors(&c1->clusters[0], 2, 0, false), 6);
	assert_int_equal(db_segment(f), id2);
	cfg_free(c1);
}

/*
 * Attach over a damaged name file db.state: set aside, recreated, counts
 * at 0, and a warning naming the file and the reason.
 */
static void check_set_aside(struct fixture *f, const char *reason)
{
	struct rlb_config *cfg;
	struct capture cap;
	char path[512];
	char *log;
	int id;

	snprintf(path, sizeof(path), "%s/db.state", f->state);
	capture_begin(&cap);
	cfg = attach1(f->state, "db", hosts_ab, 2, true);
	log = capture_end(&cap);
	assert_false(is_private(cfg));
	assert_non_null(strstr(log, "corrupt"));
	assert_non_null(strstr(log, path));
	assert_non_null(strstr(log, reason));
	free(log);
	assert_int_equal(count_prefix(f->state, "db.state.corrupt-"), 1);
	id = named_segment(path, NULL);
	assert_true(id >= 0);
	assert_false(segment_removed(id));
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 0, 0, false), 0);
	assert_int_equal(rlb_health_rr_peek(&cfg->clusters[0]), 0);
	assert_int_equal(rlb_health_decay_time(&cfg->clusters[0]), 0);
	fx_add_errors(&cfg->clusters[0], 0, 2);
	cfg_free(cfg);
	/* The new one is good: the next attach keeps it. */
	cfg = attach1(f->state, "db", hosts_ab, 2, true);
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 0, 0, false), 2);
	assert_int_equal(count_prefix(f->state, "db.state.corrupt-"), 1);
	assert_int_equal(named_segment(path, NULL), id);
	cfg_free(cfg);
}

/* Remove the saved-counts files set aside in dir. */
static void rm_saved_corrupt(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "db.saved.corrupt-", 17) == 0) {
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			unlink(p);
		}
	closedir(d);
}

/* A valid db.state with counts, detached again; its path and segment. */
static int make_valid_state(struct fixture *f, char *path, size_t len)
{
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);

	fx_add_errors(&cfg->clusters[0], 0, 9);
	rlb_health_rr_next(&cfg->clusters[0]);
	cfg_free(cfg);
	snprintf(path, len, "%s/db.state", f->state);
	return named_segment(path, NULL);
}

static void test_health_bad_name_files_set_aside(void **state)
{
	static const struct {
		const char *text;
		const char *reason;
	} bad[] = {
		{"", "empty"},
		{"garbage\n", "not a name file"},
		{"replicalb-state 1 shm 1", "not a name file"},
		{"replicalb-state 1 shm +5 0000000000000001\n",
		 "not a name file"},
		{"replicalb-state 1 shm 2147483000 0000000000000001\n",
		 "removed"},
		{"replicalb-state 2 shm 1 0000000000000001\n",
		 "not a name file"},
		{"replicalb-state 2 shm 1 0000000000000001 0000000000000000\n",
		 "not a name file"},
		{"replicalb-state 2 shm 1 0000000000000001 00ff\n",
		 "not a name file"},
		{"replicalb-state 3 memfd 0 3 7 0000000000000001 "
		 "0000000000000001\n",
		 "not a name file"},
		{"replicalb-state 3 memfd 1 3 7 0000000000000001 "
		 "0000000000000000\n",
		 "not a name file"},
		{"replicalb-state 3 memfd 1 -3 7 0000000000000001 "
		 "0000000000000001\n",
		 "not a name file"},
		{"replicalb-state 3 shm 1 0000000000000001 "
		 "0000000000000001\n",
		 "not a name file"},
	};
	struct fixture *f = *state;
	char path[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		make_valid_state(f, path, sizeof(path));
		shmctl(named_segment(path, NULL), IPC_RMID, NULL);
		write_file(path, bad[i].text, strlen(bad[i].text), 0600);
		check_set_aside(f, bad[i].reason);
		shmctl(named_segment(path, NULL), IPC_RMID, NULL);
		nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
}

static void test_health_name_file_cut_or_of_other_kind_set_aside(void **state)
{
	struct fixture *f = *state;
	char path[512], target[512];
	struct stat st;
	int id;

	/* Cut short (truncate -s 10): the segment it named is left alone. */
	id = make_valid_state(f, path, sizeof(path));
	assert_int_equal(truncate(path, 10), 0);
	check_set_aside(f, "not a name file");
	assert_int_equal(shmctl(id, IPC_RMID, NULL), 0);
	shmctl(db_segment(f), IPC_RMID, NULL);
	nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

	/* A symlink: set aside itself, its target never touched. */
	assert_int_equal(mkdir(f->state, 0700), 0);
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	snprintf(target, sizeof(target), "%s/elsewhere", f->tmp);
	assert_int_equal(symlink(target, path), 0);
	check_set_aside(f, "symlink");
	assert_int_equal(lstat(target, &st), -1);
	shmctl(db_segment(f), IPC_RMID, NULL);
	nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

	/* A FIFO: not opened for long, never blocks. */
	assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	check_set_aside(f, "regular");
	shmctl(db_segment(f), IPC_RMID, NULL);
	nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

	/* Writable by others. */
	id = make_valid_state(f, path, sizeof(path));
	assert_int_equal(chmod(path, 0666), 0);
	check_set_aside(f, "writable by others");
	shmctl(id, IPC_RMID, NULL);
}

static void test_health_version_2_file_replaced(void **state)
{
	struct fixture *f = *state;
	char path[512], *zeros = calloc(1, 64 + 8192 * 32);
	struct rlb_config *cfg;

	assert_int_equal(mkdir(f->state, 0700), 0);
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	memcpy(zeros, "RLBSTATE\2\0\0\0", 12);
	write_file(path, zeros, 64 + 8192 * 32, 0600);
	free(zeros);
	cfg = attach1(f->state, "db", hosts_ab, 2, true);
	assert_false(is_private(cfg));
	/* Removed, not kept as 256 KiB of .corrupt in a tmpfs. */
	assert_int_equal(count_prefix(f->state, "db.state.corrupt-"), 0);
	assert_true(db_segment(f) >= 0);
	cfg_free(cfg);
}

/*
 * A segment of ours made by hand with the header of db's state (taken
 * from a real one) but mode `mode`, named by db.state.
 */
static int forged_segment(struct fixture *f, mode_t mode)
{
	char path[512], text[128];
	uint64_t token;
	void *src, *dst;
	int id, real;

	real = make_valid_state(f, path, sizeof(path));
	named_segment(path, &token);
	id = shmget(IPC_PRIVATE, segment_stat(real).shm_segsz,
		    IPC_CREAT | mode);
	assert_true(id >= 0);
	src = shmat(real, NULL, SHM_RDONLY);
	dst = shmat(id, NULL, 0);
	assert_true(src != (void *)-1 && dst != (void *)-1);
	memcpy(dst, src, segment_stat(real).shm_segsz);
	shmdt(src);
	shmdt(dst);
	assert_int_equal(shmctl(real, IPC_RMID, NULL), 0);
	snprintf(text, sizeof(text), "replicalb-state 1 shm %d %016llx\n", id,
		 (unsigned long long)token);
	write_file(path, text, strlen(text), 0600);
	return id;
}

static void test_health_segment_of_wrong_mode_not_used(void **state)
{
	struct fixture *f = *state;
	int id = forged_segment(f, 0666);

	check_set_aside(f, "segment mode 0666");
	/* Not ours to remove: another may have made it for that mode. */
	assert_false(segment_removed(id));
	assert_int_equal(shmctl(id, IPC_RMID, NULL), 0);
}

static void test_health_segment_of_other_owner_not_used(void **state)
{
	struct fixture *f = *state;
	struct shmid_ds ds;
	int id;

	if (geteuid() != 0)
		skip();
	id = forged_segment(f, 0600);
	ds = segment_stat(id);
	ds.shm_perm.uid = 65534;
	assert_int_equal(shmctl(id, IPC_SET, &ds), 0);
	check_set_aside(f, "uid 65534");
	assert_int_equal(shmctl(id, IPC_RMID, NULL), 0);
}

static void test_health_name_file_of_other_cluster_set_aside(void **state)
{
	struct fixture *f = *state;
	char path[512], other[512];
	struct rlb_config *cfg;

	cfg = attach1(f->state, "other", hosts_ab, 2, true);
	fx_add_errors(&cfg->clusters[0], 0, 4);
	snprintf(other, sizeof(other), "%s/other.state", f->state);
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	assert_int_equal(link(other, path), 0); /* cp would do the same */
	check_set_aside(f, "another cluster's");
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 0, 0, false), 4);
	cfg_free(cfg);
}

/* ------------------------------------------------------------------ */
/* Damage while in use (design.md §12.9) */

/* Long enough for the once-a-second read of the name file. */
static void sleep_follow(void)
{
	usleep(1100 * 1000);
}

/*
 * A name file of version 1, as the release before this one wrote it
 * (no IPC namespace), is read: its segment is used, nothing set aside.
 */
static void test_health_name_file_of_version_1_read(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, false);
	char path[512], text[128];
	uint64_t token;
	int id;

	fx_add_errors(&cfg->clusters[0], 1, 3);
	cfg_free(cfg);
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	id = named_segment(path, &token);
	assert_true(id >= 0);
	snprintf(text, sizeof(text), "replicalb-state 1 shm %d %016llx\n", id,
		 (unsigned long long)token);
	write_file(path, text, strlen(text), 0600);
	cfg = attach1(f->state, "db", hosts_ab, 2, false);
	assert_false(is_private(cfg));
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 1, 0, false), 3);
	assert_int_equal(named_segment(path, NULL), id);
	assert_int_equal(count_prefix(f->state, "db.state."), 0);
	cfg_free(cfg);
}

/*
 * One of two processes in IPC namespaces of their own that share the
 * state directory (Docker's default, with /tmp or a volume shared): they
 * take turns; each attaches, then reads the name file again once a
 * (moved) second and adds an error. The second to attach warns once.
 */
static int ns_child(const char *dir, atomic_int *turn, int me, int rounds)
{
	struct rlb_config *cfg = NULL;
	struct capture cap;
	int rc = 0, warned;
	char *log;

	if (unshare(CLONE_NEWIPC) != 0)
		return 77;
	capture_begin(&cap);
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(turn) % 2 != me)
			sched_yield();
		if (!cfg)
			cfg = attach1(dir, "db", hosts_ab, 2, false);
		test_clock_advance(1100);
		fx_add_errors(&cfg->clusters[0], 0, 1);
		atomic_fetch_add(turn, 1);
	}
	log = capture_end(&cap);
	warned = count_lines_with(log, "another IPC namespace");
	if (is_private(cfg))
		rc = 1;
	else if (rlb_health_errors(&cfg->clusters[0], 0, 0, false) !=
		 (uint64_t)rounds)
		rc = 2;
	else if (warned != me || count_lines_with(log, "replicalb[") != me)
		rc = 3;
	free(log);
	cfg_free(cfg);
	return rc;
}

static void test_health_ipc_namespaces_share_a_dir(void **state)
{
	struct fixture *f = *state;
	atomic_int *turn;
	pid_t pids[2];
	int status;

	if (geteuid() != 0)
		skip();
	turn = gate_new();
	for (int i = 0; i < 2; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(ns_child(f->state, turn, i, 6));
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status));
		if (WEXITSTATUS(status) == 77)
			skip();
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	munmap(turn, 2 * sizeof(*turn));
	/* Nothing set aside; the second namespace's file beside the first. */
	assert_int_equal(count_prefix(f->state, "db.state.corrupt"), 0);
	assert_int_equal(count_prefix(f->state, "db.state.ipc-"), 1);
	assert_int_equal(count_prefix(f->state, "db.state"), 2);
}

static void test_health_name_file_damaged_while_in_use(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	char path[512], copy[128];
	int id = db_segment(f), fd;

	snprintf(path, sizeof(path), "%s/db.state", f->state);
	fx_add_errors(c, 0, 3);
	/* Emptied, cut, removed: the segment is named again, counts kept. */
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, copy, sizeof(copy)) > 0, 1);
	close(fd);
	assert_int_equal(truncate(path, 0), 0);
	sleep_follow();
	fx_add_errors(c, 0, 1);
	assert_int_equal(named_segment(path, NULL), id);
	assert_int_equal(truncate(path, 20), 0);
	sleep_follow();
	fx_add_errors(c, 0, 1);
	assert_int_equal(named_segment(path, NULL), id);
	assert_int_equal(unlink(path), 0);
	sleep_follow();
	fx_add_errors(c, 0, 1);
	assert_int_equal(named_segment(path, NULL), id);
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 6);
	assert_false(segment_removed(id));
	cfg_free(cfg);
}

static void test_health_segment_removed_while_in_use(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *other = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	int id = db_segment(f), id2;

	fx_add_errors(c, 1, 5);
	rlb_health_rr_next(c);
	/* ipcrm -m: both processes move to a new segment with the counts. */
	assert_int_equal(shmctl(id, IPC_RMID, NULL), 0);
	sleep_follow();
	fx_add_errors(c, 1, 1);
	id2 = db_segment(f);
	assert_true(id2 >= 0);
	assert_int_not_equal(id2, id);
	assert_int_equal(rlb_health_errors(c, 1, 0, true), 6);
	fx_add_errors(&other->clusters[0], 1, 1);
	assert_int_equal(db_segment(f), id2);
	assert_int_equal(rlb_health_errors(c, 1, 0, false), 7);
	cfg_free(cfg);
	cfg_free(other);
}

static void test_health_name_file_replaced_while_in_use(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	char path[512], backup[512];
	int id = db_segment(f), id2;

	snprintf(path, sizeof(path), "%s/db.state", f->state);
	snprintf(backup, sizeof(backup), "%s/backup", f->tmp);
	fx_add_errors(c, 0, 2);
	/* A backup of another time, restored by cp, names a new segment. */
	assert_int_equal(rename(path, backup), 0);
	cfg_free(attach1(f->state, "db", hosts_ab, 2, true));
	id2 = db_segment(f);
	assert_int_not_equal(id2, id);
	sleep_follow();
	fx_add_errors(c, 0, 1);
	/* Followed, with what was counted in the old one. */
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 3);
	assert_true(segment_removed(id));
	assert_int_equal(db_segment(f), id2);
	cfg_free(cfg);
	unlink(backup);
}

static void test_health_successor_removed_before_followed(void **state)
{
	static const char *const hosts3[] = {"a", "b", "c"};
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts3, 3, false);
	struct rlb_config *c2 = cfg_new_many(f->state, "db", "r", 10);
	struct rlb_cluster *a = &c1->clusters[0];
	int id1 = db_segment(f), id2;

	fx_add_errors(a, 0, 3);
	attach_now(c2, false);
	id2 = db_segment(f);
	assert_int_not_equal(id1, id2);
	/* The successor goes before this process has followed it. */
	cfg_free(c2);
	assert_int_equal(shmctl(id2, IPC_RMID, NULL), 0);
	assert_true(segment_removed(id2));
	fx_add_errors(a, 0, 1);
	fx_add_errors(a, 0, 1);
	/* Still counting where it is (the 3 had moved with the successor). */
	assert_int_equal(rlb_health_errors(a, 0, 0, false), 2);
	/* Once the name file is read again, a new segment, counts kept. */
	sleep_follow();
	fx_add_errors(a, 0, 1);
	assert_int_equal(rlb_health_errors(a, 0, 0, false), 3);
	assert_true(db_segment(f) >= 0);
	assert_int_not_equal(db_segment(f), id2);
	assert_false(segment_removed(db_segment(f)));
	cfg_free(c1);
}

/* Child body: selections and adds every ms for about 1.5 s. */
static int child_busy(const char *dir, atomic_int *gate)
{
	struct rlb_config *cfg = cfg_new(dir, "db", hosts_ab, 2);
	struct rlb_selection *sel;
	struct rlb_cluster *c;

	attach_now(cfg, false);
	c = &cfg->clusters[0];
	sel = rlb_selection_new(c->nreplicas);
	if (!sel)
		return 2;
	gate_wait(gate);
	for (int i = 0; i < 1500; i++) {
		rlb_select(c, false, 1000, sel);
		rlb_health_add_errors(c, (size_t)i % 2, 1, 1000);
		rlb_health_path(c->health);
		usleep(1000);
	}
	free(sel);
	cfg_free(cfg);
	return 0;
}

static void test_health_damage_kills_no_process(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	atomic_int *gate = gate_new();
	pid_t pids[NCHILDREN / 2];
	const int n = NCHILDREN / 2;
	char path[512];

	snprintf(path, sizeof(path), "%s/db.state", f->state);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(child_busy(f->state, gate));
	}
	gate_open(gate, n);
	for (int round = 0; round < 20; round++) {
		usleep(60 * 1000);
		switch (round % 4) {
		case 0:
			truncate(path, 0);
			break;
		case 1:
			truncate(path, 64);
			break;
		case 2:
			shmctl(db_segment(f), IPC_RMID, NULL);
			break;
		default:
			unlink(path);
		}
	}
	/* Exit status 0, not SIGBUS or SIGSEGV. */
	wait_children(pids, n);
	munmap(gate, 2 * sizeof(*gate));
	cfg_free(cfg);
}

static void test_health_remove_state(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *keep = attach1(f->state, "db", hosts_ab, 2, false);
	struct rlb_config *gone = attach1(f->state, "old", hosts_ab, 2, false);
	struct rlb_config *both = cfg_new(f->state, "db", hosts_ab, 2);
	char path[512], orphan_name[512];
	int id_db = db_segment(f), id_old, orphan;
	struct shmid_ds ds;

	snprintf(path, sizeof(path), "%s/old.state", f->state);
	id_old = named_segment(path, NULL);
	/* An orphan: a segment of the directory that no state file names. */
	snprintf(orphan_name, sizeof(orphan_name), "%s/orphan", f->tmp);
	assert_int_equal(rename(path, orphan_name), 0);
	cfg_free(gone);
	orphan = id_old;
	gone = attach1(f->state, "old", hosts_ab, 2, false);
	id_old = named_segment(path, NULL);
	assert_int_not_equal(id_old, orphan);
	snprintf(path, sizeof(path), "%s/db.state.corrupt-1-1", f->state);
	write_file(path, "junk", 4, 0600);

	/* A config of db only: old's state and the orphan go, db's stays. */
	assert_int_equal(rlb_health_remove_state(both, false, NULL), 4);
	assert_false(segment_removed(id_db));
	assert_true(segment_removed(orphan));
	/* old's is still attached here: removed, gone once detached. */
	assert_int_equal(shmctl(id_old, IPC_STAT, &ds), 0);
	assert_true(ds.shm_perm.mode & SHM_DEST);
	assert_int_equal(count_prefix(f->state, ""), 3); /* ., .., db */
	fx_add_errors(&keep->clusters[0], 0, 1);
	assert_int_equal(rlb_health_remove_state(both, false, NULL), 0);
	/* --all: db's too; the program still using it makes a new one. */
	assert_int_equal(rlb_health_remove_state(both, true, NULL), 2);
	assert_int_equal(count_prefix(f->state, "db"), 0);
	cfg_free(both);
	cfg_free(gone);
	cfg_free(keep);
	unlink(orphan_name);
}

/* ------------------------------------------------------------------ */
/* Reclaiming segments (design.md §12.11) */

/* Attach cluster db in dir, detach: the segment its state file names. */
static int made_in(const char *dir)
{
	struct rlb_config *cfg = attach1(dir, "db", hosts_ab, 2, false);
	char path[512];

	fx_add_errors(&cfg->clusters[0], 0, 1);
	cfg_free(cfg);
	snprintf(path, sizeof(path), "%s/db.state", dir);
	return named_segment(path, NULL);
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Child: make a segment in dir (a first use there), which sweeps. */
static int sweep_child(const char *dir)
{
	struct rlb_config *cfg = attach1(dir, "other", hosts_ab, 2, false);
	int rc = is_private(cfg) ? 1 : 0;

	cfg_free(cfg);
	return rc;
}

/*
 * Segments whose state directory was removed (rm -rf), or replaced by
 * another directory at its path, are reclaimed when a segment is made
 * and by replicalbctl gc. A segment still attached, one named by the
 * state file of a directory that is still there, and one of a directory
 * whose inode the new directory at its path reuses, stay.
 */
static void test_health_reclaims_segments_of_gone_dirs(void **state)
{
	struct fixture *f = *state;
	char gone[256], held[256], live[256], again[256], path[512];
	int id_gone, id_held, id_live, id_again;
	struct rlb_config *holder;
	struct stat before, after;
	char *out = NULL;
	size_t outlen = 0;
	FILE *mem;
	pid_t pid;

	snprintf(gone, sizeof(gone), "%s/gone", f->tmp);
	snprintf(held, sizeof(held), "%s/held", f->tmp);
	snprintf(live, sizeof(live), "%s/live", f->tmp);
	snprintf(again, sizeof(again), "%s/again", f->tmp);
	id_gone = made_in(gone);
	id_live = made_in(live);
	id_again = made_in(again);
	assert_int_equal(stat(again, &before), 0);
	holder = attach1(held, "db", hosts_ab, 2, false);
	snprintf(path, sizeof(path), "%s/db.state", held);
	id_held = named_segment(path, NULL);
	assert_true(id_gone >= 0 && id_live >= 0 && id_again >= 0 &&
		    id_held >= 0);
	rm_tree(gone);
	rm_tree(held);
	rm_tree(again);
	assert_int_equal(mkdir(again, 0700), 0);
	assert_int_equal(stat(again, &after), 0);

	/* A first use elsewhere, in a process that has not swept yet. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(sweep_child(f->state));
	wait_children(&pid, 1);
	assert_true(segment_removed(id_gone));
	assert_false(segment_removed(id_live));
	assert_false(segment_removed(id_held));
	/* The same inode at the same path is the same directory to us. */
	assert_int_equal(segment_removed(id_again),
			 before.st_ino != after.st_ino ||
				 before.st_dev != after.st_dev);

	/* Detached now: gc takes it, and says so. */
	cfg_free(holder);
	mem = open_memstream(&out, &outlen);
	assert_non_null(mem);
	assert_true(rlb_health_gc(mem) >= 1);
	fclose(mem);
	assert_true(segment_removed(id_held));
	assert_non_null(strstr(out, held));
	assert_non_null(strstr(out, "is gone"));
	assert_false(segment_removed(id_live));
	free(out);
	if (!segment_removed(id_again))
		shmctl(id_again, IPC_RMID, NULL);
}

/*
 * An orphan of the directory being attached (named by no state file)
 * is reclaimed at creation once it has been unused for a moment, but not
 * while it may just have been named: HEALTH_GC_GRACE_S.
 */
static int orphan_child(const char *dir, int orphan)
{
	struct rlb_config *cfg;

	test_clock_advance(10 * 1000);
	/* A cluster with no state file yet: a segment is made. */
	cfg = attach1(dir, "third", hosts_ab, 2, false);
	cfg_free(cfg);
	return segment_removed(orphan) ? 0 : 1;
}

static void test_health_reclaims_orphans_of_its_dir(void **state)
{
	struct fixture *f = *state;
	char path[512], aside[512];
	pid_t pid;
	int orphan;

	orphan = made_in(f->state);
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	snprintf(aside, sizeof(aside), "%s/db.saved", f->tmp);
	assert_int_equal(rename(path, aside), 0);
	/* Just detached: spared by a sweep now. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(sweep_child(f->state));
	wait_children(&pid, 1);
	assert_false(segment_removed(orphan));
	/* Later, it goes. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(orphan_child(f->state, orphan));
	wait_children(&pid, 1);
	unlink(aside);
}

/* ------------------------------------------------------------------ */
/* Processes that start together (design.md §12.4) */

/* Child body: attach on its own and add `adds` errors to replica 0. */
static int child_start(const char *dir, atomic_int *gate, int adds)
{
	struct rlb_config *cfg = cfg_new(dir, "db", hosts_ab, 2);
	int rc = 0;

	cfg->clusters[0].s.error_cap = 1000000;
	rlb_health_attach_all(cfg, RLB_STATE_COUNT, false);
	gate_wait(gate);
	for (int i = 0; i < adds; i++)
		fx_add_errors(&cfg->clusters[0], 0, 1);
	if (is_private(cfg))
		rc = 2;
	cfg_free(cfg);
	return rc;
}

static void test_health_start_together_counts_exactly(void **state)
{
	struct fixture *f = *state;
	const int rounds = 30, adds = 20;

	for (int round = 0; round < rounds; round++) {
		atomic_int *gate = gate_new();
		pid_t pids[NCHILDREN];
		struct rlb_config *cfg;

		for (int i = 0; i < NCHILDREN; i++) {
			pids[i] = fork();
			assert_true(pids[i] >= 0);
			if (pids[i] == 0)
				_exit(child_start(f->state, gate, adds));
		}
		gate_open(gate, NCHILDREN);
		/* No child fell back to private state. */
		wait_children(pids, NCHILDREN);
		munmap(gate, 2 * sizeof(*gate));
		cfg = attach1(f->state, "db", hosts_ab, 2, false);
		assert_int_equal(
			rlb_health_errors(&cfg->clusters[0], 0, 0, false),
			NCHILDREN * adds);
		cfg_free(cfg);
		assert_int_equal(count_prefix(f->state, "db.state"), 1);
		shmctl(db_segment(f), IPC_RMID, NULL);
		nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
}

/* Whether the name file at path names a memfd; its holder and fd. */
static bool memfd_named(const char *path, pid_t *pid, int *fd)
{
	char text[160] = "";
	int p, d, n, in = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);

	if (in < 0)
		return false;
	n = (int)read(in, text, sizeof(text) - 1);
	close(in);
	if (n <= 0 ||
	    sscanf(text, "replicalb-state 3 memfd %d %d", &p, &d) != 2)
		return false;
	if (pid)
		*pid = p;
	if (fd)
		*fd = d;
	return true;
}

/*
 * Into an IPC namespace of its own with kernel.shmmni lowered to n
 * (it is per namespace); with nobody, every id taken by uid 65534, whose
 * segments outlive it, as another user can. 0 when shmget now refuses
 * root too, 77 when the system cannot do this.
 */
static int shmmni_lowered(int n, bool nobody)
{
	char text[16];
	int fd, status;
	pid_t pid;

	if (unshare(CLONE_NEWIPC) != 0)
		return 77;
	snprintf(text, sizeof(text), "%d", n);
	fd = open("/proc/sys/kernel/shmmni", O_WRONLY);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		return 77;
	close(fd);
	if (!nobody)
		return 0;
	pid = fork();
	if (pid < 0)
		return 77;
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(77);
		for (int i = 0; i < n; i++)
			if (shmget(IPC_PRIVATE, 1, IPC_CREAT | 0600) < 0)
				_exit(1);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 1;
	if (WEXITSTATUS(status) != 0)
		return WEXITSTATUS(status);
	/* Root is not exempt. */
	return shmget(IPC_PRIVATE, 1, IPC_CREAT | 0600) < 0 && errno == ENOSPC
		       ? 0
		       : 1;
}

/*
 * In an IPC namespace of its own allowing 3 segments: 6 clusters used,
 * 3 in segments and 3 in memfds (design.md §12.12), none private, with
 * one warning for the limit.
 */
static int limit_child(const char *dir)
{
	struct rlb_config *cfg[6];
	struct capture cap;
	int shared = 0, memfds = 0, rc;
	char *log;

	rc = shmmni_lowered(3, false);
	if (rc != 0)
		return rc;
	capture_begin(&cap);
	for (int i = 0; i < 6; i++) {
		char name[16], path[512];

		snprintf(name, sizeof(name), "c%d", i);
		snprintf(path, sizeof(path), "%s/%s.state", dir, name);
		cfg[i] = attach1(dir, name, hosts_ab, 2, false);
		shared += !is_private(cfg[i]);
		memfds += memfd_named(path, NULL, NULL);
		fx_add_errors(&cfg[i]->clusters[0], 0, 1);
		if (rlb_health_errors(&cfg[i]->clusters[0], 0, 0, false) != 1)
			rc = 3;
	}
	log = capture_end(&cap);
	if (shared != 6 || memfds != 3)
		rc = 1;
	else if (count_lines_with(log, "replicalb[") != 1 ||
		 !strstr(log, "shmmni") || !strstr(log, "memfd"))
		rc = 2;
	free(log);
	for (int i = 0; i < 6; i++)
		cfg_free(cfg[i]);
	return rc;
}

static void test_health_segment_limit_falls_back_once(void **state)
{
	struct fixture *f = *state;
	int status;
	pid_t pid;

	if (geteuid() != 0)
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(limit_child(f->state));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The IPC namespace tag of a line of version 2 at path, or 0. */
static unsigned long long line_ns(const char *path)
{
	unsigned long long tok, ns = 0;
	char text[160] = "";
	int fd = open(path, O_RDONLY), id;

	if (fd >= 0 && read(fd, text, sizeof(text) - 1) > 0 &&
	    sscanf(text, "replicalb-state 2 shm %d %llx %llx", &id, &tok,
		   &ns) != 3)
		ns = 0;
	if (fd >= 0)
		close(fd);
	return ns;
}

/* A line naming descriptor fd of process pid (a file of inode ino). */
static void write_memfd_line(const char *path, pid_t pid, int fd,
			     unsigned long long ino, uint64_t token,
			     unsigned long long ns)
{
	char text[160];

	snprintf(text, sizeof(text),
		 "replicalb-state 3 memfd %d %d %llu %016llx %016llx\n",
		 (int)pid, fd, ino, (unsigned long long)token, ns);
	write_file(path, text, strlen(text), 0600);
}

/*
 * A memfd of size bytes holding a copy of segment id's, sealed with
 * seals (0: none), as this process' descriptor.
 */
static int memfd_copy(int id, size_t size, unsigned seals)
{
	int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *map = shmat(id, NULL, SHM_RDONLY);

	assert_true(fd >= 0 && map != (void *)-1);
	assert_int_equal(write(fd, map, size), (ssize_t)size);
	shmdt(map);
	if (seals)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/*
 * A valid db.state (make_valid_state()) whose segment is copied into a
 * sealed memfd of this process, named by a line of version 3, and
 * removed: the memfd's descriptor, with the state file's path, token,
 * namespace and the memfd's stat; -1 when /proc cannot tell the
 * namespace (no memfds either).
 */
static int own_memfd_state(struct fixture *f, char *path, size_t len,
			   uint64_t *token, unsigned long long *ns,
			   struct stat *st)
{
	const unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	int id, fd;

	make_valid_state(f, path, len);
	id = named_segment(path, token);
	*ns = line_ns(path);
	if (!*ns)
		return -1;
	fd = memfd_copy(id, (size_t)segment_stat(id).shm_segsz, seals);
	assert_int_equal(fstat(fd, st), 0);
	write_memfd_line(path, getpid(), fd, st->st_ino, *token, *ns);
	shmctl(id, IPC_RMID, NULL);
	return fd;
}

/*
 * Lines of version 3 (design.md §12.12): a memfd of ours, sealed, with
 * the header and token is used; one whose holder is gone is replaced
 * without being set aside; one not sealed against shrinking, or with
 * another token, is set aside. No root needed: any process may name
 * its own memfd.
 */
static void test_health_memfd_name_files(void **state)
{
	const unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct fixture *f = *state;
	unsigned long long ns;
	struct rlb_config *cfg;
	struct stat st;
	char path[512];
	uint64_t token;
	pid_t pid;
	int id, fd;

	/* Ours, sealed: its counts. */
	fd = own_memfd_state(f, path, sizeof(path), &token, &ns, &st);
	if (fd < 0)
		skip(); /* no /proc: no memfds either */
	cfg = attach1(f->state, "db", hosts_ab, 2, false);
	assert_false(is_private(cfg));
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 0, 0, false), 9);
	assert_int_equal(count_prefix(f->state, "db.state."), 0);
	cfg_free(cfg);
	close(fd);

	/* Its holder gone: replaced by a segment, nothing set aside. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	wait_children(&pid, 1);
	write_memfd_line(path, pid, 3, st.st_ino, token, ns);
	cfg = attach1(f->state, "db", hosts_ab, 2, false);
	assert_false(is_private(cfg));
	assert_true(named_segment(path, NULL) >= 0);
	assert_int_equal(count_prefix(f->state, "db.state."), 0);
	cfg_free(cfg);

	/* Not sealed against shrinking, or another token: set aside. */
	for (int k = 0; k < 2; k++) {
		make_valid_state(f, path, sizeof(path));
		id = named_segment(path, &token);
		fd = memfd_copy(id, (size_t)segment_stat(id).shm_segsz,
				k ? seals : F_SEAL_GROW | F_SEAL_SEAL);
		assert_int_equal(fstat(fd, &st), 0);
		write_memfd_line(path, getpid(), fd, st.st_ino, token + k, ns);
		shmctl(id, IPC_RMID, NULL);
		check_set_aside(f, k ? "another token" : "not sealed");
		close(fd);
		shmctl(named_segment(path, NULL), IPC_RMID, NULL);
		nftw(f->state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
}

/*
 * Saved counts (design.md §12.12): a process that changes a memfd's
 * counts saves them to db.saved at once; when nobody holds the memfd
 * any more, the state made anew (here a segment: no limit) starts from
 * them and the file goes. A file changed by one byte, cut, empty, or a
 * symlink is set aside and the state starts from nothing. No root.
 */
static void test_health_saved_counts_refuse_damage(void **state)
{
	struct fixture *f = *state;
	char path[512], saved[512], good[4096], text[4096], *nl;
	unsigned long long ns;
	struct rlb_config *cfg;
	uint64_t token;
	struct stat st;
	ssize_t len;
	pid_t dead;
	int id, fd;

	snprintf(saved, sizeof(saved), "%s/db.saved", f->state);
	fd = own_memfd_state(f, path, sizeof(path), &token, &ns, &st);
	if (fd < 0)
		skip(); /* no /proc: no memfds either */
	cfg = attach1(f->state, "db", hosts_ab, 2, false);
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 0, 0, false), 9);
	assert_int_equal(access(saved, F_OK), -1); /* nothing changed yet */
	fx_add_errors(&cfg->clusters[0], 0, 1);
	cfg_free(cfg);
	close(fd);
	fd = open(saved, O_RDONLY);
	assert_true(fd >= 0);
	len = read(fd, good, sizeof(good) - 1);
	close(fd);
	assert_true(len > 0);
	good[len] = '\0';
	assert_int_equal(strncmp(good, "replicalb-saved 1 ", 18), 0);
	dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	wait_children(&dead, 1);

	for (int k = 0; k < 5; k++) {
		snprintf(text, sizeof(text), "%s", good);
		switch (k) {
		case 1: /* one byte: the first replica's failures */
			nl = strchr(strchr(text, '\n') + 1, '\n');
			nl[-1] = nl[-1] == '0' ? '1' : '0';
			break;
		case 2: /* cut before its check */
			*strstr(text, "check ") = '\0';
			break;
		case 3:
			text[0] = '\0';
			break;
		}
		unlink(saved);
		if (k == 4) {
			char real[600];

			snprintf(real, sizeof(real), "%s/elsewhere", f->state);
			write_file(real, text, strlen(text), 0600);
			assert_int_equal(symlink(real, saved), 0);
		} else {
			write_file(saved, text, strlen(text), 0600);
		}
		write_memfd_line(path, dead, 3, st.st_ino, token, ns);
		cfg = attach1(f->state, "db", hosts_ab, 2, false);
		assert_false(is_private(cfg));
		id = named_segment(path, NULL);
		assert_true(id >= 0);
		assert_int_equal(
			rlb_health_errors(&cfg->clusters[0], 0, 0, false),
			k == 0 ? 10 : 0);
		assert_int_equal(rlb_health_rr_peek(&cfg->clusters[0]),
				 k == 0 ? 1 : 0);
		/* Only a file that holds something can be damaged. */
		assert_int_equal(count_prefix(f->state, "db.saved.corrupt-"),
				 k == 0	  ? 0
				 : k == 3 ? 0
					  : 1);
		/* A segment persists by itself: the file is gone. */
		assert_int_equal(count_prefix(f->state, "db.saved"),
				 k == 0 || k == 3 ? 0 : 1);
		cfg_free(cfg);
		shmctl(id, IPC_RMID, NULL);
		rm_saved_corrupt(f->state);
	}
	unlink(saved);
}

/* What the victims of a filled shmmni share, and where one failed. */
struct victims {
	atomic_int step; /* how far the scenario is */
	atomic_int done; /* victims through their concurrent adds */
	atomic_int line; /* first failed check, 0 if none */
};

#define VICTIM_ADDS 20000
#define VCHECK(v, cond)                                                        \
	do {                                                                   \
		if (!(cond)) {                                                 \
			int zero = 0;                                          \
			atomic_compare_exchange_strong(&(v)->line, &zero,      \
						       __LINE__);              \
			return 1;                                              \
		}                                                              \
	} while (0)

static void step_wait(struct victims *v, int step)
{
	while (atomic_load(&v->step) < step && !atomic_load(&v->line))
		usleep(1000);
}

/*
 * Attach as a victim (counts far beyond the default cap of 1000) into
 * *cfg: shared, through a memfd that the name file (its path into path)
 * names, held by this process or (holder false) by another, *pid, as its
 * descriptor *fd (pid and fd may be NULL).
 */
static int victim_attach(const char *dir, struct victims *v, bool holder,
			 struct rlb_config **cfg, char *path, size_t len,
			 pid_t *pid, int *fd)
{
	pid_t named;

	*cfg = attach1(dir, "db", hosts_ab, 2, false);
	(*cfg)->clusters[0].s.error_cap = 1000000;
	snprintf(path, len, "%s/db.state", dir);
	VCHECK(v, !is_private(*cfg));
	VCHECK(v, memfd_named(path, &named, fd));
	VCHECK(v, (named == getpid()) == holder);
	if (pid)
		*pid = named;
	return 0;
}

static uint64_t errors0(struct rlb_config *cfg)
{
	return rlb_health_errors(&cfg->clusters[0], 0, 0, false);
}

/* Both victims at once: VICTIM_ADDS each, then the sum seen by both. */
static int victim_adds(struct victims *v, struct rlb_config *cfg)
{
	for (int i = 0; i < VICTIM_ADDS; i++)
		fx_add_errors(&cfg->clusters[0], 0, 1);
	atomic_fetch_add(&v->done, 1);
	while (atomic_load(&v->done) < 2 && !atomic_load(&v->line))
		sched_yield();
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS);
	return 0;
}

/* The first victim: makes the state, a memfd it holds, then leaves. */
static int victim_first(const char *dir, struct victims *v)
{
	struct rlb_config *cfg;
	char path[512];

	if (victim_attach(dir, v, true, &cfg, path, sizeof(path), NULL, NULL) !=
	    0)
		return 1;
	fx_add_errors(&cfg->clusters[0], 0, 5);
	atomic_store(&v->step, 1);
	step_wait(v, 2);
	VCHECK(v, victim_adds(v, cfg) == 0);
	/* The second tries to cut the memfd under this mapping. */
	step_wait(v, 3);
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS);
	cfg_free(cfg);
	return 0;
}

/*
 * The second victim: attaches through the first's /proc/PID/fd, adds
 * with it, cannot truncate the memfd, and takes over the name when the
 * first is gone; a forked child shares its mapping.
 */
static int victim_second(const char *dir, struct victims *v)
{
	struct rlb_config *cfg;
	char path[512], holder[64];
	pid_t pid, child;
	int fd, status;

	step_wait(v, 1);
	if (victim_attach(dir, v, false, &cfg, path, sizeof(path), &pid, &fd) !=
	    0)
		return 1;
	VCHECK(v, errors0(cfg) == 5);
	atomic_store(&v->step, 2);
	VCHECK(v, victim_adds(v, cfg) == 0);

	/* Sealed: no descriptor can shrink or grow it, ours neither. */
	snprintf(holder, sizeof(holder), "/proc/%d/fd/%d", (int)pid, fd);
	fd = open(holder, O_RDWR);
	VCHECK(v, fd >= 0);
	VCHECK(v, ftruncate(fd, 0) == -1 && errno == EPERM);
	VCHECK(v, ftruncate(fd, 64) == -1 && errno == EPERM);
	VCHECK(v, ftruncate(fd, 1 << 20) == -1 && errno == EPERM);
	close(fd);
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS);

	child = fork();
	VCHECK(v, child >= 0);
	if (child == 0) {
		fx_add_errors(&cfg->clusters[0], 1, 3);
		_exit(0);
	}
	VCHECK(v, waitpid(child, &status, 0) == child && status == 0);
	VCHECK(v, rlb_health_errors(&cfg->clusters[0], 1, 0, false) == 3);
	atomic_store(&v->step, 3);

	/* The holder gone: the next look at the name file names us. */
	step_wait(v, 4);
	test_clock_advance(1100);
	fx_add_errors(&cfg->clusters[0], 0, 1);
	VCHECK(v, memfd_named(path, &pid, NULL) && pid == getpid());
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS + 1);
	atomic_store(&v->step, 5);
	step_wait(v, 6);
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS + 2);

	/* Ids free again: within a minute, back in a segment. */
	step_wait(v, 7);
	test_clock_advance(61000);
	fx_add_errors(&cfg->clusters[0], 0, 1);
	VCHECK(v, named_segment(path, NULL) >= 0);
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS + 3);
	VCHECK(v, rlb_health_errors(&cfg->clusters[0], 1, 0, false) == 3);
	cfg_free(cfg);
	return 0;
}

/* A third victim, started after the first left: through the second. */
static int victim_third(const char *dir, struct victims *v)
{
	struct rlb_config *cfg;
	char path[512];

	if (victim_attach(dir, v, false, &cfg, path, sizeof(path), NULL,
			  NULL) != 0)
		return 1;
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS + 1);
	VCHECK(v, rlb_health_errors(&cfg->clusters[0], 1, 0, false) == 3);
	fx_add_errors(&cfg->clusters[0], 0, 1);
	cfg_free(cfg);
	/* And a look (replicalbctl status) sees it all, read-only. */
	cfg = cfg_new(dir, "db", hosts_ab, 2);
	rlb_health_attach_all(cfg, RLB_STATE_LOOK, false);
	VCHECK(v, strcmp(rlb_health_path(cfg->clusters[0].health), path) == 0);
	VCHECK(v, errors0(cfg) == 5 + 2 * VICTIM_ADDS + 2);
	cfg_free(cfg);
	return 0;
}

/* Remove uid's segments (the attacker's, once it is done). */
static void remove_segments_of(uid_t uid)
{
	struct shm_info info;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);

	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT, &ds);

		if (id >= 0 && ds.shm_perm.uid == uid)
			shmctl(id, IPC_RMID, NULL);
	}
}

static int wait_ok(pid_t pid)
{
	int status;

	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

/*
 * Another user fills kernel.shmmni (issue 20, defect 4): in an IPC
 * namespace of its own with shmmni = 8, uid 65534 takes every id. Two
 * victims then share one sealed memfd exactly, a third started later
 * finds it, the survivor names itself when the holder leaves, nobody
 * dies of a truncation attempt, and nobody's segments are left alone;
 * once they are gone, the state moves back to a segment.
 */
static int exhausted_child(const char *dir, struct victims *v)
{
	pid_t first, second, third;
	int rc = shmmni_lowered(8, true);

	if (rc != 0)
		return rc;
	first = fork();
	if (first == 0)
		_exit(victim_first(dir, v));
	second = fork();
	if (second == 0)
		_exit(victim_second(dir, v));
	VCHECK(v, first > 0 && second > 0);
	VCHECK(v, wait_ok(first));
	atomic_store(&v->step, 4);
	step_wait(v, 5);
	third = fork();
	if (third == 0)
		_exit(victim_third(dir, v));
	VCHECK(v, third > 0 && wait_ok(third));
	/* The reclaim took none of nobody's segments. */
	VCHECK(v,
	       shmget(IPC_PRIVATE, 1, IPC_CREAT | 0600) < 0 && errno == ENOSPC);
	atomic_store(&v->step, 6);
	remove_segments_of(65534);
	atomic_store(&v->step, 7);
	VCHECK(v, wait_ok(second));
	return 0;
}

/*
 * Run scenario(dir, v) as root in a child (it lowers shmmni in an IPC
 * namespace of its own), and fail at the first check it failed.
 */
static void run_victims(struct fixture *f,
			int (*scenario)(const char *, struct victims *))
{
	struct victims *v;
	int status;
	pid_t pid;

	if (geteuid() != 0)
		skip();
	v = mmap(NULL, sizeof(*v), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(v != MAP_FAILED);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(scenario(f->state, v));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	if (atomic_load(&v->line))
		print_message("failed at test_health.c:%d\n",
			      atomic_load(&v->line));
	assert_int_equal(atomic_load(&v->line), 0);
	assert_int_equal(WEXITSTATUS(status), 0);
	munmap(v, sizeof(*v));
}

static void test_health_shmmni_filled_by_another_user(void **state)
{
	run_victims(*state, exhausted_child);
}

/*
 * One process of the saved-counts scenario (below): attach db, check it
 * is a memfd held by this very process (none other is alive), check the
 * counts it found (errors and slowdowns of replica 0 and 1, the
 * round-robin counter), then change them as `step` says and leave.
 */
static int saved_step(const char *dir, struct victims *v, int step, uint64_t e0,
		      uint64_t s1, uint64_t rr)
{
	struct rlb_config *cfg;
	char path[512];
	struct rlb_cluster *c;

	if (victim_attach(dir, v, true, &cfg, path, sizeof(path), NULL, NULL) !=
	    0)
		return 1;
	c = &cfg->clusters[0];
	VCHECK(v, errors0(cfg) == e0);
	VCHECK(v, rlb_health_slowdowns(c, 1, rlb_health_decay_time(c), false) ==
			  s1);
	VCHECK(v, rlb_health_rr_peek(c) == rr);
	switch (step) {
	case 0: /* errors, slowdowns, three turns */
		fx_add_errors(c, 0, 5);
		rlb_health_add_slowdowns(c, 1, 2, rlb_health_decay_time(c));
		for (int i = 0; i < 3; i++)
			rlb_health_rr_next(c);
		break;
	case 1: /* replicalbctl reset of replica 0 */
		rlb_health_reset(c, 0);
		break;
	case 2: /* errors again, for the move back to a segment */
		fx_add_errors(c, 0, 4);
		break;
	}
	/* What the library does at exit (and replicalbctl after a command). */
	rlb_health_save_changed(cfg);
	cfg_free(cfg);
	return 0;
}

static int saved_child(const char *dir, struct victims *v)
{
	char path[512], saved[512];
	struct rlb_config *cfg;
	struct stat st;
	pid_t pid;
	int rc = shmmni_lowered(8, true);

	if (rc != 0)
		return rc;
	snprintf(path, sizeof(path), "%s/db.state", dir);
	snprintf(saved, sizeof(saved), "%s/db.saved", dir);
	/* Each step a process of its own, started after the last left. */
#define SAVED_STEP(...)                                                        \
	do {                                                                   \
		pid = fork();                                                  \
		if (pid == 0)                                                  \
			_exit(saved_step(dir, v, __VA_ARGS__));                \
		VCHECK(v, pid > 0 && wait_ok(pid));                            \
	} while (0)
	SAVED_STEP(0, 0, 0, 0);
	VCHECK(v, stat(saved, &st) == 0 && S_ISREG(st.st_mode) &&
			  (st.st_mode & 07777) == 0600);
	/* A look (replicalbctl status) with nobody holding it: the saved. */
	cfg = cfg_new(dir, "db", hosts_ab, 2);
	rlb_health_attach_all(cfg, RLB_STATE_LOOK, false);
	VCHECK(v, errors0(cfg) == 5);
	VCHECK(v, strstr(rlb_health_path(cfg->clusters[0].health),
			 "db.state (saved)") != NULL);
	cfg_free(cfg);
	/* The counts outlived their holder; the reset outlives its own. */
	SAVED_STEP(1, 5, 2, 3);
	SAVED_STEP(-1, 0, 2, 3);
	/* Damaged: set aside, and the state starts from nothing. */
	write_file(saved, "replicalb-saved 1 garbage\n", 26, 0600);
	SAVED_STEP(2, 0, 0, 0);
	VCHECK(v, count_prefix(dir, "db.saved.corrupt-") == 1);
	/* Ids free again: a segment, seeded, and no saved file after it. */
	remove_segments_of(65534);
	cfg = attach1(dir, "db", hosts_ab, 2, false);
	VCHECK(v, named_segment(path, NULL) >= 0);
	VCHECK(v, errors0(cfg) == 4);
	VCHECK(v, stat(saved, &st) != 0 && errno == ENOENT);
	shmctl(named_segment(path, NULL), IPC_RMID, NULL);
	cfg_free(cfg);
#undef SAVED_STEP
	return 0;
}

/*
 * A memfd's counts outlive the processes that held it (design.md
 * §12.12): with shmmni filled by another user, a process that counts and
 * leaves hands its errors, slowdowns and round-robin turns to the next,
 * started after it, through NAME.saved; a reset likewise. A damaged file
 * is set aside; a segment, once one can be had again, takes the counts
 * and the file goes.
 */
static void test_health_memfd_counts_outlive_holders(void **state)
{
	run_victims(*state, saved_child);
}

/* Attach must refuse the state and still work privately. */
static void check_private(struct fixture *f, const char *dir,
			  const char *expect_in_log)
{
	struct rlb_config *cfg;
	struct capture cap;
	pid_t pid;
	char *log;

	capture_begin(&cap);
	cfg = attach1(dir, "db", hosts_ab, 2, true);
	log = capture_end(&cap);
	assert_true(is_private(cfg));
	assert_non_null(strstr(log, "private"));
	assert_non_null(strstr(log, expect_in_log));
	free(log);
	fx_add_errors(&cfg->clusters[0], 1, 3);
	rlb_health_decay(&cfg->clusters[0], 1000);
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 1, 0, false), 3);
	assert_int_equal(rlb_health_decay_time(&cfg->clusters[0]), 1000);
	/* Private state is still shared with forked children. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fx_add_errors(&cfg->clusters[0], 1, 4);
		_exit(0);
	}
	wait_children(&pid, 1);
	assert_int_equal(rlb_health_errors(&cfg->clusters[0], 1, 0, false), 7);
	cfg_free(cfg);
}

static void test_health_dir_symlink_not_used(void **state)
{
	struct fixture *f = *state;
	char real[256], link[256];

	snprintf(real, sizeof(real), "%s/real", f->tmp);
	snprintf(link, sizeof(link), "%s/link", f->tmp);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, link), 0);
	check_private(f, link, link);
	assert_int_equal(count_prefix(real, "db"), 0);
}

static void test_health_dir_writable_by_others_not_used(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(chmod(f->state, 0770), 0);
	check_private(f, f->state, "writable");
	assert_int_equal(chmod(f->state, 0702), 0);
	check_private(f, f->state, "writable");
	assert_int_equal(count_prefix(f->state, "db"), 0);
}

static void test_health_dir_of_other_owner_not_used(void **state)
{
	struct fixture *f = *state;

	if (geteuid() != 0)
		skip();
	assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(chown(f->state, 65534, 65534), 0);
	check_private(f, f->state, "uid 65534");
	assert_int_equal(count_prefix(f->state, "db"), 0);
}

static void test_health_creates_dir_0700_and_file_0600(void **state)
{
	struct fixture *f = *state;
	char dir[256], parent[128], path[512];
	struct rlb_config *cfg;
	mode_t old;
	struct stat st;

	/* A hostile umask must not leave the modes short. */
	old = umask(0277);
	snprintf(parent, sizeof(parent), "%s/x/y", f->tmp);
	snprintf(dir, sizeof(dir), "%s/state", parent);
	cfg = attach1(dir, "db", hosts_ab, 2, true);
	umask(old);
	assert_false(is_private(cfg));
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(lstat(parent, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/db.state", dir);
	assert_string_equal(rlb_health_path(cfg->clusters[0].health), path);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, geteuid());
	assert_true(named_segment(path, NULL) >= 0);
	cfg_free(cfg);
}

static void test_health_file_names(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg;
	char name[251], path[PATH_MAX];
	const char *p;

	cfg = attach1(f->state, "we/ird:name", hosts_ab, 1, true);
	snprintf(path, sizeof(path), "%s/we_ird_name.state", f->state);
	assert_string_equal(rlb_health_path(cfg->clusters[0].health), path);
	cfg_free(cfg);

	/* Overlong names are cut and hashed, and can still be set aside. */
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	cfg = attach1(f->state, name, hosts_ab, 1, true);
	assert_false(is_private(cfg));
	p = strrchr(rlb_health_path(cfg->clusters[0].health), '/') + 1;
	assert_true(strlen(p) <= 210);
	assert_non_null(strstr(p, ".state"));
	snprintf(path, sizeof(path), "%s/%s", f->state, p);
	cfg_free(cfg);
	assert_int_equal(truncate(path, 10), 0);
	cfg = attach1(f->state, name, hosts_ab, 1, true);
	assert_false(is_private(cfg));
	assert_int_equal(count_prefix(f->state, "xxxxxxxx"), 2);
	cfg_free(cfg);
}

static void test_health_state_dir_precedence(void **state)
{
	struct rlb_config cfg = {0};
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *saved = xdg ? strdup(xdg) : NULL;
	char buf[PATH_MAX], expect[64];

	snprintf(expect, sizeof(expect), "/tmp/replicalb-%lu",
		 (unsigned long)geteuid());
	setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
	cfg.state_dir = "/var/lib/rlb-test";
	assert_string_equal(rlb_health_state_dir(&cfg, buf, sizeof(buf)),
			    "/var/lib/rlb-test");
	cfg.state_dir = NULL;
	assert_string_equal(rlb_health_state_dir(&cfg, buf, sizeof(buf)),
			    "/run/user/4242/replicalb");
	assert_string_equal(rlb_health_state_dir(NULL, buf, sizeof(buf)),
			    "/run/user/4242/replicalb");
	setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
	assert_string_equal(rlb_health_state_dir(&cfg, buf, sizeof(buf)),
			    expect);
	setenv("XDG_RUNTIME_DIR", "", 1);
	assert_string_equal(rlb_health_state_dir(&cfg, buf, sizeof(buf)),
			    expect);
	unsetenv("XDG_RUNTIME_DIR");
	assert_string_equal(rlb_health_state_dir(&cfg, buf, sizeof(buf)),
			    expect);
	assert_true(rlb_health_state_dir(&cfg, buf, 8) == buf);
	assert_int_equal(strlen(buf), 7);
	if (saved)
		setenv("XDG_RUNTIME_DIR", saved, 1);
	free(saved);
}

/* ------------------------------------------------------------------ */
/* The state directory: fallback and warnings (design.md §5.8) */

/* Path of cfg's only state file, or "" when it is private. */
static const char *file_of(const struct rlb_config *cfg)
{
	return is_private(cfg) ? "" : rlb_health_path(cfg->clusters[0].health);
}

/*
 * In a mount namespace of its own with an empty /tmp, so that the real
 * /tmp/replicalb-UID is never touched: the default directory is used while
 * it is ours; once another user made it first, $HOME/.cache/replicalb is,
 * by every program. Returns 0, 77 when namespaces are not allowed, or the
 * number of the check that failed.
 */
static int squat_child(void)
{
	const char *fb = "/tmp/home/.cache/replicalb";
	char dflt[64], expect[128], buf[PATH_MAX];
	struct rlb_config *cfg, *again;
	int status;
	pid_t pid;

	if (unshare(CLONE_NEWNS) != 0 ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") != 0)
		return 77;
	unsetenv("XDG_RUNTIME_DIR");
	setenv("HOME", "/tmp/home", 1);
	if (mkdir("/tmp/home", 0700) != 0)
		return 1;
	snprintf(dflt, sizeof(dflt), "/tmp/replicalb-%lu",
		 (unsigned long)geteuid());
	cfg = attach1(NULL, "db", hosts_ab, 2, false);
	snprintf(expect, sizeof(expect), "%s/db.state", dflt);
	if (strcmp(file_of(cfg), expect) != 0)
		return 2;
	cfg_free(cfg);
	shmctl(named_segment(expect, NULL), IPC_RMID, NULL);
	if (unlink(expect) != 0 || rmdir(dflt) != 0)
		return 3;

	/* Another user takes the default first. */
	if (mkdir(dflt, 0755) != 0 || chown(dflt, 65534, 65534) != 0)
		return 4;
	if (strcmp(rlb_health_state_dir(NULL, buf, sizeof(buf)), fb) != 0)
		return 5;
	snprintf(expect, sizeof(expect), "%s/db.state", fb);
	cfg = attach1(NULL, "db", hosts_ab, 2, false);
	if (strcmp(file_of(cfg), expect) != 0)
		return 6;
	fx_add_errors(&cfg->clusters[0], 1, 3);
	/* A reload, and another program: the same file, no new warning. */
	again = attach1(NULL, "db", hosts_ab, 2, true);
	if (strcmp(file_of(again), expect) != 0 ||
	    rlb_health_errors(&again->clusters[0], 1, 0, false) != 3)
		return 7;
	pid = fork();
	if (pid == 0) {
		struct rlb_config *prog =
			attach1(NULL, "db", hosts_ab, 2, false);

		_exit(strcmp(file_of(prog), expect) != 0 ||
		      rlb_health_errors(&prog->clusters[0], 1, 0, false) != 3);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return 8;
	cfg_free(again);
	cfg_free(cfg);
	shmctl(named_segment(expect, NULL), IPC_RMID, NULL);
	return 0;
}

/* Lines of text that contain needle. */
static int count_lines_with(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++) {
		n++;
		p = strchr(p, '\n');
		if (!p)
			break;
	}
	return n;
}

static void test_health_default_dir_squatted_falls_back(void **state)
{
	struct capture cap;
	int status, warnings;
	bool named;
	pid_t pid;
	char *log;

	if (geteuid() != 0)
		skip(); /* chown to another user */
	capture_begin(&cap);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(squat_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	log = capture_end(&cap);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		print_message("squat_child: status %#x; log:\n%s", status, log);
	/* Three attaches, two processes: one warning. */
	warnings = count_lines_with(log, "replicalb[");
	named = strstr(log, "uid 65534") &&
		strstr(log, "using /tmp/home/.cache/replicalb");
	free(log);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip(); /* no mount namespaces here */
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(warnings, 1);
	assert_true(named);
}

static void test_health_refused_dir_warned_once(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *c1, *c2;
	struct capture cap;
	char *log;

	assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(chmod(f->state, 0770), 0);
	capture_begin(&cap);
	c1 = attach1(f->state, "db", hosts_ab, 2, false);
	c2 = attach1(f->state, "db", hosts_ab, 2, true); /* a reload */
	log = capture_end(&cap);
	assert_true(is_private(c1));
	assert_true(is_private(c2));
	assert_int_equal(count_lines_with(log, "not used"), 1);
	free(log);
	cfg_free(c2);
	cfg_free(c1);
}

/* ------------------------------------------------------------------ */
/* Read-only attach (replicalbctl status, resolve --peek: design.md §6) */

/* The whole file at path (FILE_SIZE bytes at most), malloc'd, into *len. */
static char *slurp(const char *path, ssize_t *len)
{
	char *buf = malloc(FILE_SIZE + 1);
	int fd = open(path, O_RDONLY);

	assert_non_null(buf);
	assert_true(fd >= 0);
	*len = read(fd, buf, FILE_SIZE + 1);
	assert_true(*len >= 0);
	close(fd);
	return buf;
}

static struct rlb_config *attach_ro(const char *dir, const char *name,
				    const char *const *hosts, size_t n)
{
	struct rlb_config *cfg = cfg_new(dir, name, hosts, n);

	rlb_health_attach_all(cfg, RLB_STATE_LOOK, false);
	assert_non_null(cfg->clusters[0].health);
	return cfg;
}

static void test_health_readonly_reads_and_writes_nothing(void **state)
{
	static const char *const rw_hosts[] = {"a", "b", "c"};
	static const char *const ro_hosts[] = {"a", "b", "d"};
	struct fixture *f = *state;
	struct rlb_config *rw = attach1(f->state, "db", rw_hosts, 3, false);
	struct rlb_cluster *w = &rw->clusters[0], *c;
	struct rlb_config *ro;
	char path[512], *before, *after;
	ssize_t nbefore, nafter;
	uint64_t e, sd;
	struct stat st0, st1;
	struct shmid_ds ds0;
	char *segbefore, *segafter;
	int seg;

	fx_add_errors(w, 0, 5);
	rlb_health_add_slowdowns(w, 1, 2, 0);
	rlb_health_decay(w, 1000);
	rlb_health_rr_next(w);
	rlb_health_rr_next(w);
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	before = slurp(path, &nbefore);
	assert_true(nbefore > 0);
	seg = db_segment(f);
	ds0 = segment_stat(seg);
	segbefore = malloc(ds0.shm_segsz);
	memcpy(segbefore, shmat(seg, NULL, SHM_RDONLY), ds0.shm_segsz);
	assert_int_equal(stat(path, &st0), 0);

	ro = attach_ro(f->state, "db", ro_hosts, 3);
	c = &ro->clusters[0];
	assert_string_equal(rlb_health_path(c->health), path);
	assert_int_equal(rlb_health_decay_time(c), 1000);
	assert_int_equal(rlb_health_errors(c, 0, 1000, true), 5);
	assert_int_equal(rlb_health_slowdowns(c, 1, 1000, true), 2);
	/* d has no slot in the file, and gets none. */
	rlb_health_counts(c, 2, 1000, true, &e, &sd);
	assert_int_equal(e, 0);
	assert_int_equal(sd, 0);
	assert_int_equal(rlb_health_recovery_seconds(c, 0, 1000), 180);
	assert_int_equal(rlb_health_rr_peek(c), 2);

	/* Every update does nothing (the pages are not even writable). */
	assert_int_equal(rlb_health_rr_next(c), 2);
	assert_int_equal(rlb_health_rr_next(c), 2);
	rlb_health_add_errors(c, 0, 7, 1000);
	rlb_health_add_errors(c, 2, 7, 1000);
	rlb_health_add_slowdowns(c, 1, 7, 99999);
	rlb_health_decay(c, 99999);
	rlb_health_reset(c, SIZE_MAX);
	rlb_health_reset(c, 0);
	assert_int_equal(rlb_health_decay_time(c), 1000);
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 5);
	assert_int_equal(rlb_health_errors(c, 2, 0, false), 0);
	assert_int_equal(rlb_health_slowdowns(c, 1, 0, false), 2);
	assert_int_equal(rlb_health_rr_peek(c), 2);

	after = slurp(path, &nafter);
	assert_int_equal(nafter, nbefore);
	assert_memory_equal(after, before, (size_t)nbefore);
	assert_int_equal(stat(path, &st1), 0);
	assert_int_equal(st1.st_ino, st0.st_ino);
	assert_int_equal(st1.st_mtim.tv_sec, st0.st_mtim.tv_sec);
	assert_int_equal(st1.st_mtim.tv_nsec, st0.st_mtim.tv_nsec);
	assert_int_equal(count_prefix(f->state, "db.state"), 1);
	segafter = shmat(seg, NULL, SHM_RDONLY);
	assert_memory_equal(segafter, segbefore, ds0.shm_segsz);
	shmdt(segafter);
	free(segbefore);

	/* What the library writes meanwhile shows. */
	fx_add_errors(w, 1, 3);
	assert_int_equal(rlb_health_errors(c, 1, 1000, true), 3);
	cfg_free(ro);
	/* The library's own attach sees its counts, and its turn. */
	assert_int_equal(rlb_health_errors(w, 0, 0, false), 5);
	assert_int_equal(rlb_health_rr_next(w), 2);
	free(before);
	free(after);
	cfg_free(rw);
}

static void test_health_readonly_creates_nothing(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *ro;
	struct rlb_cluster *c;
	char path[512], want[600];
	struct stat st;

	/* No directory: nothing is made, everything reads as zero. */
	ro = attach_ro(f->state, "db", hosts_ab, 2);
	c = &ro->clusters[0];
	snprintf(path, sizeof(path), "%s/db.state", f->state);
	snprintf(want, sizeof(want), "%s (absent)", path);
	assert_string_equal(rlb_health_path(c->health), want);
	assert_int_equal(rlb_health_decay_time(c), 0);
	assert_int_equal(rlb_health_errors(c, 0, 1000, true), 0);
	assert_int_equal(rlb_health_rr_next(c), 0);
	rlb_health_add_errors(c, 0, 3, 1000);
	rlb_health_decay(c, 1000);
	assert_int_equal(rlb_health_errors(c, 0, 1000, true), 0);
	assert_int_equal(rlb_health_decay_time(c), 0);
	cfg_free(ro);
	assert_int_equal(lstat(f->state, &st), -1);
	assert_int_equal(errno, ENOENT);

	/* A directory without the file: no file is made. */
	assert_int_equal(mkdir(f->state, 0700), 0);
	ro = attach_ro(f->state, "db", hosts_ab, 2);
	assert_string_equal(rlb_health_path(ro->clusters[0].health), want);
	cfg_free(ro);
	assert_int_equal(count_prefix(f->state, ""), 2); /* . and .. */

	/* A corrupt file is shown as private, neither set aside nor fixed. */
	write_file(path, "junk", 4, 0600);
	ro = attach_ro(f->state, "db", hosts_ab, 2);
	snprintf(want, sizeof(want), "%s (private)", path);
	assert_string_equal(rlb_health_path(ro->clusters[0].health), want);
	assert_int_equal(rlb_health_errors(&ro->clusters[0], 0, 0, true), 0);
	cfg_free(ro);
	assert_int_equal(count_prefix(f->state, "db.state.corrupt-"), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 4);

	/* A directory writable by others is not read. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(chmod(f->state, 0777), 0);
	ro = attach_ro(f->state, "db", hosts_ab, 2);
	assert_string_equal(rlb_health_path(ro->clusters[0].health), want);
	cfg_free(ro);
}

static void test_health_unattached_is_harmless(void **state)
{
	struct rlb_cluster c = {0};

	c.nreplicas = 0;
	rlb_health_decay(&c, 1000);
	fx_add_errors(&c, 0, 1);
	rlb_health_reset(&c, SIZE_MAX);
	assert_int_equal(rlb_health_errors(&c, 0, 0, true), 0);
	assert_int_equal(rlb_health_rr_next(&c), 0);
	assert_int_equal(rlb_health_rr_peek(&c), 0);
	assert_int_equal(rlb_health_decay_time(&c), 0);
	assert_int_equal(rlb_health_recovery_seconds(&c, 0, 0), 0);
	assert_string_equal(rlb_health_path(NULL), "(private)");
	rlb_health_detach(NULL);
}

/* ------------------------------------------------------------------ */
/* Traffic counts and the connection ledger (design.md §12.13) */

static uint64_t in_flight_of(const struct rlb_cluster *c, size_t i)
{
	uint64_t v[16] = {0};

	assert_true(i < 16 && c->nreplicas <= 16);
	rlb_health_in_flight(c, c->nreplicas, v);
	return v[i];
}

static struct rlb_traffic traffic_of(const struct rlb_cluster *c, size_t i)
{
	struct rlb_traffic t;

	rlb_health_traffic(c, i, &t);
	return t;
}

/*
 * RLB_STATE_TURN (an NSS module's use): the shared state is made and
 * read, round-robin turns are taken for everyone, and nothing is charged:
 * no error, slowdown, reset, connect or connection.
 */
static void test_health_turn_takes_turns_charges_nothing(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cnt = attach1(f->state, "db", hosts_ab, 2, false);
	struct rlb_config *turn = cfg_new(f->state, "db", hosts_ab, 2);
	struct rlb_cluster *w = &cnt->clusters[0], *c;

	fx_add_errors(w, 0, 5);
	rlb_health_rr_next(w);
	rlb_health_attach_all(turn, RLB_STATE_TURN, true);
	c = &turn->clusters[0];
	assert_string_equal(rlb_health_path(c->health),
			    rlb_health_path(w->health));
	assert_int_equal(rlb_health_errors(c, 0, 0, false), 5);
	/* Turns are taken, and everyone sees them. */
	assert_int_equal(rlb_health_rr_next(c), 1);
	assert_int_equal(rlb_health_rr_next(c), 2);
	assert_int_equal(rlb_health_rr_peek(w), 3);
	/* Charges are not. */
	fx_add_errors(c, 1, 3);
	rlb_health_add_slowdowns(c, 1, 2, rlb_health_decay_time(c));
	rlb_health_reset(c, 0);
	rlb_health_count_connect(c, 1, true);
	rlb_health_count_connect(c, 1, false);
	assert_false(rlb_health_conn_take(c, 1, 2001));
	assert_int_equal(rlb_health_errors(w, 0, 0, false), 5);
	assert_int_equal(rlb_health_errors(w, 1, 0, false), 0);
	assert_int_equal(
		rlb_health_slowdowns(w, 1, rlb_health_decay_time(w), false), 0);
	assert_int_equal(traffic_of(w, 1).connects, 0);
	assert_int_equal(traffic_of(w, 1).failures, 0);
	assert_int_equal(in_flight_of(w, 1), 0);
	/* A connection another process counts is not let go by it. */
	assert_true(rlb_health_conn_take(w, 0, 2002));
	rlb_health_conn_drop(c, 2002);
	assert_int_equal(in_flight_of(w, 0), 1);
	rlb_health_conn_drop(w, 2002);
	assert_int_equal(in_flight_of(w, 0), 0);
	cfg_free(turn);
	cfg_free(cnt);
}

/* Take, take again, drop: one connection, counted once, then none. */
static void test_traffic_take_and_drop(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *other = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];

	assert_true(rlb_health_conn_take(c, 1, 1001));
	assert_true(rlb_health_conn_take(c, 1, 1001)); /* same socket */
	assert_true(rlb_health_conn_take(c, 0, 1002));
	assert_int_equal(in_flight_of(c, 1), 1);
	assert_int_equal(in_flight_of(c, 0), 1);
	/* Another attachment (another process's view) sees the same. */
	assert_int_equal(in_flight_of(&other->clusters[0], 1), 1);
	assert_int_equal(traffic_of(&other->clusters[0], 1).in_flight, 1);
	rlb_health_count_connect(c, 1, true);
	rlb_health_count_connect(c, 1, true);
	rlb_health_count_connect(c, 1, false);
	assert_int_equal(traffic_of(c, 1).connects, 2);
	assert_int_equal(traffic_of(c, 1).failures, 1);
	assert_int_equal(traffic_of(c, 0).connects, 0);
	rlb_health_conn_drop(c, 1001);
	rlb_health_conn_drop(c, 1001); /* a second drop changes nothing */
	rlb_health_conn_drop(c, 4242); /* nor does an unknown socket's */
	assert_int_equal(in_flight_of(c, 1), 0);
	assert_int_equal(in_flight_of(c, 0), 1);
	rlb_health_conn_drop(c, 1002);
	assert_int_equal(in_flight_of(c, 0), 0);
	assert_int_equal(traffic_of(c, 0).in_flight, 0);
	/* Errors are not traffic: a reset leaves the counts. */
	rlb_health_reset(c, SIZE_MAX);
	assert_int_equal(traffic_of(c, 1).connects, 2);
	cfg_free(cfg);
	cfg_free(other);
}

/* Wait for one byte on fd (a child's signal), at most 5 s. */
static void wait_byte(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b;

	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(read(fd, &b, 1), 1);
}

/*
 * A forked child holds its parent's connections: the parent closing its
 * copy as soon as fork() returns drops nothing while the child holds
 * them; the child's exit gives them back, through a survivor's reclaim.
 */
static void test_traffic_fork_child_holds(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	int up[2], down[2], status;
	pid_t pid;

	assert_true(rlb_health_conn_take(c, 0, 2001));
	assert_true(rlb_health_conn_take(c, 0, 2002));
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	rlb_health_conn_fork(c, 2001, 0);
	rlb_health_conn_fork(c, 2002, 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char b;

		rlb_health_conn_fork(c, 2001, 2);
		rlb_health_conn_fork(c, 2002, 2);
		/* Let go of one, then wait to be told to die holding the
		 * other. */
		if (read(down[0], &b, 1) != 1)
			_exit(2);
		rlb_health_conn_drop(c, 2001);
		if (write(up[1], "d", 1) != 1 || read(down[0], &b, 1) != 1)
			_exit(2);
		_exit(0);
	}
	rlb_health_conn_fork(c, 2001, 1);
	rlb_health_conn_fork(c, 2002, 1);
	rlb_health_conn_drop(c, 2001);
	rlb_health_conn_drop(c, 2002);
	assert_int_equal(in_flight_of(c, 0), 2);
	assert_int_equal(traffic_of(c, 0).in_flight, 2);
	assert_int_equal(write(down[1], "x", 1), 1);
	wait_byte(up[0]);
	assert_int_equal(in_flight_of(c, 0), 1);
	assert_int_equal(write(down[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Dead: status sees it at once, the counter after a reclaim. */
	assert_int_equal(traffic_of(c, 0).in_flight, 0);
	assert_int_equal(in_flight_of(c, 0), 1);
	assert_int_equal(rlb_health_reclaim(c), 1);
	assert_int_equal(in_flight_of(c, 0), 0);
	assert_int_equal(rlb_health_reclaim(c), 0);
	close(up[0]), close(up[1]), close(down[0]), close(down[1]);
	cfg_free(cfg);
}

/* Children SIGKILLed holding connections: every one given back. */
static void test_traffic_killed_holders_reclaimed(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	pid_t pids[4];
	int up[2];

	assert_int_equal(pipe(up), 0);
	assert_true(rlb_health_conn_take(c, 1, 3000)); /* the parent's */
	for (int k = 0; k < 4; k++) {
		pids[k] = fork();
		assert_true(pids[k] >= 0);
		if (pids[k] == 0) {
			for (uint64_t j = 0; j < 3; j++)
				if (!rlb_health_conn_take(c, 1,
							  3100 + 10 * k + j))
					_exit(2);
			if (write(up[1], "t", 1) != 1)
				_exit(2);
			pause();
			_exit(0);
		}
	}
	for (int k = 0; k < 4; k++)
		wait_byte(up[0]);
	assert_int_equal(in_flight_of(c, 1), 13);
	assert_int_equal(traffic_of(c, 1).in_flight, 13);
	for (int k = 0; k < 4; k++) {
		kill(pids[k], SIGKILL);
		assert_int_equal(waitpid(pids[k], NULL, 0), pids[k]);
	}
	assert_int_equal(traffic_of(c, 1).in_flight, 1);
	assert_int_equal(rlb_health_reclaim(c), 4);
	assert_int_equal(in_flight_of(c, 1), 1);
	rlb_health_conn_drop(c, 3000);
	assert_int_equal(in_flight_of(c, 1), 0);
	close(up[0]), close(up[1]);
	cfg_free(cfg);
}

/*
 * SCM_RIGHTS: the sender's hold in transit keeps the connection counted
 * after the sender's close until a receiver (another process) takes it
 * over; one never received is given up after 10 s.
 */
static void test_traffic_sent_descriptor(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_cluster *c = &cfg->clusters[0];
	int up[2], down[2], status;
	uint64_t replica = 0;
	pid_t pid;

	assert_true(rlb_health_has_state(c));
	assert_true(rlb_health_conn_take(c, 1, 6001));
	rlb_health_conn_send(c, 6001);
	rlb_health_conn_drop(c, 6001); /* the sender closes at once */
	assert_int_equal(in_flight_of(c, 1), 1);
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char b;

		if (!rlb_health_conn_receive(c, 6001, &replica) ||
		    replica != c->replicas[1].identity ||
		    write(up[1], "r", 1) != 1 || read(down[0], &b, 1) != 1)
			_exit(2);
		rlb_health_conn_drop(c, 6001);
		_exit(write(up[1], "d", 1) == 1 ? 0 : 2);
	}
	wait_byte(up[0]);
	/* Received: the receiver's hold, the one in transit gone. */
	assert_int_equal(in_flight_of(c, 1), 1);
	assert_int_equal(traffic_of(c, 1).in_flight, 1);
	test_clock_advance(20000);
	assert_int_equal(rlb_health_reclaim(c), 0);
	assert_int_equal(in_flight_of(c, 1), 1); /* the receiver holds it */
	assert_int_equal(write(down[1], "x", 1), 1);
	wait_byte(up[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(in_flight_of(c, 1), 0);

	/* Sent, never received: counted until given up. */
	assert_true(rlb_health_conn_take(c, 0, 6002));
	rlb_health_conn_send(c, 6002);
	rlb_health_conn_drop(c, 6002);
	assert_int_equal(in_flight_of(c, 0), 1);
	rlb_health_reclaim(c);
	assert_int_equal(in_flight_of(c, 0), 1);
	test_clock_advance(10001);
	rlb_health_reclaim(c);
	assert_int_equal(in_flight_of(c, 0), 0);
	/* Nobody holds it: nothing to receive. */
	assert_false(rlb_health_conn_receive(c, 6002, &replica));
	close(up[0]), close(up[1]), close(down[0]), close(down[1]);
	cfg_free(cfg);
}

/* A segment replaced by a larger one keeps traffic and ledger. */
static void test_traffic_kept_when_segment_grows(void **state)
{
	static const char *const hosts3[] = {"a", "b", "c"};
	struct fixture *f = *state;
	struct rlb_config *c1 = attach1(f->state, "db", hosts3, 3, false);
	struct rlb_config *c2;
	struct rlb_cluster *a, *b;

	a = &c1->clusters[0];
	assert_true(rlb_health_conn_take(a, 2, 4001));
	assert_true(rlb_health_conn_take(a, 2, 4002));
	rlb_health_count_connect(a, 2, true);
	rlb_health_count_connect(a, 2, false);
	c2 = attach_grown(f->state);
	b = &c2->clusters[0];
	assert_int_equal(in_flight_of(b, 0), 2);
	assert_int_equal(traffic_of(b, 0).in_flight, 2);
	assert_int_equal(traffic_of(b, 0).connects, 1);
	assert_int_equal(traffic_of(b, 0).failures, 1);
	/* Let go in the new segment, and through the old attachment. */
	rlb_health_conn_drop(b, 4001);
	rlb_health_conn_drop(a, 4002);
	assert_int_equal(in_flight_of(b, 0), 0);
	cfg_free(c1);
	cfg_free(c2);
}

/* A read-only look takes nothing and counts nothing. */
static void test_traffic_readonly_writes_nothing(void **state)
{
	struct fixture *f = *state;
	struct rlb_config *cfg = attach1(f->state, "db", hosts_ab, 2, true);
	struct rlb_config *ro = cfg_new(f->state, "db", hosts_ab, 2);
	struct rlb_cluster *r;

	assert_true(rlb_health_conn_take(&cfg->clusters[0], 0, 5001));
	rlb_health_attach_all(ro, RLB_STATE_LOOK, false);
	r = &ro->clusters[0];
	assert_int_equal(traffic_of(r, 0).in_flight, 1);
	assert_false(rlb_health_conn_take(r, 0, 5002));
	rlb_health_count_connect(r, 0, true);
	rlb_health_conn_drop(r, 5001);
	assert_int_equal(in_flight_of(&cfg->clusters[0], 0), 1);
	assert_int_equal(traffic_of(&cfg->clusters[0], 0).connects, 0);
	cfg_free(ro);
	cfg_free(cfg);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_health_tv24_decay_sequence),
		T(test_health_tv25_zero_half_life),
		T(test_health_tv26_cap),
		T(test_health_clock_backwards_does_nothing),
		T(test_health_shift_of_64_or_more_zeroes),
		T(test_health_remainder_discarded),
		T(test_health_decayed_view_changes_nothing),
		T(test_health_reset),
		T(test_health_recovery_tv28),
		T(test_health_shared_between_attaches),
		T(test_health_fork_adds_exactly),
		T(test_health_fork_rr_distinct),
		T(test_health_reload_keeps_by_identity),
		T(test_health_prune_drops_removed),
		T(test_health_prune_then_stale_config_reclaims),
		T(test_health_no_prune_keeps_removed),
		T(test_health_rebuild_when_full_of_tombstones),
		T(test_health_full_table_keeps_counted_entries),
		T(test_health_late_error_counts_in_full),
		T(test_health_decay_shifts_replicas_not_known_here),
		T(test_health_zero_half_life_adds_accumulate),
		T(test_health_slowdowns_decay_uncapped),
		T(test_health_select_counts_say_when_they_decide),
		T(test_health_sized_to_cluster),
		T(test_health_attached_at_first_use),
		T(test_health_grows_when_reload_adds_replicas),
		T(test_health_bad_name_files_set_aside),
		T(test_health_name_file_cut_or_of_other_kind_set_aside),
		T(test_health_version_2_file_replaced),
		T(test_health_segment_of_wrong_mode_not_used),
		T(test_health_segment_of_other_owner_not_used),
		T(test_health_name_file_of_other_cluster_set_aside),
		T(test_health_name_file_of_version_1_read),
		T(test_health_ipc_namespaces_share_a_dir),
		T(test_health_name_file_damaged_while_in_use),
		T(test_health_segment_removed_while_in_use),
		T(test_health_name_file_replaced_while_in_use),
		T(test_health_successor_removed_before_followed),
		T(test_health_damage_kills_no_process),
		T(test_health_remove_state),
		T(test_health_reclaims_segments_of_gone_dirs),
		T(test_health_reclaims_orphans_of_its_dir),
		T(test_health_start_together_counts_exactly),
		T(test_health_segment_limit_falls_back_once),
		T(test_health_shmmni_filled_by_another_user),
		T(test_health_memfd_name_files),
		T(test_health_memfd_counts_outlive_holders),
		T(test_health_saved_counts_refuse_damage),
		T(test_health_dir_symlink_not_used),
		T(test_health_dir_writable_by_others_not_used),
		T(test_health_dir_of_other_owner_not_used),
		T(test_health_creates_dir_0700_and_file_0600),
		T(test_health_file_names),
		T(test_health_state_dir_precedence),
		T(test_health_default_dir_squatted_falls_back),
		T(test_health_refused_dir_warned_once),
		T(test_health_unattached_is_harmless),
		T(test_health_readonly_reads_and_writes_nothing),
		T(test_health_readonly_creates_nothing),
		T(test_health_turn_takes_turns_charges_nothing),
		T(test_traffic_take_and_drop),
		T(test_traffic_fork_child_holds),
		T(test_traffic_killed_holders_reclaimed),
		T(test_traffic_sent_descriptor),
		T(test_traffic_kept_when_segment_grows),
		T(test_traffic_readonly_writes_nothing),
	};

	/* RLB_TEST_FILTER=PATTERN runs only the matching tests. */
	if (getenv("RLB_TEST_FILTER"))
		cmocka_set_test_filter(getenv("RLB_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
