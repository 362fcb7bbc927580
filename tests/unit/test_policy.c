/* test_policy.c - unit tests of the policies: names and distances
 * (model/policy.c), the ops table and each policy's priorities
 * (engine/policies.c, policy_*.c). */
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

/* ---- names ---- */

static void test_policy_names_round_trip(void **state)
{
	static const char *const names[RLB_POLICY_COUNT] = {
		"random",
		"nearest_hostname",
		"hostname_levenshtein_distance",
		"hostname_longest_common_prefix",
		"hostname_longest_common_suffix",
		"in_order",
		"first_or_random",
		"round_robin",
		"least_request",
	};

	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		enum rlb_policy out = RLB_POLICY_COUNT;

		assert_string_equal(rlb_policy_name((enum rlb_policy)p),
				    names[p]);
		assert_int_equal(rlb_policy_parse(names[p], &out), 0);
		assert_int_equal(out, p);
	}
	assert_string_equal(rlb_policy_name(RLB_POLICY_COUNT), "?");
}

static void test_policy_parse_rejects_inexact(void **state)
{
	static const char *const bad[] = {
		"",	     "Random",	      "RANDOM",
		"nearest",   "round-robin",   "in_order ",
		" in_order", "Least_Request", "first_or_random_",
	};
	enum rlb_policy out = RLB_POLICY_ROUND_ROBIN;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(rlb_policy_parse(bad[i], &out), -1);
	assert_int_equal(rlb_policy_parse(NULL, &out), -1);
	assert_int_equal(out, RLB_POLICY_ROUND_ROBIN);
}

static void test_policy_suggest_close_names(void **state)
{
	/* clang-format off */
	static const struct {
		const char *in, *want;
	} v[] = {
		{ "nearest", "nearest_hostname" },
		{ "roundrobin", "round_robin" },
		{ "IN_ORDER", "in_order" },
		{ "Round-Robin", "round_robin" },
		{ "randon", "random" },
		{ "rand", "random" },
		{ "first-or-random", "first_or_random" },
		{ "first", "first_or_random" },
		{ "nearest_hostnme", "nearest_hostname" },
		{ "levenshtein", "hostname_levenshtein_distance" },
		{ "hostname_levenstein_distance",
		  "hostname_levenshtein_distance" },
		{ "lcp", "hostname_longest_common_prefix" },
		{ "LCS", "hostname_longest_common_suffix" },
		{ "longest_common_suffix", "hostname_longest_common_suffix" },
		{ "hostname_longest_common_prefx",
		  "hostname_longest_common_prefix" },
		{ "inorder", "in_order" },
		{ "in_ordr", "in_order" },
		{ "robin", "round_robin" },
		{ "least-request", "least_request" },
		{ "LeastRequest", "least_request" },
		{ "leastconn", "least_request" },
		{ "least_requests", "least_request" },
	};
	/* clang-format on */

	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		const char *got = rlb_policy_suggest(v[i].in);

		if (!got || strcmp(got, v[i].want) != 0)
			fail_msg("suggest(\"%s\") = %s, want %s", v[i].in,
				 got ? got : "NULL", v[i].want);
	}
}

static const char *word_of(void *ctx, size_t i)
{
	return ((const char *const *)ctx)[i];
}

/* The "did you mean" of replicalbctl (strict) and of config keys. */
static void test_closest_word_strict_and_loose(void **state)
{
	const char *clusters[] = {"cap.cluster", "analytics.cluster", NULL,
				  "audit.cluster"};
	const char *commands[] = {"status", "reset", "resolve"};

	(void)state;
	assert_string_equal(rlb_closest_word("analytcs.cluster", word_of,
					     clusters, 4, true),
			    "analytics.cluster");
	/* A shared ".cluster" is no closeness: 3 edits in 12 (loose: 4). */
	assert_null(
		rlb_closest_word("nope.cluster", word_of, clusters, 4, true));
	assert_string_equal(
		rlb_closest_word("nope.cluster", word_of, clusters, 4, false),
		"cap.cluster");
	/* A prefix of 3 or more, case-folded. */
	assert_string_equal(rlb_closest_word("AUD", word_of, clusters, 4, true),
			    "audit.cluster");
	assert_string_equal(
		rlb_closest_word("stauts", word_of, commands, 3, true),
		"status");
	/* Two edits of two letters: nothing. */
	assert_null(rlb_closest_word("zz", word_of, commands, 3, true));
	assert_null(rlb_closest_word("", word_of, commands, 0, true));
}

