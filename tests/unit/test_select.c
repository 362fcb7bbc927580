/* test_select.c - unit tests of select.c: key sort and whole selections. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "engine/engine.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* A fixed wall clock: decay stays out of the way unless a test moves it. */
#define NOW 1000000

/*
 * Add errors at the cluster's current decay time T, where no decay is
 * owed: for tests of other behaviour than the decay refinement.
 */
static void add_errors(struct rlb_cluster *c, size_t i, uint64_t n)
{
	rlb_health_add_errors(c, i, n, rlb_health_decay_time(c));
}

/* Record errors[i] errors against each replica. */
static void set_errors(struct fx *f, const uint64_t *errors)
{
	for (size_t i = 0; i < f->c->nreplicas; i++)
		if (errors[i])
			add_errors(f->c, i, errors[i]);
}

static void select_now(struct fx *f)
{
	rlb_select(f->c, false, NOW, f->sel);
}

/* The cluster setting "distributed_replica_max_ignored_errors = m;". */
static const char *ignoring(char *buf, size_t len, int64_t m)
{
	snprintf(buf, len, "distributed_replica_max_ignored_errors = %lld;",
		 (long long)m);
	return buf;
}

static void check_order(const struct rlb_selection *sel, const uint32_t *want,
			const char *what)
{
	for (size_t i = 0; i < sel->n; i++) {
		if (sel->order[i] != want[i]) {
			char got[128] = "", exp[128] = "";

			for (size_t k = 0; k < sel->n && k < 16; k++) {
				snprintf(got + strlen(got),
					 sizeof(got) - strlen(got), " %u",
					 sel->order[k]);
				snprintf(exp + strlen(exp),
					 sizeof(exp) - strlen(exp), " %u",
					 want[k]);
			}
			fail_msg("%s: order [%s ], want [%s ]", what, got, exp);
		}
	}
}

/* Index 0..5 of a permutation of {0, 1, 2}. */
static int perm3(const uint32_t *o)
{
	return (int)o[0] * 2 + (o[1] > o[2] ? 1 : 0);
}

/* ---- rlb_selection_new ---- */

static void test_select_selection_new_layout(void **state)
{
	static const size_t sizes[] = {0, 1, 3, 64, 65, RLB_MAX_REPLICAS};

	for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
		size_t n = sizes[k];
		struct rlb_selection *sel = rlb_selection_new(n);

		assert_non_null(sel);
		assert_int_equal(sel->n, n);
		assert_int_equal((uintptr_t)sel->errors % _Alignof(uint64_t),
				 0);
		assert_int_equal(
			(uintptr_t)sel->policy_prio % _Alignof(int64_t), 0);
		assert_int_equal((uintptr_t)sel->order % _Alignof(uint32_t), 0);
		/* Every slot writable without clobbering another array
		 * (ASan and valgrind watch the bounds). */
		for (size_t i = 0; i < n; i++) {
			sel->errors[i] = UINT64_MAX;
			sel->slowdowns[i] = UINT64_MAX - 1;
			sel->policy_prio[i] = INT64_MIN;
			sel->order[i] = (uint32_t)i;
		}
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(sel->errors[i], UINT64_MAX);
			assert_int_equal(sel->slowdowns[i], UINT64_MAX - 1);
			assert_true(sel->policy_prio[i] == INT64_MIN);
			assert_int_equal(sel->order[i], i);
		}
		free(sel);
	}
	assert_null(rlb_selection_new(SIZE_MAX));
	assert_null(rlb_selection_new(SIZE_MAX / 8));
}

/* ---- rlb_select_sort ---- */

static struct rlb_select_key key(uint64_t errors, int64_t priority,
				 int64_t policy_prio, uint32_t random,
				 uint32_t index)
{
	struct rlb_select_key k = {
		.errors = errors,
		.priority = priority,
		.policy_prio = policy_prio,
		.random = random,
		.index = index,
	};

	return k;
}

static void check_sorted_indexes(const struct rlb_select_key *k, size_t n,
				 const uint32_t *want)
{
	for (size_t i = 0; i < n; i++)
		if (k[i].index != want[i])
			fail_msg("position %zu: index %u, want %u", i,
				 k[i].index, want[i]);
}

/* Errors beat priority beat policy beat random beat index. */
static void test_select_sort_key_precedence(void **state)
{
	struct rlb_select_key k[] = {
		key(1, -100, -100, 0, 0), /* worst: most errors */
		key(0, 2, -100, 0, 1),	  /* worse config priority */
		key(0, 1, 5, 0, 2),	  /* worse policy priority */
		key(0, 1, 4, 9, 3),	  /* worse random */
		key(0, 1, 4, 8, 5),	  /* same as 4 but index */
		key(0, 1, 4, 8, 4),
		key(0, 1, -3, UINT32_MAX, 6), /* LCP-style negatives */
		key(0, INT64_MIN, INT64_MAX, UINT32_MAX, 7),
		key(UINT64_MAX, INT64_MIN, INT64_MIN, 0, 8),
	};
	static const uint32_t want[] = {7, 6, 4, 5, 3, 2, 1, 0, 8};

	rlb_select_sort(k, ARRAY_SIZE(k));
	check_sorted_indexes(k, ARRAY_SIZE(k), want);
}

/* TV23: errors dominate config priority; with M = 1 they tie. */
static void test_select_sort_errors_beat_priority(void **state)
{
	struct rlb_select_key m0[] = {key(1, 0, 0, 0, 0), key(0, 5, 0, 7, 1)};
	struct rlb_select_key m1[] = {key(0, 0, 0, 7, 0), key(0, 5, 0, 0, 1)};
	static const uint32_t want0[] = {1, 0}, want1[] = {0, 1};

	rlb_select_sort(m0, 2);
	check_sorted_indexes(m0, 2, want0);
	rlb_select_sort(m1, 2);
	check_sorted_indexes(m1, 2, want1);
}

/* Fixed random values decide among otherwise equal keys. */
static void test_select_sort_random_breaks_ties(void **state)
{
	struct rlb_select_key k[] = {
		key(0, 1, 0, 30, 0),
		key(0, 1, 0, 10, 1),
		key(0, 1, 0, 20, 2),
		key(0, 1, 0, 10, 3),
	};
	static const uint32_t want[] = {1, 3, 2, 0};

	rlb_select_sort(k, ARRAY_SIZE(k));
	check_sorted_indexes(k, ARRAY_SIZE(k), want);
	/* n = 0 and n = 1 are no-ops. */
	rlb_select_sort(NULL, 0);
	rlb_select_sort(k, 1);
	assert_int_equal(k[0].index, 1);
}

