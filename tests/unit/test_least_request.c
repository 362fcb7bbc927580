/* test_least_request.c - unit tests of policy_least_request.c: the pick
 * over explicit in-flight counts, through rlb_select_load(). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "engine/engine.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* A fixed wall clock: decay stays out of the way. */
#define NOW 1000000
/* Selections per statistical test. */
#define RUNS 6000

/* The cluster keys of least_request. */
#define CHOICES(n) "load_balancing_least_request_choice_count = " #n ";"
#define BIAS(x)	   "load_balancing_least_request_active_request_bias = " #x ";"

/* A least_request cluster of n replicas, with its settings or NULL. */
static struct fx *lr_cluster(size_t n, const char *settings)
{
	return fx_cluster("least_request", n, NULL, settings);
}

static void select_load(struct fx *f, const uint64_t *in_flight)
{
	rlb_select_load(f->c, false, NOW, in_flight, f->sel);
}

/* That the order is in_flight ascending from place `from` on. */
static void check_by_load(const struct fx *f, const uint64_t *in_flight,
			  size_t from)
{
	const uint32_t *o = f->sel->order;

	for (size_t k = from + 1; k < f->c->nreplicas; k++)
		if (in_flight[o[k - 1]] > in_flight[o[k]])
			fail_msg("place %zu: replica %u (%llu in flight) "
				 "before replica %u (%llu)",
				 k - 1, o[k - 1],
				 (unsigned long long)in_flight[o[k - 1]], o[k],
				 (unsigned long long)in_flight[o[k]]);
}

/* Selection after selection, the order is want[] (all n places). */
static void check_always(struct fx *f, const uint64_t *in_flight,
			 const uint32_t *want, int runs)
{
	for (int r = 0; r < runs; r++) {
		select_load(f, in_flight);
		for (size_t k = 0; k < f->c->nreplicas; k++)
			assert_int_equal(f->sel->order[k], want[k]);
	}
}

/* Count within 6 sigma (and one) of a binomial(RUNS, p). */
static void check_share(const char *what, int got, double p)
{
	double mean = RUNS * p, var = RUNS * p * (1 - p);
	double off = got > mean ? got - mean : mean - got;

	if (off > 1 && (off - 1) * (off - 1) > 36 * var)
		fail_msg("%s: %d of %d, expected about %.0f", what, got, RUNS,
			 mean);
}

/* A full scan (choice count >= the class) takes the idlest replica,
 * and the rest follow by count. */
static void test_least_request_full_scan_prefers_idle(void **state)
{
	static const uint64_t in_flight[] = {5, 0, 3, 2};
	static const uint32_t want[] = {1, 3, 2, 0};
	struct fx *f = lr_cluster(4, CHOICES(4));
	struct fx *more = lr_cluster(4, CHOICES(100));

	check_always(f, in_flight, want, 200);
	check_always(more, in_flight, want, 200);
	fx_free(f);
	fx_free(more);
}

/* Equal counts tie at random, first and after. */
static void test_least_request_full_scan_ties_at_random(void **state)
{
	static const uint64_t in_flight[] = {0, 7, 0, 7};
	struct fx *f = lr_cluster(4, CHOICES(4));
	int first[4] = {0}, second[4] = {0};

	for (int r = 0; r < RUNS; r++) {
		select_load(f, in_flight);
		first[f->sel->order[0]]++;
		second[f->sel->order[2]]++;
		check_by_load(f, in_flight, 0);
	}
	assert_int_equal(first[1] + first[3], 0);
	check_share("replica 0 first", first[0], 0.5);
	check_share("replica 1 third", second[1], 0.5);
	fx_free(f);
}

/*
 * Two distinct choices of three replicas with counts 0 < 1 < 2: the
 * busiest is never first (the other one drawn is less busy); the idlest
 * is first whenever drawn (2 of the 3 pairs), the middle one only with
 * the busiest (1 of 3). Of four with counts 0 < 1 < 2 < 3, the pick is
 * the minimum of a pair: 3, 2, 1 and 0 of the 6 pairs.
 */