static void test_policy_suggest_nothing_close(void **state)
{
	static const char *const far[] = {
		"xyzzy",  "abc",  "x",
		"fewest", "dns",  "fastest",
		"______", "!!!!", "hostname_hostname_hostname_hostname_x",
	};

	assert_null(rlb_policy_suggest(NULL));
	assert_null(rlb_policy_suggest(""));
	for (size_t i = 0; i < ARRAY_SIZE(far); i++) {
		const char *got = rlb_policy_suggest(far[i]);

		if (got)
			fail_msg("suggest(\"%s\") = %s, want NULL", far[i],
				 got);
	}
}

/* What each policy needs, from its ops: no caller tests names. */
static void test_policy_ops_needs(void **state)
{
	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		const struct rlb_policy_ops *ops = rlb_policy_ops(p);
		bool hostname = p == RLB_POLICY_NEAREST_HOSTNAME ||
				p == RLB_POLICY_LEVENSHTEIN ||
				p == RLB_POLICY_LCP || p == RLB_POLICY_LCS;

		assert_non_null(ops);
		assert_non_null(ops->priorities);
		assert_int_equal(ops->needs_hostname, hostname);
		assert_int_equal(ops->host_priority != NULL, hostname);
		assert_int_equal(ops->needs_counter,
				 p == RLB_POLICY_ROUND_ROBIN);
		assert_int_equal(ops->static_classes,
				 p != RLB_POLICY_ROUND_ROBIN);
		/* Only least_request reads live load, and only it picks
		 * after the sort. */
		assert_int_equal(ops->needs_load,
				 p == RLB_POLICY_LEAST_REQUEST);
		assert_int_equal(ops->pick != NULL,
				 p == RLB_POLICY_LEAST_REQUEST);
	}
	/* Outside the enum: random's, never a crash. */
	assert_ptr_equal(rlb_policy_ops(RLB_POLICY_COUNT),
			 &rlb_policy_random_ops);
}

/* policy_priority(i) of c for turn, from the batch of all its replicas. */
static int64_t priority_of(const struct rlb_cluster *c, size_t i, uint64_t turn)
{
	int64_t out[64], min, max;

	assert_in_range(c->nreplicas, 1, 64);
	rlb_policy_priorities(c, turn, out, c->nreplicas, &min, &max);
	return out[i];
}

/* ---- distance functions ---- */

struct dist_vector {
	const char *local, *host;
	size_t dist, lev, lcp, lcs;
};