static int ref_cmp(const void *pa, const void *pb)
{
	const struct rlb_select_key *a = pa, *b = pb;

	if (a->errors != b->errors)
		return a->errors < b->errors ? -1 : 1;
	if (a->slowdowns != b->slowdowns)
		return a->slowdowns < b->slowdowns ? -1 : 1;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->policy_prio != b->policy_prio)
		return a->policy_prio < b->policy_prio ? -1 : 1;
	if (a->random != b->random)
		return a->random < b->random ? -1 : 1;
	if (a->index != b->index)
		return a->index < b->index ? -1 : 1;
	return 0;
}

static uint64_t test_rng = 0x243f6a8885a308d3ULL;

static uint32_t next_rand(void)
{
	test_rng ^= test_rng << 13;
	test_rng ^= test_rng >> 7;
	test_rng ^= test_rng << 17;
	return (uint32_t)(test_rng >> 16);
}

enum shape {
	SHAPE_RANDOM,
	SHAPE_FEW,
	SHAPE_SORTED,
	SHAPE_REVERSED,
	SHAPE_PIPE,
	SHAPE_SAWTOOTH,
	SHAPE_EQUAL,
	SHAPE_WIDE,
	SHAPE_SPARSE,
	SHAPE_MEDIUM,
	SHAPE_COUNT
};

static void fill_keys(struct rlb_select_key *k, size_t n, enum shape shape)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t r = next_rand();

		switch (shape) {
		case SHAPE_RANDOM:
			k[i] = key(r % 3, (int64_t)(r >> 2) % 3 - 1,
				   (int64_t)(r >> 4) % 50 - 25, next_rand(),
				   (uint32_t)i);
			k[i].slowdowns = (r >> 10) % 3;
			break;
		case SHAPE_FEW: /* many full ties but for the index */
			k[i] = key(r % 2, 1, (r >> 1) % 2, (r >> 2) % 2,
				   (uint32_t)(n - 1 - i));
			break;
		case SHAPE_SORTED:
			k[i] = key(0, 1, (int64_t)i, 0, (uint32_t)i);
			break;
		case SHAPE_REVERSED:
			k[i] = key(0, 1, -(int64_t)i, 0, (uint32_t)i);
			break;
		case SHAPE_PIPE:
			k[i] = key(0, 1, (int64_t)(i < n / 2 ? i : n - i), 0,
				   (uint32_t)i);
			break;
		case SHAPE_SAWTOOTH:
			k[i] = key(i % 7, 1, 0, (uint32_t)(i % 13),
				   (uint32_t)i);
			break;
		case SHAPE_WIDE: /* too wide to pack into 64 bits */
			k[i] = key(r % 2,
				   (int64_t)((uint64_t)next_rand() << 32 | r),
				   -(int64_t)(r % 5), next_rand(), (uint32_t)i);
			break;
		case SHAPE_SPARSE: /* bytes shared by every key */
			k[i] = key(r % 2, 1, 0, (r >> 1) % 3 << 24 | 0x5a5a5a,
				   (uint32_t)i);
			break;
		case SHAPE_MEDIUM: /* fits 64 bits only without index */
			k[i] = key(0, (int64_t)(r % 3) << 18, 0, next_rand(),
				   (uint32_t)(n - 1 - i));
			break;
		default: /* identical keys, index included */
			k[i] = key(3, 1, 2, 1, 7);
			break;
		}
	}
}

/* Same result as qsort with the reference comparison, all shapes. */
static void test_select_sort_matches_reference(void **state)
{
	static const size_t sizes[] = {2,
				       3,
				       5,
				       15,
				       16,
				       17,
				       31,
				       33,
				       64,
				       100,
				       1000,
				       1023,
				       RLB_MAX_REPLICAS};
	struct rlb_select_key *k = malloc(RLB_MAX_REPLICAS * sizeof(*k));
	struct rlb_select_key *ref = malloc(RLB_MAX_REPLICAS * sizeof(*ref));

	assert_non_null(k);
	assert_non_null(ref);
	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		for (int shape = 0; shape < SHAPE_COUNT; shape++) {
			size_t n = sizes[s];

			fill_keys(k, n, (enum shape)shape);
			memcpy(ref, k, n * sizeof(*k));
			qsort(ref, n, sizeof(*ref), ref_cmp);
			rlb_select_sort(k, n);
			for (size_t i = 0; i < n; i++)
				if (ref_cmp(&k[i], &ref[i]) != 0)
					fail_msg("n=%zu shape=%d: position "
						 "%zu differs",
						 n, shape, i);
		}
	}
	free(k);
	free(ref);
}

/*
 * McIlroy's "killer adversary" for quicksort (Software: Practice and
 * Experience 29(4), 1999), run against a model of select.c's partition
 * (median of lo/mid/hi, Hoare scans, continue with the smaller side,
 * ranges <= 16 left to insertion sort). Values are decided lazily while
 * the model sorts, so that every partition splits off almost nothing; the
 * result is an input on which plain quicksort is quadratic and the real
 * sort must switch to heapsort. If select.c's partition changes, the
 * model must follow, or this input stops being adversarial.
 */
struct adversary {
	int64_t *val; /* per item; `gas` until frozen */
	int64_t gas, nsolid;
	size_t candidate;
};

static bool adv_less(struct adversary *a, size_t x, size_t y)
{
	if (a->val[x] == a->gas && a->val[y] == a->gas)
		a->val[x == a->candidate ? x : y] = a->nsolid++;
	if (a->val[x] == a->gas)
		a->candidate = x;
	else if (a->val[y] == a->gas)
		a->candidate = y;
	return a->val[x] < a->val[y];
}

static void adv_swap(size_t *k, size_t i, size_t j)
{
	size_t t = k[i];

	k[i] = k[j];
	k[j] = t;
}

static size_t adv_partition(struct adversary *a, size_t *k, size_t lo,
			    size_t hi)
{
	size_t mid = lo + (hi - lo) / 2, i = lo, j = hi, pivot;

	if (adv_less(a, k[mid], k[lo]))
		adv_swap(k, mid, lo);
	if (adv_less(a, k[hi], k[mid])) {
		adv_swap(k, hi, mid);
		if (adv_less(a, k[mid], k[lo]))
			adv_swap(k, mid, lo);
	}
	pivot = k[mid];
	for (;;) {
		do
			i++;
		while (adv_less(a, k[i], pivot));
		do
			j--;
		while (adv_less(a, pivot, k[j]));
		if (i >= j)
			return j;
		adv_swap(k, i, j);
	}
}

/* Fill val[0..n) with the adversarial input; returns the partitions the
 * model needed (about n/2 when the attack works). */