static void test_least_request_two_choices_distribution(void **state)
{
	static const uint64_t three[] = {0, 1, 2};
	static const uint64_t four[] = {2, 0, 3, 1};
	struct fx *f = lr_cluster(3, NULL);
	struct fx *g = lr_cluster(4, NULL);
	int first[4] = {0};

	for (int r = 0; r < RUNS; r++) {
		select_load(f, three);
		first[f->sel->order[0]]++;
		/* The rest by count: 2 is always last. */
		check_by_load(f, three, 1);
		assert_int_equal(f->sel->order[2], 2);
	}
	assert_int_equal(first[2], 0);
	check_share("idlest of 3 first", first[0], 2.0 / 3);
	check_share("middle of 3 first", first[1], 1.0 / 3);

	memset(first, 0, sizeof(first));
	for (int r = 0; r < RUNS; r++) {
		select_load(g, four);
		first[g->sel->order[0]]++;
		check_by_load(g, four, 1);
	}
	assert_int_equal(first[2], 0); /* the busiest (3 in flight) */
	check_share("count 0 first", first[1], 3.0 / 6);
	check_share("count 1 first", first[3], 2.0 / 6);
	check_share("count 2 first", first[0], 1.0 / 6);
	fx_free(f);
	fx_free(g);
}

/* One choice: a uniformly random replica, whatever the counts. */
static void test_least_request_one_choice_is_random(void **state)
{
	static const uint64_t in_flight[] = {0, 50, 100};
	struct fx *f = lr_cluster(3, CHOICES(1));
	int first[3] = {0};

	for (int r = 0; r < RUNS; r++) {
		select_load(f, in_flight);
		first[f->sel->order[0]]++;
		check_by_load(f, in_flight, 1);
	}
	for (size_t i = 0; i < 3; i++)
		check_share("first", first[i], 1.0 / 3);
	fx_free(f);
}

/* Errors come first: a replica with errors is never first, however idle;
 * each error class is ordered by count on its own. */
static void test_least_request_errors_first(void **state)
{
	static const uint64_t in_flight[] = {0, 9, 8, 0, 1};
	/* Errors 1 1 0 0 2: classes {2, 3}, then {0, 1}, then {4}. */
	static const uint32_t want[] = {3, 2, 0, 1, 4};
	struct fx *f = lr_cluster(5, CHOICES(5));

	fx_add_errors(f->c, 0, 1);
	fx_add_errors(f->c, 1, 1);
	fx_add_errors(f->c, 4, 2);
	check_always(f, in_flight, want, 200);
	fx_free(f);
}

/*
 * Config priority comes before the pick as well, and the ignored errors
 * do not count: the choices are drawn from the best class only.
 */
static void test_least_request_choices_from_best_class(void **state)
{
	static const uint64_t in_flight[] = {4, 0, 3};
	struct fx_spec spec = {
		.policy = "least_request",
		.n = 3,
		.priority = (const int64_t[]){1, 2, 1},
		.settings = "distributed_replica_max_ignored_errors = 1;",
	};
	struct fx *f = fx_new(&spec);

	fx_add_errors(f->c, 0, 1); /* ignored */
	check_always(f, in_flight, (const uint32_t[]){2, 0, 1}, 200);
	fx_free(f);
}

/* Bias 0: every weight is 1, the counts are ignored: uniform, first and
 * after. */
static void test_least_request_bias_zero_ignores_load(void **state)
{
	static const uint64_t in_flight[] = {0, 100, 100};
	struct fx *f = lr_cluster(3, BIAS(0.0));
	int first[3] = {0}, busy_before_idle = 0;

	for (int r = 0; r < RUNS; r++) {
		select_load(f, in_flight);
		first[f->sel->order[0]]++;
		busy_before_idle +=
			f->sel->order[1] != 0 && f->sel->order[2] == 0;
	}
	for (size_t i = 0; i < 3; i++)
		check_share("first", first[i], 1.0 / 3);
	check_share("idle one last", busy_before_idle, 1.0 / 3);
	fx_free(f);
}

/* Any bias > 0 ranks by count alone (1/(f+1)^bias decreases in f). */
static void test_least_request_any_positive_bias_ranks(void **state)
{
	static const uint64_t in_flight[] = {1000000, 999999, UINT64_MAX};
	static const char *const biases[] = {
		BIAS(0.000001) CHOICES(3),
		BIAS(1) CHOICES(3),
		BIAS(40.0) CHOICES(3),
	};

	for (size_t b = 0; b < ARRAY_SIZE(biases); b++) {
		struct fx *f = lr_cluster(3, biases[b]);

		check_always(f, in_flight, (const uint32_t[]){1, 0, 2}, 50);
		fx_free(f);
	}
}