/* Every hostname pair of clickhouse.md §9, plus edges. */
/* clang-format off */
static const struct dist_vector vectors[] = {
	/* TV01 */
	{ "example01-01-1", "example01-01-1", 0, 0, 14, 14 },
	{ "example01-01-1", "example01-01-2", 1, 1, 13, 0 },
	{ "example01-01-1", "example01-02-2", 2, 2, 11, 0 },
	/* TV02: tail of the longer name ignored by nearest */
	{ "abc", "abcdef", 0, 3, 3, 0 },
	{ "abc", "abd", 1, 1, 2, 0 },
	/* TV03: case */
	{ "HostA", "hosta", 2, 0, 0, 0 },
	{ "HostA", "HostB", 1, 1, 4, 0 },
	/* TV04, TV05 */
	{ "sfe301", "sde301", 1, 1, 1, 4 },
	{ "sfe301", "sfe10101", 1, 3, 3, 2 },
	{ "sfe301", "sde505", 3, 3, 1, 0 },
	{ "sde101", "sde1010", 0, 1, 6, 0 },
	{ "sde101", "sde102", 1, 1, 5, 0 },
	{ "sde101", "sde103", 1, 1, 5, 0 },
	{ "sde101", "sde1020", 1, 2, 5, 0 },
	{ "sde101", "sde1030", 1, 2, 5, 0 },
	/* TV06 */
	{ "et46gtghn.qc.localdomain", "tr676ddgh.td.localdomain", 11, 9, 0,
	  12 },
	{ "et46gtghn.qc.localdomain", "ab999.qc.localdomain", 18, 9, 0, 15 },
	/* TV07 */
	{ "ch1.dc1.example.com", "ch2.dc1.example.com", 1, 1, 2, 16 },
	{ "ch1.dc1.example.com", "ch1.dc2.example.com", 1, 1, 6, 12 },
	/* TV08 */
	{ "web-a1.eu", "db-a1.eu", 8, 2, 0, 7 },
	{ "web-a1.eu", "web-b10.eu", 4, 2, 4, 3 },
	{ "web-a1.eu", "web-a2.us", 3, 3, 5, 0 },
	/* TV09 */
	{ "rhbdp-ch-000449-clickhouse-0-0", "rhbdp-ch-000449-clickhouse-12-0",
	  3, 2, 27, 2 },
	{ "rhbdp-ch-000449-clickhouse-0-0", "rhbdp-ch-000449-clickhouse-12-1",
	  3, 3, 27, 0 },
	/* TV10: empty local name */
	{ "", "a-long-name", 0, 11, 0, 0 },
	{ "", "bb", 0, 2, 0, 0 },
	{ "", "ccc", 0, 3, 0, 0 },
	/* TV11: only Levenshtein folds case */
	{ "CH-1.example.COM", "ch-1.example.com", 5, 0, 0, 0 },
	{ "CH-1.example.COM", "CH-2.example.COM", 1, 1, 3, 12 },
	/* TV29: the documentation's 1, 2, 3 are really 2, 2, 2 */
	{ "example-clickhouse-0-0", "ample-clickhouse-0-0", 18, 2, 0, 20 },
	{ "example-clickhouse-0-0", "example-clickhouse-1-10", 2, 2, 19, 1 },
	{ "example-clickhouse-0-0", "example-clickhouse-12-0", 3, 2, 19, 2 },
	/* edges */
	{ "", "", 0, 0, 0, 0 },
	{ "abc", "", 0, 3, 0, 0 },
	{ "same", "same", 0, 0, 4, 4 },
	{ "kitten", "sitting", 2, 3, 0, 0 },
	{ "saturday", "sunday", 5, 3, 1, 3 },
	{ "ab", "ba", 2, 2, 0, 0 },
	{ "aaa", "aa", 0, 1, 2, 2 },
	{ "abcd", "ABCD", 4, 0, 0, 0 },
	{ "a.b", "a-b", 1, 1, 1, 1 },
};
/* clang-format on */

static void test_policy_distance_vectors(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(vectors); i++) {
		const struct dist_vector *v = &vectors[i];

		if (rlb_prefix_distance(v->local, v->host) != v->dist ||
		    rlb_levenshtein(v->local, v->host) != v->lev ||
		    rlb_common_prefix(v->local, v->host) != v->lcp ||
		    rlb_common_suffix(v->local, v->host) != v->lcs)
			fail_msg("\"%s\" vs \"%s\": dist %zu lev %zu lcp %zu "
				 "lcs %zu, want %zu %zu %zu %zu",
				 v->local, v->host,
				 rlb_prefix_distance(v->local, v->host),
				 rlb_levenshtein(v->local, v->host),
				 rlb_common_prefix(v->local, v->host),
				 rlb_common_suffix(v->local, v->host), v->dist,
				 v->lev, v->lcp, v->lcs);
		/* All four are symmetric. */
		assert_int_equal(rlb_prefix_distance(v->host, v->local),
				 v->dist);
		assert_int_equal(rlb_levenshtein(v->host, v->local), v->lev);
		assert_int_equal(rlb_common_prefix(v->host, v->local), v->lcp);
		assert_int_equal(rlb_common_suffix(v->host, v->local), v->lcs);
	}
}

/* Folding is ASCII only: Latin-1 and UTF-8 bytes compare as they are. */
static void test_policy_levenshtein_ascii_only_folding(void **state)
{
	assert_int_equal(rlb_levenshtein("\xc4", "\xe4"), 1);
	assert_int_equal(rlb_levenshtein("caf\xc3\x89", "caf\xc3\xa9"), 1);
	assert_int_equal(rlb_levenshtein("AZ@[`{", "az@[`{"), 0);
	assert_int_equal(rlb_levenshtein("@[", "`{"), 2);
	assert_int_equal(rlb_prefix_distance("A", "a"), 1);
	assert_int_equal(rlb_common_prefix("Ab", "ab"), 0);
	assert_int_equal(rlb_common_suffix("aB", "ab"), 0);
}