static size_t adversary_input(int64_t *val, size_t n)
{
	struct adversary a = {.val = val,
			      .gas = (int64_t)n,
			      .nsolid = 0,
			      .candidate = SIZE_MAX};
	size_t *k = malloc(n * sizeof(*k));
	size_t stack[2 * 64], top = 0, lo = 0, hi = n - 1, parts = 0;

	assert_non_null(k);
	for (size_t i = 0; i < n; i++) {
		k[i] = i;
		val[i] = a.gas;
	}
	for (;;) {
		while (hi - lo + 1 > 16) {
			size_t p = adv_partition(&a, k, lo, hi);

			parts++;
			assert_true(top + 2 <= ARRAY_SIZE(stack));
			if (p - lo + 1 < hi - p) {
				stack[top++] = p + 1;
				stack[top++] = hi;
				hi = p;
			} else {
				stack[top++] = lo;
				stack[top++] = p;
				lo = p + 1;
			}
		}
		if (top == 0)
			break;
		hi = stack[--top];
		lo = stack[--top];
	}
	for (size_t i = 0; i < n; i++)
		if (val[i] == a.gas)
			val[i] = a.nsolid++;
	free(k);
	return parts;
}

/*
 * Large key sets go to the radix sort unless their fields span more than
 * 64 bits: spread the adversarial values over the whole int64 range so
 * that every size reaches the comparison sort.
 */
static void test_select_sort_adversarial(void **state)
{
	for (size_t n = 64; n <= RLB_MAX_REPLICAS; n *= 4) {
		struct rlb_select_key *k = malloc(n * sizeof(*k));
		int64_t *v = malloc(n * sizeof(*v));

		assert_non_null(k);
		assert_non_null(v);
		/* The attack works on the model: far deeper than 2 log2 n. */
		assert_true(adversary_input(v, n) > n / 4);
		for (int wide = 0; wide < 2; wide++) {
			int64_t scale = wide ? INT64_MAX / (int64_t)n : 1;

			for (size_t i = 0; i < n; i++)
				k[i] = key(0, 1, v[i] * scale, 0, (uint32_t)i);
			rlb_select_sort(k, n);
			for (size_t i = 0; i < n; i++)
				assert_true(k[i].policy_prio ==
					    (int64_t)i * scale);
		}
		free(k);
		free(v);
	}
}

/* ---- rlb_select over real health ---- */

/* TV12-TV14: in_order with errors and max_ignored_errors. */
static void test_select_in_order_ignored_errors(void **state)
{
	static const struct {
		const char *id;
		uint64_t errors[3];
		int64_t ignored;
		uint32_t want[3];
		/* clang-format off */
	} v[] = {
		{ "TV12", { 1, 0, 0 }, 0, { 1, 2, 0 } },
		{ "TV13", { 1, 0, 0 }, 1, { 0, 1, 2 } },
		{ "TV14", { 3, 1, 0 }, 1, { 1, 2, 0 } },
		{ "no errors", { 0, 0, 0 }, 0, { 0, 1, 2 } },
		{ "all equal", { 4, 4, 4 }, 0, { 0, 1, 2 } },
		{ "ignored > errors", { 2, 5, 3 }, 10, { 0, 1, 2 } },
		{ "graded", { 9, 2, 5 }, 1, { 1, 2, 0 } },
	};
	/* clang-format on */

	for (size_t k = 0; k < ARRAY_SIZE(v); k++) {
		char m[64];
		struct fx *f = fx_cluster("in_order", 3, NULL,
					  ignoring(m, sizeof(m), v[k].ignored));

		set_errors(f, v[k].errors);
		for (int rep = 0; rep < 20; rep++) {
			select_now(f);
			check_order(f->sel, v[k].want, v[k].id);
		}
		/* Reported counts are the decayed ones, before M applies. */
		for (size_t i = 0; i < 3; i++) {
			assert_int_equal(f->sel->errors[i], v[k].errors[i]);
			assert_int_equal(f->sel->policy_prio[i], i);
		}
		fx_free(f);
	}
}

/*
 * Slowdowns sit between errors and priority in the key (design.md §3):
 * replica 0 has an error (and the worst priority), replica 1 a slowdown,
 * replica 2 a better config priority than 3; max_ignored_errors forgives
 * errors, never slowdowns.
 */
static void test_select_slowdowns_between_errors_and_priority(void **state)
{
	static const int64_t priority[] = {2, 1, 0, 1};
	static const uint64_t errors[] = {1, 0, 0, 0};
	static const uint32_t m0[] = {2, 3, 1, 0}, m1[] = {2, 3, 0, 1};
	struct fx_spec spec = {
		.policy = "random",
		.n = 4,
		.priority = priority,
	};
	char m[64];
	struct fx *f0, *f1;

	f0 = fx_new(&spec);
	/* The same cluster with M = 1: the same state file. */
	spec.name = f0->c->name;
	spec.settings = ignoring(m, sizeof(m), 1);
	f1 = fx_new(&spec);
	set_errors(f0, errors);
	rlb_health_add_slowdowns(f0->c, 1, 1, rlb_health_decay_time(f0->c));
	for (int rep = 0; rep < 20; rep++) {
		select_now(f0);
		check_order(f0->sel, m0, "slowdown behind no slowdown");
		assert_int_equal(f0->sel->slowdowns[1], 1);
		select_now(f1);
		check_order(f1->sel, m1, "ignored errors, never slowdowns");
	}
	fx_free(f0);
	fx_free(f1);
}

/* TV23 end to end: config priority [0, 5], errors [1, 0]. */
static void test_select_errors_beat_config_priority(void **state)
{
	static const int64_t priority[] = {0, 5};
	static const uint64_t errors[] = {1, 0};
	static const uint32_t m0[] = {1, 0}, m1[] = {0, 1};
	struct fx_spec spec = {
		.policy = "random",
		.n = 2,
		.priority = priority,
	};
	char m[64];
	struct fx *f0, *f1;

	f0 = fx_new(&spec);
	spec.name = f0->c->name;
	spec.settings = ignoring(m, sizeof(m), 1);
	f1 = fx_new(&spec);
	set_errors(f0, errors);
	for (int rep = 0; rep < 20; rep++) {
		select_now(f0);
		check_order(f0->sel, m0, "TV23 M=0");
		select_now(f1);
		check_order(f1->sel, m1, "TV23 M=1");
	}
	fx_free(f0);
	fx_free(f1);
}

/*
 * Run `runs` selections; `first` must be the fixed first pick (or -1),
 * `last` the fixed last one (or -1); count how often each replica comes
 * second (first when first == -1).
 */