/* The rest of the answer: key order, ties by count, then at random. */
static void test_least_request_rest_by_load_then_random(void **state)
{
	static const uint64_t in_flight[] = {3, 3, 1, 7, 2};
	struct fx *f = lr_cluster(5, CHOICES(1));
	int zero_before_one = 0;

	fx_add_errors(f->c, 3, 1);
	fx_add_errors(f->c, 4, 1);
	for (int r = 0; r < RUNS; r++) {
		const uint32_t *o = f->sel->order;

		select_load(f, in_flight);
		/* Class {0, 1, 2}: a random first, the others by count. */
		assert_true(o[0] <= 2 && o[1] <= 2 && o[2] <= 2);
		assert_true(in_flight[o[1]] <= in_flight[o[2]]);
		/* Class {3, 4}: by count. */
		assert_int_equal(o[3], 4);
		assert_int_equal(o[4], 3);
		if (o[0] == 2)
			zero_before_one += o[1] == 0;
	}
	/* 2 first a third of the time; then 0 and 1 (both 3) at random. */
	check_share("0 before 1 after 2", zero_before_one, 1.0 / 6);
	fx_free(f);
}

/* Peek reads the counts as a selection does, and changes nothing. */
static void test_least_request_peek_ranks_by_load(void **state)
{
	static const uint64_t in_flight[] = {4, 4, 0};
	struct fx *f = lr_cluster(3, CHOICES(3));

	for (int r = 0; r < 100; r++) {
		rlb_select_load(f->c, true, NOW, in_flight, f->sel);
		assert_int_equal(f->sel->order[0], 2);
	}
	fx_free(f);
}

/*
 * rlb_select() reads the counts from the shared state: connections taken
 * through the ledger steer the pick, and dropping them gives every
 * replica its chance again.
 */
static void test_least_request_reads_shared_counts(void **state)
{
	struct fx *f = lr_cluster(3, CHOICES(3));
	int first[3] = {0};

	assert_true(rlb_health_conn_take(f->c, 0, 9001));
	assert_true(rlb_health_conn_take(f->c, 1, 9002));
	for (int r = 0; r < 100; r++) {
		rlb_select(f->c, false, NOW, f->sel);
		assert_int_equal(f->sel->order[0], 2);
		assert_int_equal(f->sel->in_flight[0], 1);
		assert_int_equal(f->sel->in_flight[2], 0);
	}
	rlb_health_conn_drop(f->c, 9001);
	rlb_health_conn_drop(f->c, 9002);
	for (int r = 0; r < RUNS; r++) {
		rlb_select(f->c, false, NOW, f->sel);
		first[f->sel->order[0]]++;
	}
	for (size_t i = 0; i < 3; i++)
		check_share("first", first[i], 1.0 / 3);
	fx_free(f);
}

/*
 * Many replicas (the shuffle of a healthy selection, runs longer than
 * the stack's room): a full scan orders by count exactly; two choices
 * never put the busiest first.
 */
static void test_least_request_many_replicas(void **state)
{
	size_t n = 300;
	uint64_t *in_flight = malloc(n * sizeof(*in_flight));
	struct fx *scan = lr_cluster(n, CHOICES(1000));
	struct fx *two = lr_cluster(n, NULL);

	assert_non_null(in_flight);
	/* Counts that span little (a counting sort), then widely. */
	for (uint64_t scale = 1; scale <= 100000; scale *= 100000) {
		for (size_t i = 0; i < n; i++)
			in_flight[i] = (i * 37) % n * scale;
		for (int r = 0; r < 20; r++) {
			select_load(scan, in_flight);
			for (size_t k = 0; k < n; k++)
				assert_int_equal(in_flight[scan->sel->order[k]],
						 k * scale);
			select_load(two, in_flight);
			assert_true(in_flight[two->sel->order[0]] <
				    (n - 1) * scale);
			check_by_load(two, in_flight, 1);
		}
	}
	free(in_flight);
	fx_free(scan);
	fx_free(two);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_least_request_full_scan_prefers_idle),
		cmocka_unit_test(test_least_request_full_scan_ties_at_random),
		cmocka_unit_test(test_least_request_two_choices_distribution),
		cmocka_unit_test(test_least_request_one_choice_is_random),
		cmocka_unit_test(test_least_request_errors_first),
		cmocka_unit_test(test_least_request_choices_from_best_class),
		cmocka_unit_test(test_least_request_bias_zero_ignores_load),
		cmocka_unit_test(test_least_request_any_positive_bias_ranks),
		cmocka_unit_test(test_least_request_rest_by_load_then_random),
		cmocka_unit_test(test_least_request_peek_ranks_by_load),
		cmocka_unit_test(test_least_request_reads_shared_counts),
		cmocka_unit_test(test_least_request_many_replicas),
	};

	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