/* Plain full-matrix edit distance, the oracle for the optimised one. */
static size_t naive_levenshtein(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t *m = calloc((la + 1) * (lb + 1), sizeof(*m));
	size_t d;

	assert_non_null(m);
	for (size_t i = 0; i <= la; i++)
		m[i * (lb + 1)] = i;
	for (size_t j = 0; j <= lb; j++)
		m[j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			char x = a[i - 1], y = b[j - 1];
			size_t best;

			if (x >= 'A' && x <= 'Z')
				x += 'a' - 'A';
			if (y >= 'A' && y <= 'Z')
				y += 'a' - 'A';
			best = m[(i - 1) * (lb + 1) + j - 1] + (x != y);
			if (m[(i - 1) * (lb + 1) + j] + 1 < best)
				best = m[(i - 1) * (lb + 1) + j] + 1;
			if (m[i * (lb + 1) + j - 1] + 1 < best)
				best = m[i * (lb + 1) + j - 1] + 1;
			m[i * (lb + 1) + j] = best;
		}
	}
	d = m[la * (lb + 1) + lb];
	free(m);
	return d;
}

static uint64_t test_rng = 0x9e3779b97f4a7c15ULL;

static uint32_t next_rand(void)
{
	test_rng ^= test_rng << 13;
	test_rng ^= test_rng >> 7;
	test_rng ^= test_rng << 17;
	return (uint32_t)(test_rng >> 16);
}

static void random_string(char *buf, size_t maxlen, const char *alphabet)
{
	size_t len = next_rand() % (maxlen + 1), na = strlen(alphabet);

	for (size_t i = 0; i < len; i++)
		buf[i] = alphabet[next_rand() % na];
	buf[len] = '\0';
}

static void test_policy_levenshtein_matches_oracle(void **state)
{
	char a[32], b[32];

	for (int k = 0; k < 3000; k++) {
		random_string(a, 20, "abAB-1");
		random_string(b, 20, k % 2 ? "abAB-1" : "aA");
		if (rlb_levenshtein(a, b) != naive_levenshtein(a, b))
			fail_msg("lev(\"%s\", \"%s\") = %zu, want %zu", a, b,
				 rlb_levenshtein(a, b),
				 naive_levenshtein(a, b));
	}
}

/* Past RLB_MAX_HOST the row no longer fits on the stack: same answers. */
static void test_policy_levenshtein_long_strings(void **state)
{
	size_t len = RLB_MAX_HOST + 100;
	char *a = malloc(len + 1), *b = malloc(len + 51);

	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < len; i++)
		a[i] = (char)('a' + i % 7);
	a[len] = '\0';
	memcpy(b, a, len + 1);
	assert_int_equal(rlb_levenshtein(a, b), 0);
	b[len / 2] = 'Z';
	assert_int_equal(rlb_levenshtein(a, b), 1);
	/* Different first and last bytes defeat the prefix/suffix strip. */
	b[0] = '#';
	b[len - 1] = '#';
	assert_int_equal(rlb_levenshtein(a, b), naive_levenshtein(a, b));
	memset(b, 'q', len + 50);
	b[len + 50] = '\0';
	assert_int_equal(rlb_levenshtein(a, b), len + 50);
	assert_int_equal(rlb_levenshtein("", b), len + 50);
	assert_int_equal(rlb_prefix_distance(a, b), len);
	free(a);
	free(b);
}

/* ---- precomputed hostname priorities ---- */

struct prio_vector {
	const char *id;
	enum rlb_policy policy;
	const char *local;
	size_t n;
	const char *hosts[5];
	int64_t prio[5];
};