static void count_picks(struct fx *f, int runs, int first, int last,
			int *counts)
{
	size_t n = f->c->nreplicas;

	for (int r = 0; r < runs; r++) {
		select_now(f);
		if (first >= 0)
			assert_int_equal(f->sel->order[0], first);
		if (last >= 0)
			assert_int_equal(f->sel->order[n - 1], last);
		counts[f->sel->order[first >= 0 ? 1 : 0]]++;
	}
}

/*
 * One selection whose random draws are scripted, one per replica in index
 * order: the order must be exactly `want`.
 */
static void select_drawn(struct fx *f, const uint32_t *draws,
			 const uint32_t *want, const char *what)
{
	fx_draws(draws, f->c->nreplicas);
	select_now(f);
	fx_draws_end();
	check_order(f->sel, want, what);
}

/*
 * TV15 and TV16: replica[offset mod N] first whatever it draws, then the
 * others (a < b) in the order of their draws, by index when they tie.
 */
static void test_select_first_or_random_offsets(void **state)
{
	static const struct {
		int64_t offset;
		uint32_t first, a, b;
	} v[] = {{0, 0, 1, 2}, {4, 1, 0, 2}, {5, 2, 0, 1}};

	for (size_t k = 0; k < ARRAY_SIZE(v); k++) {
		uint32_t first = v[k].first, a = v[k].a, b = v[k].b;
		const uint32_t b_first[] = {first, b, a},
			       a_first[] = {first, a, b};
		uint32_t draws[3];
		char offset[64];
		struct fx *f;

		snprintf(offset, sizeof(offset),
			 "load_balancing_first_offset = %lld;",
			 (long long)v[k].offset);
		f = fx_cluster("first_or_random", 3, NULL, offset);
		draws[first] = UINT32_MAX;
		draws[a] = 7;
		draws[b] = 3;
		select_drawn(f, draws, b_first, "first drew the most");
		draws[first] = 0;
		draws[a] = 3;
		draws[b] = 7;
		select_drawn(f, draws, a_first, "first drew the least");
		draws[first] = draws[a] = draws[b] = 5;
		select_drawn(f, draws, a_first, "equal draws");
		fx_free(f);
	}
}

/* TV17: the preferred replica has an error: the others by their draws. */
static void test_select_first_or_random_with_errors(void **state)
{
	struct fx *f = fx_cluster("first_or_random", 3, NULL, NULL);
	static const uint64_t errors[] = {1, 0, 0};
	static const uint32_t d1[] = {0, 9, 4}, w1[] = {2, 1, 0};
	static const uint32_t d2[] = {0, 4, 9}, w2[] = {1, 2, 0};
	static const uint32_t d3[] = {9, 9, 9};

	set_errors(f, errors);
	select_drawn(f, d1, w1, "TV17, 2 drew less");
	select_drawn(f, d2, w2, "TV17, 1 drew less");
	select_drawn(f, d3, w2, "TV17, equal draws");
	fx_free(f);
}

/* TV18: N = 3, fresh counter. */
static void test_select_round_robin_sequence(void **state)
{
	struct fx *f = fx_cluster("round_robin", 3, NULL, NULL);
	static const uint32_t want[4][3] = {
		{1, 2, 0},
		{2, 0, 1},
		{0, 1, 2},
		{1, 2, 0},
	};
	static const int64_t prio1[3] = {2, 0, 1};

	assert_int_equal(rlb_health_rr_peek(f->c), 0);
	for (int call = 0; call < 4; call++) {
		select_now(f);
		check_order(f->sel, want[call], "TV18");
		if (call == 0)
			for (size_t i = 0; i < 3; i++)
				assert_int_equal(f->sel->policy_prio[i],
						 prio1[i]);
	}
	assert_int_equal(rlb_health_rr_peek(f->c), 4);
	fx_free(f);
}

/* TV19: N = 5: call 1 [1,2,3,4,0], call 5 [0,1,2,3,4], firsts 1,2,3,4,0,1. */
static void test_select_round_robin_five(void **state)
{
	struct fx *f = fx_cluster("round_robin", 5, NULL, NULL);
	static const uint32_t call1[] = {1, 2, 3, 4, 0};
	static const uint32_t call5[] = {0, 1, 2, 3, 4};
	static const uint32_t firsts[] = {1, 2, 3, 4, 0, 1};

	for (int call = 0; call < 6; call++) {
		select_now(f);
		assert_int_equal(f->sel->order[0], firsts[call]);
		if (call == 0)
			check_order(f->sel, call1, "TV19 call 1");
		if (call == 4)
			check_order(f->sel, call5, "TV19 call 5");
	}
	fx_free(f);
}

/* TV20 (errors [0,1,0]) and TV21 (priority [1,2,1]): double load on 2. */
static void test_select_round_robin_errors_and_priority(void **state)
{
	static const uint32_t want[6][3] = {
		{2, 0, 1}, {2, 0, 1}, {0, 2, 1},
		{2, 0, 1}, {2, 0, 1}, {0, 2, 1},
	};
	static const uint64_t errors[] = {0, 1, 0};
	static const int64_t priority[] = {1, 2, 1};
	struct fx_spec spec = {
		.policy = "round_robin",
		.n = 3,
		.priority = priority,
	};
	struct fx *tv20 = fx_cluster("round_robin", 3, NULL, NULL);
	struct fx *tv21 = fx_new(&spec);

	set_errors(tv20, errors);
	for (int call = 0; call < 6; call++) {
		select_now(tv20);
		check_order(tv20->sel, want[call], "TV20");
		select_now(tv21);
		check_order(tv21->sel, want[call], "TV21");
	}
	fx_free(tv20);
	fx_free(tv21);
}

/*
 * Only round_robin selections advance the counter: one cluster loaded
 * with each policy in turn, sharing its state file as reloads do.
 */
static void test_select_counter_only_for_round_robin(void **state)
{
	struct fx *f = fx_cluster("in_order", 3, NULL, NULL);
	static const uint32_t first[] = {1, 2, 0};
	struct fx_spec spec = {.name = f->c->name, .n = 3};
	struct fx *g;

	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		if (p == RLB_POLICY_ROUND_ROBIN)
			continue;
		spec.policy = rlb_policy_name((enum rlb_policy)p);
		g = fx_new(&spec);
		for (int rep = 0; rep < 5; rep++)
			select_now(g);
		fx_free(g);
	}
	assert_int_equal(rlb_health_rr_peek(f->c), 0);
	spec.policy = "round_robin";
	g = fx_new(&spec);
	select_now(g);
	check_order(g->sel, first, "first round_robin");
	assert_int_equal(rlb_health_rr_peek(f->c), 1);
	fx_free(g);
	fx_free(f);
}

