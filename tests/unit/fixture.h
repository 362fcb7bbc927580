/* fixture.h - unit-test clusters built through the real config parser,
 * scripted random draws for deterministic selections, and config files
 * replaced as editors replace them. */
#ifndef RLB_TEST_FIXTURE_H
#define RLB_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/*
 * What one cluster's config text says. Zero fields take the parser's
 * defaults, so a test states only what it is about.
 */
struct fx_spec {
	const char *name;	  /* virtual name; NULL: a fresh unique one */
	const char *policy;	  /* load_balancing; NULL: the default */
	size_t n;		  /* replicas, 1 .. RLB_MAX_REPLICAS */
	const char *const *hosts; /* n host strings; NULL: "r<i>.example" */
	const int64_t *priority;  /* n priorities; NULL: the default (1) */
	const char *settings; /* more cluster keys ("k = v; ..."), or NULL */
};

/* A cluster as the library holds it: parsed, prepared, health attached. */
struct fx {
	struct rlb_snapshot *snap; /* owns everything below but sel */
	struct rlb_cluster *c;	   /* the cluster, snap->cfg->clusters[0] */
	struct rlb_selection *sel; /* room for one selection of c */
};

/*
 * The config text of spec: one cluster, state_dir set to this process's
 * scratch directory (made on first use). malloc'd; free() it.
 */
char *fx_text(const struct fx_spec *spec);
/*
 * spec parsed by rlb_config_parse_string() and nothing more: no hostname
 * priorities, no health. Fails the test (with the parser's messages) if
 * the text does not parse. Free with rlb_config_free().
 */
struct rlb_config *fx_parse(const struct fx_spec *spec);
/*
 * spec parsed and made ready by rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT,
 * false): hostname priorities against the cluster's local_hostname (given in
 * settings), else "" (never this host's name); shared health in a state
 * file of the scratch directory (checked not to be private state). Two
 * fixtures with the same name share that file, as two processes or a
 * reload would: counts and the round-robin counter carry over. Free with
 * fx_free().
 */
struct fx *fx_new(const struct fx_spec *spec);
/* fx_new() of a uniquely named cluster: the common case in one call. */
struct fx *fx_cluster(const char *policy, size_t n, const char *const *hosts,
		      const char *settings);
/*
 * fx_cluster() whose hostname priorities compare against `local` (the
 * cluster's local_hostname; "" leaves it unset, which the fixture also
 * reads as "").
 */
struct fx *fx_cluster_local(const char *policy, size_t n,
			    const char *const *hosts, const char *local);
/* Drop the snapshot (detaching health) and the selection; NULL is fine. */
void fx_free(struct fx *f);
/*
 * rlb_health_add_errors() of n errors for replica i of c at the cluster's
 * current decay time, where no decay is owed: for tests of other
 * behaviour than the decay refinement.
 */
void fx_add_errors(struct rlb_cluster *c, size_t i, uint64_t n);
/*
 * cmocka group teardown: remove the scratch directory and its state
 * files, if one was made. Use as cmocka_run_group_tests(t, NULL, this).
 */
int fx_group_teardown(void **state);

/*
 * Script the random draws of this thread (rlb_random_set_source()): the
 * next n calls of rlb_random_u32() return v[0], ..., v[n-1] (copied;
 * n <= RLB_MAX_REPLICAS), one more fails the test. A selection draws once
 * per replica, in index order.
 */
void fx_draws(const uint32_t *v, size_t n);
/*
 * Back to the real generator; fails the test unless the script was used
 * up exactly.
 */
void fx_draws_end(void);

/*
 * Replace the file at path with the printf-style text, as editors and
 * config managers do: all of it to "<path>.new", then rename(2) over path,
 * so that a reader sees the old file or the new one (a new inode), never
 * part of one. Fails the test on any error, so callers need not check.
 */
void fx_write_file(const char *path, const char *fmt, ...) RLB_PRINTF(2, 3);

#endif /* RLB_TEST_FIXTURE_H */