/* clang-format off */
static const struct prio_vector prio_vectors[] = {
	{ "TV01", RLB_POLICY_NEAREST_HOSTNAME, "example01-01-1", 3,
	  { "example01-01-1", "example01-01-2", "example01-02-2" },
	  { 0, 1, 2 } },
	{ "TV02", RLB_POLICY_NEAREST_HOSTNAME, "abc", 2, { "abcdef", "abd" },
	  { 0, 1 } },
	{ "TV03a", RLB_POLICY_NEAREST_HOSTNAME, "HostA", 2,
	  { "hosta", "HostB" }, { 2, 1 } },
	{ "TV03b", RLB_POLICY_LEVENSHTEIN, "HostA", 2, { "hosta", "HostB" },
	  { 0, 1 } },
	{ "TV03c", RLB_POLICY_LCP, "HostA", 2, { "hosta", "HostB" },
	  { 0, -4 } },
	{ "TV04a", RLB_POLICY_LCP, "sfe301", 3,
	  { "sde301", "sfe10101", "sde505" }, { -1, -3, -1 } },
	{ "TV04b", RLB_POLICY_NEAREST_HOSTNAME, "sfe301", 3,
	  { "sde301", "sfe10101", "sde505" }, { 1, 1, 3 } },
	{ "TV04c", RLB_POLICY_LEVENSHTEIN, "sfe301", 3,
	  { "sde301", "sfe10101", "sde505" }, { 1, 3, 3 } },
	{ "TV05", RLB_POLICY_LCP, "sde101", 5,
	  { "sde1010", "sde102", "sde103", "sde1020", "sde1030" },
	  { -6, -5, -5, -5, -5 } },
	{ "TV06", RLB_POLICY_LCS, "et46gtghn.qc.localdomain", 2,
	  { "tr676ddgh.td.localdomain", "ab999.qc.localdomain" },
	  { -12, -15 } },
	{ "TV07a", RLB_POLICY_LCS, "ch1.dc1.example.com", 2,
	  { "ch2.dc1.example.com", "ch1.dc2.example.com" }, { -16, -12 } },
	{ "TV07b", RLB_POLICY_LCP, "ch1.dc1.example.com", 2,
	  { "ch2.dc1.example.com", "ch1.dc2.example.com" }, { -2, -6 } },
	{ "TV07c-nearest", RLB_POLICY_NEAREST_HOSTNAME, "ch1.dc1.example.com",
	  2, { "ch2.dc1.example.com", "ch1.dc2.example.com" }, { 1, 1 } },
	{ "TV07c-lev", RLB_POLICY_LEVENSHTEIN, "ch1.dc1.example.com", 2,
	  { "ch2.dc1.example.com", "ch1.dc2.example.com" }, { 1, 1 } },
	{ "TV08-nearest", RLB_POLICY_NEAREST_HOSTNAME, "web-a1.eu", 3,
	  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { 8, 4, 3 } },
	{ "TV08-lev", RLB_POLICY_LEVENSHTEIN, "web-a1.eu", 3,
	  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { 2, 2, 3 } },
	{ "TV08-lcp", RLB_POLICY_LCP, "web-a1.eu", 3,
	  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { 0, -4, -5 } },
	{ "TV08-lcs", RLB_POLICY_LCS, "web-a1.eu", 3,
	  { "db-a1.eu", "web-b10.eu", "web-a2.us" }, { -7, -3, 0 } },
	{ "TV09-nearest", RLB_POLICY_NEAREST_HOSTNAME,
	  "rhbdp-ch-000449-clickhouse-0-0", 2,
	  { "rhbdp-ch-000449-clickhouse-12-0",
	    "rhbdp-ch-000449-clickhouse-12-1" }, { 3, 3 } },
	{ "TV09-lev", RLB_POLICY_LEVENSHTEIN, "rhbdp-ch-000449-clickhouse-0-0",
	  2, { "rhbdp-ch-000449-clickhouse-12-0",
	       "rhbdp-ch-000449-clickhouse-12-1" }, { 2, 3 } },
	{ "TV10-nearest", RLB_POLICY_NEAREST_HOSTNAME, "", 3,
	  { "a-long-name", "bb", "ccc" }, { 0, 0, 0 } },
	{ "TV10-lev", RLB_POLICY_LEVENSHTEIN, "", 3,
	  { "a-long-name", "bb", "ccc" }, { 11, 2, 3 } },
	{ "TV10-lcp", RLB_POLICY_LCP, "", 3, { "a-long-name", "bb", "ccc" },
	  { 0, 0, 0 } },
	{ "TV10-lcs", RLB_POLICY_LCS, "", 3, { "a-long-name", "bb", "ccc" },
	  { 0, 0, 0 } },
	{ "TV11-nearest", RLB_POLICY_NEAREST_HOSTNAME, "CH-1.example.COM", 2,
	  { "ch-1.example.com", "CH-2.example.COM" }, { 5, 1 } },
	{ "TV11-lev", RLB_POLICY_LEVENSHTEIN, "CH-1.example.COM", 2,
	  { "ch-1.example.com", "CH-2.example.COM" }, { 0, 1 } },
	{ "TV11-lcs", RLB_POLICY_LCS, "CH-1.example.COM", 2,
	  { "ch-1.example.com", "CH-2.example.COM" }, { 0, -12 } },
	{ "TV29", RLB_POLICY_LEVENSHTEIN, "example-clickhouse-0-0", 3,
	  { "ample-clickhouse-0-0", "example-clickhouse-1-10",
	    "example-clickhouse-12-0" }, { 2, 2, 2 } },
	{ "N=1", RLB_POLICY_LCS, "a.example", 1, { "b.example" }, { -8 } },
};
/* clang-format on */