/* Peek shows the next order without consuming the turn. */
static void test_select_peek_keeps_round_robin(void **state)
{
	struct fx *f = fx_cluster("round_robin", 3, NULL, NULL);
	static const uint32_t a[] = {1, 2, 0}, b[] = {2, 0, 1};

	for (int rep = 0; rep < 3; rep++) {
		rlb_select(f->c, true, NOW, f->sel);
		check_order(f->sel, a, "peek before call 1");
	}
	assert_int_equal(rlb_health_rr_peek(f->c), 0);
	select_now(f);
	check_order(f->sel, a, "call 1");
	rlb_select(f->c, true, NOW, f->sel);
	check_order(f->sel, b, "peek before call 2");
	assert_int_equal(rlb_health_rr_peek(f->c), 1);
	fx_free(f);
}

/* Peek shows decayed counts but writes neither counts nor T. */
static void test_select_peek_does_not_decay(void **state)
{
	struct fx *f = fx_cluster("in_order", 2, NULL, NULL);
	static const uint32_t healthy[] = {0, 1}, failing[] = {1, 0};

	/* A peek on fresh state does not even start the clock. */
	rlb_select(f->c, true, 1000, f->sel);
	assert_int_equal(rlb_health_decay_time(f->c), 0);
	rlb_select(f->c, false, 1000, f->sel);
	assert_int_equal(rlb_health_decay_time(f->c), 1000);
	add_errors(f->c, 0, 5);

	rlb_select(f->c, true, 1061, f->sel);
	assert_int_equal(f->sel->errors[0], 2);
	check_order(f->sel, failing, "peek at 1061");
	rlb_select(f->c, true, 1400, f->sel);
	assert_int_equal(f->sel->errors[0], 0);
	check_order(f->sel, healthy, "peek at 1400");
	assert_int_equal(rlb_health_errors(f->c, 0, 1400, false), 5);
	assert_int_equal(rlb_health_decay_time(f->c), 1000);

	rlb_select(f->c, false, 1061, f->sel);
	assert_int_equal(f->sel->errors[0], 2);
	assert_int_equal(rlb_health_errors(f->c, 0, 1061, false), 2);
	assert_int_equal(rlb_health_decay_time(f->c), 1061);
	fx_free(f);
}

/* TV24: decay applied by selections at explicit times. */
static void test_select_applies_decay(void **state)
{
	static const struct {
		int64_t t;
		uint64_t errors, decay_time;
	} steps[] = {
		{1059, 5, 1000}, {1061, 2, 1061}, {1120, 2, 1061},
		{1121, 1, 1121}, {1300, 0, 1300},
	};
	struct fx *f = fx_cluster("random", 2, NULL, NULL);
	static const uint32_t b_first[] = {1, 0};

	rlb_select(f->c, false, 1000, f->sel);
	assert_int_equal(rlb_health_decay_time(f->c), 1000);
	add_errors(f->c, 0, 5);
	for (size_t k = 0; k < ARRAY_SIZE(steps); k++) {
		rlb_select(f->c, false, steps[k].t, f->sel);
		if (f->sel->errors[0] != steps[k].errors ||
		    rlb_health_decay_time(f->c) != (int64_t)steps[k].decay_time)
			fail_msg("t=%lld: A=%llu T=%lld, want A=%llu T=%llu",
				 (long long)steps[k].t,
				 (unsigned long long)f->sel->errors[0],
				 (long long)rlb_health_decay_time(f->c),
				 (unsigned long long)steps[k].errors,
				 (unsigned long long)steps[k].decay_time);
		assert_int_equal(f->sel->errors[1], 0);
		if (steps[k].errors)
			check_order(f->sel, b_first, "A has errors");
	}
	fx_free(f);
}

/* TV25: half-life 0 forgets at the next selection. */
static void test_select_half_life_zero(void **state)
{
	struct fx *f = fx_cluster("in_order", 2, NULL,
				  "distributed_replica_error_half_life = 0;");
	static const uint32_t want[] = {0, 1};

	rlb_select(f->c, false, 1000, f->sel);
	add_errors(f->c, 0, 7);
	rlb_select(f->c, false, 1005, f->sel);
	assert_int_equal(f->sel->errors[0], 0);
	check_order(f->sel, want, "TV25");
	fx_free(f);
}

/*
 * TV22: random with errors [0,0,5]: 2 last whatever it draws, 0 first when
 * it draws less than 1 (or the same), so in half of all draw orders.
 */
static void test_select_random_with_errors(void **state)
{
	static const struct {
		uint32_t draws[3], want[3];
	} v[] = {
		{{0, 1, 2}, {0, 1, 2}}, {{0, 2, 1}, {0, 1, 2}},
		{{1, 0, 2}, {1, 0, 2}}, {{1, 2, 0}, {0, 1, 2}},
		{{2, 0, 1}, {1, 0, 2}}, {{2, 1, 0}, {1, 0, 2}},
		{{4, 4, 4}, {0, 1, 2}},
	};
	struct fx *f = fx_cluster("random", 3, NULL, NULL);
	static const uint64_t errors[] = {0, 0, 5};

	set_errors(f, errors);
	for (size_t k = 0; k < ARRAY_SIZE(v); k++) {
		select_drawn(f, v[k].draws, v[k].want, "TV22");
		for (size_t i = 0; i < 3; i++)
			assert_int_equal(f->sel->policy_prio[i], 0);
	}
	fx_free(f);
}

/* Three tied replicas: all six orders, each close to 1/6. */
static void test_select_ties_uniform(void **state)
{
	struct fx *f = fx_cluster("random", 3, NULL, NULL);
	int perms[6] = {0};

	for (int r = 0; r < 6000; r++) {
		select_now(f);
		perms[perm3(f->sel->order)]++;
	}
	/* Expect 1000 each, sigma = 29: +-150 is over 5 sigma. */
	for (int p = 0; p < 6; p++)
		if (perms[p] < 850 || perms[p] > 1150)
			fail_msg("permutation %d seen %d times of 6000", p,
				 perms[p]);
	fx_free(f);
}

/* TV05: one clear winner, the four tied others in uniform order. */
static void test_select_ties_after_winner_uniform(void **state)
{
	static const char *const hosts[] = {"sde1010", "sde102", "sde103",
					    "sde1020", "sde1030"};
	struct fx *f = fx_cluster("hostname_longest_common_prefix", 5, hosts,
				  "local_hostname = \"sde101\";");
	int counts[5] = {0};

	count_picks(f, 4000, 0, -1, counts);
	for (size_t i = 1; i < 5; i++)
		assert_in_range(counts[i], 800, 1200);
	fx_free(f);
}