static void test_policy_precompute_vectors(void **state)
{
	for (size_t k = 0; k < ARRAY_SIZE(prio_vectors); k++) {
		const struct prio_vector *v = &prio_vectors[k];
		struct fx *f = fx_cluster_local(rlb_policy_name(v->policy),
						v->n, v->hosts, v->local);
		const struct rlb_cluster *c = f->c;

		/* Made by the snapshot, against the config's local name. */
		assert_non_null(c->view->host_prio);
		for (size_t i = 0; i < v->n; i++) {
			/* The turn must not matter for hostname policies. */
			int64_t got = priority_of(c, i, i * 7 + 3);

			if (c->view->host_prio[i] != v->prio[i] ||
			    got != v->prio[i])
				fail_msg("%s: replica %zu: host_prio %lld, "
					 "priority %lld, want %lld",
					 v->id, i,
					 (long long)c->view->host_prio[i],
					 (long long)got, (long long)v->prio[i]);
		}
		fx_free(f);
	}
}

/* The replica's host string is compared as written: no lowercasing. */
static void test_policy_precompute_host_as_written(void **state)
{
	static const char *const hosts[] = {"Ch-1.Example.com",
					    "ch-1.example.com."};
	struct fx *f = fx_cluster_local("hostname_longest_common_suffix", 2,
					hosts, "ch-1.example.com");

	assert_int_equal(f->c->view->host_prio[0], -10);
	assert_int_equal(f->c->view->host_prio[1], 0);
	fx_free(f);
}

/* With the vector: its range, and the replicas in order of it, ties by
 * index (the classes a healthy selection over many replicas shuffles). */
static void test_policy_precompute_range_and_order(void **state)
{
	static const char *const hosts[] = {"b2", "a1", "c3", "a2", "a9"};
	struct fx *f = fx_cluster_local("nearest_hostname", 5, hosts, "a1");
	const struct rlb_cluster_view *v = f->c->view;
	/* Differing characters from "a1": 2, 0, 2, 1, 1. */
	static const uint32_t want[] = {1, 3, 4, 0, 2};

	assert_int_equal(v->host_prio_min, 0);
	assert_int_equal(v->host_prio_max, 2);
	assert_non_null(v->class_order);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(v->class_order[i], want[i]);
	/* Classes 0 | 1 1 | 2 2. */
	assert_int_equal(v->nclasses, 3);
	assert_int_equal(v->class_ends[0], 1);
	assert_int_equal(v->class_ends[1], 3);
	assert_int_equal(v->class_ends[2], 5);
	fx_free(f);
}

/*
 * A view has what its policy needs and nothing else: hostname priorities
 * for the hostname policies, classes for the static ones; freeing it
 * leaves nothing behind (valgrind checks).
 */
static void test_policy_view_for_every_policy(void **state)
{
	static const char *const hosts[] = {"a1", "a2", "b3"};
	struct fx *f = fx_cluster_local("nearest_hostname", 3, hosts, "a1");
	struct rlb_cluster *c = f->c;
	struct rlb_cluster_view v;

	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		const struct rlb_policy_ops *ops = rlb_policy_ops(p);

		c->s.load_balancing = (enum rlb_policy)p;
		assert_int_equal(rlb_view_build(&v, c, "a1"), 0);
		assert_ptr_equal(v.policy, ops);
		assert_int_equal(v.host_prio != NULL, ops->needs_hostname);
		assert_int_equal(v.class_order != NULL, ops->static_classes);
		assert_non_null(v.fast_v4);
		if (p == RLB_POLICY_LCP) {
			assert_int_equal(v.host_prio[0], -2);
			assert_int_equal(v.host_prio[2], 0);
		}
		rlb_view_free(&v);
		assert_null(v.host_prio);
	}
	c->s.load_balancing = RLB_POLICY_NEAREST_HOSTNAME;
	fx_free(f);
}

/*
 * Without a precomputed vector (a parsed config, not yet a snapshot) a
 * hostname policy degrades to random.
 */
static void test_policy_priority_hostname_without_vector(void **state)
{
	struct fx_spec spec = {.policy = "hostname_levenshtein_distance",
			       .n = 3};
	struct rlb_config *cfg = fx_parse(&spec);

	assert_null(cfg->clusters[0].view);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(priority_of(&cfg->clusters[0], i, 0), 0);
	rlb_config_free(cfg);
}

/* ---- per-selection priorities ---- */

static void test_policy_priority_random_and_in_order(void **state)
{
	struct fx *random_fx = fx_cluster("random", 4, NULL, NULL);
	/* first_offset and the counter do not move in_order. */
	struct fx *in_order_fx = fx_cluster("in_order", 4, NULL,
					    "load_balancing_first_offset = 2;");

	for (size_t i = 0; i < 4; i++)
		assert_int_equal(priority_of(random_fx->c, i, 2), 0);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(priority_of(in_order_fx->c, i, 3), (int64_t)i);
	fx_free(random_fx);
	fx_free(in_order_fx);
}

static void check_first_or_random(size_t n, int64_t offset, size_t first)
{
	char setting[64];
	struct fx *f;

	/* A negative offset only in the model: the config rejects it. */
	snprintf(setting, sizeof(setting),
		 "load_balancing_first_offset = %lldL;",
		 (long long)(offset < 0 ? 0 : offset));
	f = fx_cluster("first_or_random", n, NULL, setting);
	if (offset < 0)
		f->c->s.first_offset = offset;
	for (size_t i = 0; i < n; i++) {
		int64_t got = priority_of(f->c, i, 5);

		if (got != (i == first ? 0 : 1))
			fail_msg("N=%zu offset=%lld: priority(%zu) = %lld", n,
				 (long long)offset, i, (long long)got);
	}
	fx_free(f);
}

/* TV15 (offset 0), TV16 (offset 4 mod 3 = 1) and other offsets >= N. */
static void test_policy_priority_first_or_random(void **state)
{
	check_first_or_random(3, 0, 0);
	check_first_or_random(3, 4, 1);
	check_first_or_random(3, 2, 2);
	check_first_or_random(3, 3, 0);
	check_first_or_random(3, 3000000001LL, 1);
	check_first_or_random(5, INT64_MAX, (size_t)(INT64_MAX % 5));
	check_first_or_random(1, 0, 0);
	check_first_or_random(1, 17, 0);
	/* A negative offset (rejected by the config) still names an index. */
	check_first_or_random(3, -1, 2);
}

static void check_round_robin(size_t n, uint64_t rr_last, const int64_t *want)
{
	struct fx *f = fx_cluster("round_robin", n, NULL, NULL);

	for (size_t i = 0; i < n; i++) {
		int64_t got = priority_of(f->c, i, rr_last);

		if (got != want[i])
			fail_msg("N=%zu L=%llu: priority(%zu) = %lld, want "
				 "%lld",
				 n, (unsigned long long)rr_last, i,
				 (long long)got, (long long)want[i]);
	}
	fx_free(f);
}