/* Deterministic hostname vectors through the whole selection. */
static void test_select_hostname_vectors(void **state)
{
	static const struct {
		const char *id;
		enum rlb_policy policy;
		const char *local;
		size_t n;
		const char *hosts[3];
		uint32_t want[3];
		/* clang-format off */
	} v[] = {
		{ "TV01", RLB_POLICY_NEAREST_HOSTNAME, "example01-01-1", 3,
		  { "example01-01-1", "example01-01-2", "example01-02-2" },
		  { 0, 1, 2 } },
		{ "TV02", RLB_POLICY_NEAREST_HOSTNAME, "abc", 2,
		  { "abcdef", "abd" }, { 0, 1 } },
		{ "TV03a", RLB_POLICY_NEAREST_HOSTNAME, "HostA", 2,
		  { "hosta", "HostB" }, { 1, 0 } },
		{ "TV03b", RLB_POLICY_LEVENSHTEIN, "HostA", 2,
		  { "hosta", "HostB" }, { 0, 1 } },
		{ "TV03c", RLB_POLICY_LCP, "HostA", 2, { "hosta", "HostB" },
		  { 1, 0 } },
		{ "TV06", RLB_POLICY_LCS, "et46gtghn.qc.localdomain", 2,
		  { "tr676ddgh.td.localdomain", "ab999.qc.localdomain" },
		  { 1, 0 } },
		{ "TV07a", RLB_POLICY_LCS, "ch1.dc1.example.com", 2,
		  { "ch2.dc1.example.com", "ch1.dc2.example.com" }, { 0, 1 } },
		{ "TV07b", RLB_POLICY_LCP, "ch1.dc1.example.com", 2,
		  { "ch2.dc1.example.com", "ch1.dc2.example.com" }, { 1, 0 } },
		{ "TV08 nearest", RLB_POLICY_NEAREST_HOSTNAME, "web-a1.eu", 3,
		  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { 2, 1, 0 } },
		{ "TV08 lcp", RLB_POLICY_LCP, "web-a1.eu", 3,
		  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { 2, 1, 0 } },
		{ "TV08 lcs", RLB_POLICY_LCS, "web-a1.eu", 3,
		  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { 0, 1, 2 } },
		{ "TV09 lev", RLB_POLICY_LEVENSHTEIN,
		  "rhbdp-ch-000449-clickhouse-0-0", 2,
		  { "rhbdp-ch-000449-clickhouse-12-0",
		    "rhbdp-ch-000449-clickhouse-12-1" }, { 0, 1 } },
		{ "TV10 lev", RLB_POLICY_LEVENSHTEIN, "", 3,
		  { "a-long-name", "bb", "ccc" }, { 1, 2, 0 } },
		{ "TV11 nearest", RLB_POLICY_NEAREST_HOSTNAME,
		  "CH-1.example.COM", 2,
		  { "ch-1.example.com", "CH-2.example.COM" }, { 1, 0 } },
		{ "TV11 lev", RLB_POLICY_LEVENSHTEIN, "CH-1.example.COM", 2,
		  { "ch-1.example.com", "CH-2.example.COM" }, { 0, 1 } },
		{ "TV11 lcs", RLB_POLICY_LCS, "CH-1.example.COM", 2,
		  { "ch-1.example.com", "CH-2.example.COM" }, { 1, 0 } },
	};
	/* clang-format on */

	for (size_t k = 0; k < ARRAY_SIZE(v); k++) {
		struct fx *f = fx_cluster_local(rlb_policy_name(v[k].policy),
						v[k].n, v[k].hosts, v[k].local);

		for (int rep = 0; rep < 30; rep++) {
			select_now(f);
			check_order(f->sel, v[k].want, v[k].id);
		}
		fx_free(f);
	}
}

/*
 * Hostname vectors with a random part (TV04a/b/c, TV08 lev, TV10, TV29):
 * the policy decides what it can, the draws order the rest.
 */
static void test_select_hostname_ties(void **state)
{
	static const struct {
		const char *id, *policy, *local;
		const char *hosts[3];
		uint32_t draws[2][3], want[2][3];
		/* clang-format off */
	} v[] = {
		/* LCP: 1 first, then {0, 2}. */
		{ "TV04a", "hostname_longest_common_prefix", "sfe301",
		  { "sde301", "sfe10101", "sde505" },
		  { { 9, 0, 4 }, { 4, UINT32_MAX, 9 } },
		  { { 1, 2, 0 }, { 1, 0, 2 } } },
		/* nearest: first in {0, 1}, 2 last. */
		{ "TV04b", "nearest_hostname", "sfe301",
		  { "sde301", "sfe10101", "sde505" },
		  { { 9, 4, 0 }, { 4, 9, 0 } },
		  { { 1, 0, 2 }, { 0, 1, 2 } } },
		/* levenshtein: 0 first, then {1, 2}. */
		{ "TV04c", "hostname_levenshtein_distance", "sfe301",
		  { "sde301", "sfe10101", "sde505" },
		  { { 9, 7, 2 }, { 9, 2, 7 } },
		  { { 0, 2, 1 }, { 0, 1, 2 } } },
		/* levenshtein [2, 2, 3]: {0, 1}, then 2. */
		{ "TV08 lev", "hostname_levenshtein_distance", "web-a1.eu",
		  { "db-a1.eu", "web-b10.eu", "web-a2.us" },
		  { { 9, 4, 0 }, { 4, 9, 0 } },
		  { { 1, 0, 2 }, { 0, 1, 2 } } },
		/* LCS with an empty local name: the draws alone. */
		{ "TV10", "hostname_longest_common_suffix", "",
		  { "a-long-name", "bb", "ccc" },
		  { { 3, 1, 2 }, { 2, 3, 1 } },
		  { { 1, 2, 0 }, { 2, 0, 1 } } },
		/* The documentation's distances tie: the draws alone. */
		{ "TV29", "hostname_levenshtein_distance",
		  "example-clickhouse-0-0",
		  { "ample-clickhouse-0-0", "example-clickhouse-1-10",
		    "example-clickhouse-12-0" },
		  { { 5, 9, 1 }, { 1, 5, 9 } },
		  { { 2, 0, 1 }, { 0, 1, 2 } } },
	};
	/* clang-format on */

	for (size_t k = 0; k < ARRAY_SIZE(v); k++) {
		struct fx *f = fx_cluster_local(v[k].policy, 3, v[k].hosts,
						v[k].local);

		for (size_t d = 0; d < 2; d++)
			select_drawn(f, v[k].draws[d], v[k].want[d], v[k].id);
		fx_free(f);
	}
}