/* TV18 (N = 3, L = 0, 1, 2, 0) and TV19 (N = 5, L = 0 and 4). */
static void test_policy_priority_round_robin_vectors(void **state)
{
	static const int64_t tv18[4][3] = {
		{2, 0, 1},
		{1, 2, 0},
		{0, 1, 2},
		{2, 0, 1},
	};
	static const int64_t tv19_l0[5] = {4, 0, 1, 2, 3};
	static const int64_t tv19_l4[5] = {0, 1, 2, 3, 4};
	static const int64_t one[1] = {0};

	for (uint64_t call = 0; call < 4; call++)
		check_round_robin(3, call, tv18[call]);
	check_round_robin(5, 0, tv19_l0);
	check_round_robin(5, 4, tv19_l4);
	/* rr_last is reduced mod N; no overflow at the top of the range. */
	check_round_robin(3, 3, tv18[0]);
	check_round_robin(3, UINT64_MAX, tv18[0]); /* 2^64-1 = 0 mod 3 */
	check_round_robin(5, UINT64_MAX, tv19_l0); /* 0 mod 5 as well */
	check_round_robin(5, UINT64_MAX - 1, tv19_l4);
	check_round_robin(1, 0, one);
	check_round_robin(1, 12345, one);
}

/* For every N and L the priorities are a rotation ending with L. */
static void test_policy_priority_round_robin_rotation(void **state)
{
	for (size_t n = 1; n <= 9; n++) {
		struct fx *f = fx_cluster("round_robin", n, NULL, NULL);

		for (uint64_t l = 0; l < 2 * n; l++) {
			for (size_t i = 0; i < n; i++) {
				int64_t p = priority_of(f->c, i, l);
				size_t best = (l % n + 1) % n;

				assert_in_range(p, 0, n - 1);
				assert_int_equal(p,
						 (int64_t)((i + n - best) % n));
				if (i == l % n)
					assert_int_equal(p, (int64_t)n - 1);
			}
		}
		fx_free(f);
	}
}

/*
 * A batch of the first n replicas gives what the batch of all of them
 * gives for those, with its own range, for every policy.
 */
static void test_policy_priorities_match_one_by_one(void **state)
{
	static const char *const hosts[] = {
		"ch-1.dc1.example.net", "ch-2.dc2.example.net",
		"ch-1.dc2.example.net", "other.example.org", "ch-2.dc1.x"};

	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		for (size_t n = 1; n <= 5; n++) {
			struct fx *f = fx_cluster_local(
				rlb_policy_name((enum rlb_policy)p), n, hosts,
				"ch-2.dc1.example.net");
			int64_t out[5], min, max, lo, hi;

			for (uint64_t l = 0; l < 2 * n + 1; l++) {
				memset(out, 0x5a, sizeof(out));
				rlb_policy_priorities(f->c, l, out, n, &min,
						      &max);
				lo = INT64_MAX;
				hi = INT64_MIN;
				for (size_t i = 0; i < n; i++) {
					assert_int_equal(
						out[i],
						priority_of(f->c, i, l));
					lo = out[i] < lo ? out[i] : lo;
					hi = out[i] > hi ? out[i] : hi;
				}
				/* Its range, too. */
				assert_int_equal(min, lo);
				assert_int_equal(max, hi);
				/* Nothing past n is written. */
				for (size_t i = n; i < 5; i++)
					assert_int_equal(out[i],
							 0x5a5a5a5a5a5a5a5a);
			}
			fx_free(f);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy_names_round_trip),
		cmocka_unit_test(test_policy_parse_rejects_inexact),
		cmocka_unit_test(test_policy_suggest_close_names),
		cmocka_unit_test(test_closest_word_strict_and_loose),
		cmocka_unit_test(test_policy_suggest_nothing_close),
		cmocka_unit_test(test_policy_ops_needs),
		cmocka_unit_test(test_policy_distance_vectors),
		cmocka_unit_test(test_policy_levenshtein_ascii_only_folding),
		cmocka_unit_test(test_policy_levenshtein_matches_oracle),
		cmocka_unit_test(test_policy_levenshtein_long_strings),
		cmocka_unit_test(test_policy_precompute_vectors),
		cmocka_unit_test(test_policy_precompute_host_as_written),
		cmocka_unit_test(test_policy_precompute_range_and_order),
		cmocka_unit_test(test_policy_view_for_every_policy),
		cmocka_unit_test(test_policy_priority_hostname_without_vector),
		cmocka_unit_test(test_policy_priority_random_and_in_order),
		cmocka_unit_test(test_policy_priority_first_or_random),
		cmocka_unit_test(test_policy_priority_round_robin_vectors),
		cmocka_unit_test(test_policy_priority_round_robin_rotation),
		cmocka_unit_test(test_policy_priorities_match_one_by_one),
	};

	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