/* Past the stack key array (64): same rules, heap keys. */
static void test_select_many_replicas(void **state)
{
	size_t n = 1000;
	int64_t *priority = malloc(n * sizeof(*priority));
	uint32_t *draws = malloc(n * sizeof(*draws));
	uint32_t *want = malloc(n * sizeof(*want));
	struct fx_spec spec = {.policy = "in_order", .n = n};
	struct fx *f, *g;
	size_t pos = 0;

	assert_non_null(priority);
	assert_non_null(draws);
	assert_non_null(want);
	for (size_t i = 0; i < n; i++)
		priority[i] = i == 700 ? 0 : 1;
	spec.priority = priority;
	f = fx_new(&spec);
	add_errors(f->c, 500, 1);
	add_errors(f->c, 0, 1);
	add_errors(f->c, 999, 2);
	select_now(f);
	assert_int_equal(f->sel->order[0], 700);
	for (size_t i = 1; i < n; i++) {
		if (i == 500 || i == 700 || i == 999)
			continue;
		assert_int_equal(f->sel->order[++pos], i);
	}
	assert_int_equal(f->sel->order[n - 3], 0);
	assert_int_equal(f->sel->order[n - 2], 500);
	assert_int_equal(f->sel->order[n - 1], 999);

	/*
	 * The same cluster as random, 700 back to the default priority:
	 * draws falling with the index turn each error group around.
	 */
	spec.name = f->c->name;
	spec.policy = "random";
	spec.priority = NULL;
	g = fx_new(&spec);
	pos = 0;
	for (size_t i = 0; i < n; i++) {
		draws[i] = (uint32_t)(n - i) * 4000000u;
		if (n - 1 - i != 0 && n - 1 - i != 500 && n - 1 - i != 999)
			want[pos++] = (uint32_t)(n - 1 - i);
	}
	want[pos++] = 500;
	want[pos++] = 0;
	want[pos++] = 999;
	select_drawn(g, draws, want, "random, 1000 replicas");
	fx_free(g);
	fx_free(f);
	free(priority);
	free(draws);
	free(want);
}

/*
 * Many replicas whose counts decide nothing: each class of equal policy
 * priority is shuffled (Fisher-Yates over index order, place k swapped
 * with place draw * (k + 1) >> 32, from the last place down: one draw a
 * place but the first). Random, 200 replicas: the order the test's own
 * shuffle of the same draws gives. With one replica erroring, the counts
 * decide: a draw per replica and the sort, that replica last.
 */
static void test_select_many_healthy_shuffled_by_draws(void **state)
{
	size_t n = 200;
	struct fx_spec spec = {.policy = "random", .n = n};
	uint32_t draws[200], want[200], want_err[200];
	struct fx *f = fx_new(&spec);
	size_t pos = 0;

	for (size_t i = 0; i < n; i++) {
		draws[i] = (uint32_t)(i * 2654435761u); /* spread, scripted */
		want[i] = (uint32_t)i;
	}
	for (size_t k = n - 1, d = 0; k >= 1; k--, d++) {
		size_t j = (size_t)(((uint64_t)draws[d] * (k + 1)) >> 32);
		uint32_t t = want[k];

		want[k] = want[j];
		want[j] = t;
	}
	fx_draws(draws, n - 1);
	select_now(f);
	fx_draws_end();
	check_order(f->sel, want, "healthy, 200 replicas");

	/* The sort: by the draws, 77 prime to 200 making them a
	 * permutation, replica 130 last for its error. */
	for (size_t i = 0; i < n; i++) {
		uint32_t rank = (uint32_t)(i * 77 % n);

		draws[i] = rank * 20000000u;
		want[rank] = (uint32_t)i;
	}
	for (size_t k = 0; k < n; k++)
		if (want[k] != 130)
			want_err[pos++] = want[k];
	want_err[pos] = 130;
	add_errors(f->c, 130, 1);
	select_drawn(f, draws, want_err, "one erroring, 200 replicas");
	fx_free(f);
}

/*
 * The shuffle keeps the classes in order and is uniform within them:
 * first_or_random over 100 (class 0 the offset's replica, class 1 the
 * others): the offset's replica first every time, each other replica
 * second about as often as any, and a fixed point as often as chance
 * gives (a shuffle that never leaves a place alone, Sattolo's, fails).
 */
static void test_select_many_healthy_shuffle_uniform(void **state)
{
	size_t n = 100;
	int runs = 9900;
	struct fx *f = fx_cluster("first_or_random", n, NULL,
				  "load_balancing_first_offset = 7;");
	int *second = calloc(n, sizeof(*second)), fixed = 0;

	assert_non_null(second);
	for (int r = 0; r < runs; r++) {
		select_now(f);
		assert_int_equal(f->sel->order[0], 7);
		second[f->sel->order[1]]++;
		fixed += f->sel->order[50] == 50;
	}
	/* 100 each of the 99 others, sigma about 10: 40..160. */
	for (size_t i = 0; i < n; i++)
		if (i != 7 && (second[i] < 40 || second[i] > 160))
			fail_msg("replica %zu second %d times of %d", i,
				 second[i], runs);
	assert_int_equal(second[7], 0);
	/* Replica 50 at place 50: 1 in 99, about 100 times. */
	assert_in_range(fixed, 40, 160);
	free(second);
	fx_free(f);
}

/*
 * A healthy selection over many replicas of a hostname policy: a few
 * big classes of distance (counted four ways), in order of distance,
 * every replica once, and the order within a class differing from one
 * selection to the next.
 */
static void test_select_many_healthy_classes_in_order(void **state)
{
	size_t n = 120;
	char names[120][16];
	const char *hosts[120];
	struct fx *f;
	bool moved = false;
	uint32_t prev_second = UINT32_MAX;

	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "h-%zu", i);
		hosts[i] = names[i];
	}
	f = fx_cluster_local("hostname_levenshtein_distance", n, hosts, "h-5");
	for (int r = 0; r < 20; r++) {
		bool seen[120] = {false};

		select_now(f);
		for (size_t k = 0; k < n; k++) {
			uint32_t i = f->sel->order[k];

			assert_in_range(i, 0, n - 1);
			assert_false(seen[i]);
			seen[i] = true;
			if (k)
				assert_true(
					f->sel->policy_prio[f->sel->order[k -
									  1]] <=
					f->sel->policy_prio[i]);
		}
		/* h-5 alone at distance 0; then the class of distance 1. */
		assert_int_equal(f->sel->order[0], 5);
		moved |= prev_second != UINT32_MAX &&
			 f->sel->order[1] != prev_second;
		prev_second = f->sel->order[1];
	}
	assert_true(moved);
	fx_free(f);
}

/*
 * Whatever the sort path (packed radix, or the comparison sort when the
 * fields span more than 64 bits), a selection over many replicas is a
 * permutation ordered by (effective errors, priority, policy priority).
 */
static void check_selection_sorted(const struct fx *f, int64_t ignored)
{
	const struct rlb_selection *sel = f->sel;
	size_t n = sel->n;
	bool *seen = calloc(n, sizeof(*seen));

	assert_non_null(seen);
	for (size_t k = 0; k < n; k++) {
		uint32_t i = sel->order[k];

		assert_in_range(i, 0, n - 1);
		assert_false(seen[i]);
		seen[i] = true;
		if (k > 0) {
			uint32_t h = sel->order[k - 1];
			uint64_t eh = sel->errors[h] > (uint64_t)ignored
					      ? sel->errors[h] - ignored
					      : 0;
			uint64_t ei = sel->errors[i] > (uint64_t)ignored
					      ? sel->errors[i] - ignored
					      : 0;
			int64_t ph = f->c->replicas[h].priority;
			int64_t pi = f->c->replicas[i].priority;

			if (eh != ei) {
				assert_true(eh < ei);
			} else if (ph != pi) {
				assert_true(ph < pi);
			} else {
				assert_true(sel->policy_prio[h] <=
					    sel->policy_prio[i]);
			}
		}
	}
	free(seen);
}

/*
 * Spread 0: small fields, packed. 1: priorities over all the config
 * allows (0 .. INT64_MAX), comparison sort. 2: priorities 2^41 apart,
 * which fit 64 bits only without the 32 random bits, so also the
 * comparison sort.
 */
static void test_select_many_replicas_mixed_keys(void **state)
{
	size_t n = 300;
	int64_t *priority = malloc(n * sizeof(*priority));
	struct fx_spec spec = {
		.n = n,
		.priority = priority,
		/* Every replica has an error; errors <= M count 0. */
		.settings = "distributed_replica_max_ignored_errors = 2; "
			    "local_hostname = \"r17.example\";",
	};

	assert_non_null(priority);
	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		spec.policy = rlb_policy_name((enum rlb_policy)p);
		for (int wide = 0; wide < 3; wide++) {
			struct fx *f;

			for (size_t i = 0; i < n; i++)
				priority[i] = (int64_t)(i * 13 % 5) + 1;
			/* 3 has the most errors (11), 0 the fewest (1). */
			if (wide == 1) {
				priority[0] = 0;
				priority[3] = INT64_MAX;
			} else if (wide == 2) {
				priority[0] = 0;
				priority[3] = INT64_C(1) << 41;
			}
			f = fx_new(&spec);
			for (size_t i = 0; i < n; i++)
				add_errors(f->c, i, i * 7 % 11 + 1);
			for (int rep = 0; rep < 5; rep++) {
				select_now(f);
				check_selection_sorted(f, 2);
			}
			if (wide > 0) {
				assert_int_equal(f->sel->order[0], 0);
				assert_int_equal(f->sel->order[n - 1], 3);
			}
			fx_free(f);
		}
	}
	free(priority);
}

/* 100 tied replicas: each comes first (and last) about 1/100 of the time. */
static void test_select_many_ties_uniform(void **state)
{
	size_t n = 100;
	int runs = 10000;
	struct fx *f = fx_cluster("random", n, NULL, NULL);
	int *first = calloc(n, sizeof(*first));
	int *last = calloc(n, sizeof(*last));

	assert_non_null(first);
	assert_non_null(last);
	for (int r = 0; r < runs; r++) {
		select_now(f);
		first[f->sel->order[0]]++;
		last[f->sel->order[n - 1]]++;
	}
	/* Expect 100 each, sigma 9.95: 40..160 is 6 sigma. */
	for (size_t i = 0; i < n; i++) {
		if (first[i] < 40 || first[i] > 160 || last[i] < 40 ||
		    last[i] > 160)
			fail_msg("replica %zu: first %d, last %d times of %d",
				 i, first[i], last[i], runs);
	}
	free(first);
	free(last);
	fx_free(f);
}

/* Exactly at and just past the stack limit, round_robin rotates. */
static void test_select_round_robin_stack_boundary(void **state)
{
	static const size_t sizes[] = {1, 2, 64, 65};

	for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
		size_t n = sizes[k];
		struct fx *f = fx_cluster("round_robin", n, NULL, NULL);

		for (size_t call = 0; call < n + 2; call++) {
			select_now(f);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(f->sel->order[i],
						 (call + 1 + i) % n);
		}
		fx_free(f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_select_selection_new_layout),
		cmocka_unit_test(test_select_sort_key_precedence),
		cmocka_unit_test(test_select_sort_errors_beat_priority),
		cmocka_unit_test(test_select_sort_random_breaks_ties),
		cmocka_unit_test(test_select_sort_matches_reference),
		cmocka_unit_test(test_select_sort_adversarial),
		cmocka_unit_test(test_select_in_order_ignored_errors),
		cmocka_unit_test(test_select_errors_beat_config_priority),
		cmocka_unit_test(
			test_select_slowdowns_between_errors_and_priority),
		cmocka_unit_test(test_select_first_or_random_offsets),
		cmocka_unit_test(test_select_first_or_random_with_errors),
		cmocka_unit_test(test_select_round_robin_sequence),
		cmocka_unit_test(test_select_round_robin_five),
		cmocka_unit_test(test_select_round_robin_errors_and_priority),
		cmocka_unit_test(test_select_counter_only_for_round_robin),
		cmocka_unit_test(test_select_peek_keeps_round_robin),
		cmocka_unit_test(test_select_peek_does_not_decay),
		cmocka_unit_test(test_select_applies_decay),
		cmocka_unit_test(test_select_half_life_zero),
		cmocka_unit_test(test_select_random_with_errors),
		cmocka_unit_test(test_select_ties_uniform),
		cmocka_unit_test(test_select_ties_after_winner_uniform),
		cmocka_unit_test(test_select_hostname_vectors),
		cmocka_unit_test(test_select_hostname_ties),
		cmocka_unit_test(test_select_many_replicas),
		cmocka_unit_test(test_select_many_healthy_shuffled_by_draws),
		cmocka_unit_test(test_select_many_healthy_shuffle_uniform),
		cmocka_unit_test(test_select_many_healthy_classes_in_order),
		cmocka_unit_test(test_select_many_replicas_mixed_keys),
		cmocka_unit_test(test_select_many_ties_uniform),
		cmocka_unit_test(test_select_round_robin_stack_boundary),
	};

	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
