/* policy.c - load-balancing policies: names, hostname distances, priorities. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static const char *const policy_names[RLB_POLICY_COUNT] = {
	[RLB_POLICY_RANDOM] = "random",
	[RLB_POLICY_NEAREST_HOSTNAME] = "nearest_hostname",
	[RLB_POLICY_LEVENSHTEIN] = "hostname_levenshtein_distance",
	[RLB_POLICY_LCP] = "hostname_longest_common_prefix",
	[RLB_POLICY_LCS] = "hostname_longest_common_suffix",
	[RLB_POLICY_IN_ORDER] = "in_order",
	[RLB_POLICY_FIRST_OR_RANDOM] = "first_or_random",
	[RLB_POLICY_ROUND_ROBIN] = "round_robin",
};

/* Short names people type for the new hostname policies. */
static const struct {
	const char *alias;
	enum rlb_policy p;
} policy_aliases[] = {
	{"lcp", RLB_POLICY_LCP},
	{"lcs", RLB_POLICY_LCS},
	{"levenshtein", RLB_POLICY_LEVENSHTEIN},
};

const char *rlb_policy_name(enum rlb_policy p)
{
	if ((unsigned)p >= RLB_POLICY_COUNT)
		return "?";
	return policy_names[p];
}

int rlb_policy_parse(const char *name, enum rlb_policy *out)
{
	if (!name)
		return -1;
	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		if (strcmp(name, policy_names[p]) == 0) {
			*out = (enum rlb_policy)p;
			return 0;
		}
	}
	return -1;
}

static inline unsigned char fold(unsigned char ch)
{
	return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

/*
 * Lowercase copy of s without separators ('_', '-', '.', ' '), so that
 * "Round-Robin" and "roundrobin" meet "round_robin". False when s does
 * not fit.
 */
static bool squash(const char *s, char *dst, size_t len)
{
	size_t n = 0;

	for (; *s; s++) {
		if (*s == '_' || *s == '-' || *s == '.' || *s == ' ')
			continue;
		if (n + 1 >= len)
			return false;
		dst[n++] = (char)fold((unsigned char)*s);
	}
	dst[n] = '\0';
	return true;
}

/*
 * A suggestion is "close" when it matches after squashing, is an alias,
 * has the squashed input as a prefix or (4+ bytes) as a substring, or is
 * within a small edit distance that grows with the name's length.
 */
const char *rlb_policy_suggest(const char *name)
{
	char want[64], have[64];
	size_t wlen, best_d = SIZE_MAX;
	int prefix = -1, substr = -1, best = -1;

	if (!name || !*name || !squash(name, want, sizeof(want)) || !*want)
		return NULL;
	wlen = strlen(want);
	for (size_t k = 0; k < sizeof(policy_aliases) / sizeof(*policy_aliases);
	     k++) {
		if (strcmp(want, policy_aliases[k].alias) == 0)
			return policy_names[policy_aliases[k].p];
	}
	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		squash(policy_names[p], have, sizeof(have));
		if (strcmp(want, have) == 0)
			return policy_names[p];
		if (prefix < 0 && wlen >= 3 && strncmp(have, want, wlen) == 0)
			prefix = p;
		if (substr < 0 && wlen >= 4 && strstr(have, want))
			substr = p;
	}
	if (prefix >= 0)
		return policy_names[prefix];
	if (substr >= 0)
		return policy_names[substr];

	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		size_t plen = strlen(policy_names[p]);
		size_t limit = 1 + plen / 4;
		size_t nlen = strlen(name);
		size_t d;

		/* The length difference alone already exceeds the limit. */
		if ((nlen > plen ? nlen - plen : plen - nlen) > limit)
			continue;
		d = rlb_levenshtein(name, policy_names[p]);
		if (d <= limit && d < best_d) {
			best_d = d;
			best = p;
		}
	}
	return best >= 0 ? policy_names[best] : NULL;
}

bool rlb_policy_uses_hostname(enum rlb_policy p)
{
	switch (p) {
	case RLB_POLICY_NEAREST_HOSTNAME:
	case RLB_POLICY_LEVENSHTEIN:
	case RLB_POLICY_LCP:
	case RLB_POLICY_LCS:
		return true;
	default:
		return false;
	}
}

bool rlb_policy_uses_counter(enum rlb_policy p)
{
	return p == RLB_POLICY_ROUND_ROBIN;
}

size_t rlb_prefix_distance(const char *a, const char *b)
{
	size_t d = 0;

	for (; *a && *b; a++, b++)
		d += *a != *b;
	return d;
}

/*
 * Two-row-in-one dynamic programme over the shorter string, after
 * stripping the common (folded) prefix and suffix, which never change the
 * distance. Strings up to RLB_MAX_HOST bytes use a stack row; a longer
 * shorter string needs malloc, and if that fails the result is the upper
 * bound max(len a, len b) rather than a crash.
 */
size_t rlb_levenshtein(const char *a, const char *b)
{
	size_t stack_row[RLB_MAX_HOST + 1];
	size_t *row = stack_row;
	size_t la, lb, d;

	while (*a && *b && fold(*a) == fold(*b)) {
		a++;
		b++;
	}
	la = strlen(a);
	lb = strlen(b);
	while (la && lb && fold(a[la - 1]) == fold(b[lb - 1])) {
		la--;
		lb--;
	}
	if (la < lb) {
		const char *t = a;
		size_t tl = la;

		a = b;
		la = lb;
		b = t;
		lb = tl;
	}
	if (lb == 0)
		return la;
	if (lb > RLB_MAX_HOST) {
		row = malloc((lb + 1) * sizeof(*row));
		if (!row)
			return la;
	}
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		unsigned char ca = fold(a[i - 1]);
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t v = diag + (ca != fold(b[j - 1]));

			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			diag = up;
			row[j] = v;
		}
	}
	d = row[lb];
	if (row != stack_row)
		free(row);
	return d;
}

size_t rlb_common_prefix(const char *a, const char *b)
{
	size_t n = 0;

	while (a[n] && a[n] == b[n])
		n++;
	return n;
}

size_t rlb_common_suffix(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = 0;

	while (n < la && n < lb && a[la - 1 - n] == b[lb - 1 - n])
		n++;
	return n;
}

static int64_t host_priority(enum rlb_policy p, const char *local,
			     const char *host)
{
	switch (p) {
	case RLB_POLICY_NEAREST_HOSTNAME:
		return (int64_t)rlb_prefix_distance(local, host);
	case RLB_POLICY_LEVENSHTEIN:
		return (int64_t)rlb_levenshtein(local, host);
	case RLB_POLICY_LCP:
		return -(int64_t)rlb_common_prefix(local, host);
	case RLB_POLICY_LCS:
		return -(int64_t)rlb_common_suffix(local, host);
	default:
		return 0;
	}
}

/* A replica's hostname priority and index, sorted by both. */
struct prio_index {
	int64_t prio;
	uint32_t index;
};

static int by_prio_then_index(const void *a, const void *b)
{
	const struct prio_index *x = a, *y = b;

	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * The replicas by their policy priority, ties by index, and where each
 * class of equal priority ends: c->class_order and c->class_ends. For
 * every policy but round_robin, whose priorities turn every selection.
 */
static int precompute_classes(struct rlb_cluster *c)
{
	size_t n = c->nreplicas;
	struct prio_index *pi = malloc(n * sizeof(*pi));

	c->class_order = malloc(n * sizeof(*c->class_order));
	c->class_ends = malloc(n * sizeof(*c->class_ends));
	c->nclasses = 0;
	if (!pi || !c->class_order || !c->class_ends) {
		free(pi);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		pi[i].prio = rlb_policy_priority(c, i, 0);
		pi[i].index = (uint32_t)i;
	}
	qsort(pi, n, sizeof(*pi), by_prio_then_index);
	for (size_t k = 0; k < n; k++) {
		c->class_order[k] = pi[k].index;
		if (k + 1 == n || pi[k + 1].prio != pi[k].prio)
			c->class_ends[c->nclasses++] = (uint32_t)(k + 1);
	}
	free(pi);
	return 0;
}

int rlb_policy_precompute(struct rlb_cluster *c, const char *local)
{
	int64_t *prio;

	free(c->host_prio);
	c->host_prio = NULL;
	free(c->class_order);
	c->class_order = NULL;
	free(c->class_ends);
	c->class_ends = NULL;
	c->nclasses = 0;
	if (c->nreplicas == 0)
		return 0;
	if (rlb_policy_uses_hostname(c->s.load_balancing)) {
		prio = malloc(c->nreplicas * sizeof(*prio));
		if (!prio)
			return -ENOMEM;
		if (!local)
			local = "";
		c->host_prio_min = INT64_MAX;
		c->host_prio_max = INT64_MIN;
		for (size_t i = 0; i < c->nreplicas; i++) {
			const char *host = c->replicas[i].host;

			prio[i] = host_priority(c->s.load_balancing, local,
						host ? host : "");
			if (prio[i] < c->host_prio_min)
				c->host_prio_min = prio[i];
			if (prio[i] > c->host_prio_max)
				c->host_prio_max = prio[i];
		}
		c->host_prio = prio;
	}
	if (!rlb_policy_uses_counter(c->s.load_balancing) &&
	    precompute_classes(c) < 0) {
		free(c->class_order);
		c->class_order = NULL;
		free(c->class_ends);
		c->class_ends = NULL;
		return -ENOMEM;
	}
	return 0;
}

size_t rlb_policy_first_index(const struct rlb_cluster *c)
{
	int64_t n = (int64_t)c->nreplicas, off = c->s.first_offset;

	if (n <= 0)
		return 0;
	/* Mathematical modulo: the config rejects negative offsets, but
	 * one that slips through still names a valid index. */
	if (off < 0 || off >= n) {
		off %= n;
		if (off < 0)
			off += n;
	}
	return (size_t)off;
}

int64_t rlb_policy_priority(const struct rlb_cluster *c, size_t i,
			    uint64_t rr_last)
{
	uint64_t n = c->nreplicas;
	uint64_t k, l, v;

	if (n == 0)
		return 0;
	/* Called once per replica per selection: divide only when needed. */
	k = i < n ? i : i % n;
	switch (c->s.load_balancing) {
	case RLB_POLICY_NEAREST_HOSTNAME:
	case RLB_POLICY_LEVENSHTEIN:
	case RLB_POLICY_LCP:
	case RLB_POLICY_LCS:
		return c->host_prio ? c->host_prio[k] : 0;
	case RLB_POLICY_IN_ORDER:
		return (int64_t)i;
	case RLB_POLICY_FIRST_OR_RANDOM:
		return k == rlb_policy_first_index(c) ? 0 : 1;
	case RLB_POLICY_ROUND_ROBIN:
		/* (i - L - 1) mod N, unsigned: k + N - 1 - L is in [0, 2N). */
		l = rr_last < n ? rr_last : rr_last % n;
		v = k + n - 1 - l;
		return (int64_t)(v >= n ? v - n : v);
	default:
		return 0;
	}
}

/* The smallest and largest of v[0..n) into *min and *max. */
static void range_of(const int64_t *v, size_t n, int64_t *min, int64_t *max)
{
	*min = INT64_MAX;
	*max = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		*min = v[i] < *min ? v[i] : *min;
		*max = v[i] > *max ? v[i] : *max;
	}
}

void rlb_policy_priorities(const struct rlb_cluster *c, uint64_t rr_last,
			   int64_t *out, size_t n, int64_t *min, int64_t *max)
{
	uint64_t nr = c->nreplicas, l;

	if (n > nr)
		n = nr;
	*min = *max = 0;
	if (n == 0)
		return;
	/* The ranges come from the sources, not from out[]: read back so
	 * soon after its stores, it would cost more than it computes. */
	switch (c->s.load_balancing) {
	case RLB_POLICY_RANDOM:
		memset(out, 0, n * sizeof(*out));
		return;
	case RLB_POLICY_IN_ORDER:
		for (size_t i = 0; i < n; i++)
			out[i] = (int64_t)i;
		*max = (int64_t)n - 1;
		return;
	case RLB_POLICY_ROUND_ROBIN:
		/* (i - L - 1) mod N: N - 1 - L for i = 0, then up by one,
		 * wrapping to 0 after N - 1. */
		l = rr_last < nr ? rr_last : rr_last % nr;
		for (size_t i = 0; i < n; i++) {
			uint64_t v = i + nr - 1 - l;

			out[i] = (int64_t)(v >= nr ? v - nr : v);
		}
		/* All of them: a permutation of 0 .. N - 1. */
		if (n == nr)
			*max = (int64_t)n - 1;
		else
			range_of(out, n, min, max);
		return;
	case RLB_POLICY_NEAREST_HOSTNAME:
	case RLB_POLICY_LEVENSHTEIN:
	case RLB_POLICY_LCP:
	case RLB_POLICY_LCS:
		if (!c->host_prio) {
			memset(out, 0, n * sizeof(*out));
			return;
		}
		memcpy(out, c->host_prio, n * sizeof(*out));
		if (n == nr) {
			*min = c->host_prio_min;
			*max = c->host_prio_max;
		} else {
			range_of(c->host_prio, n, min, max);
		}
		return;
	case RLB_POLICY_FIRST_OR_RANDOM: {
		/* 0 for replica[offset mod N], 1 for the others. */
		size_t off = rlb_policy_first_index(c);

		for (size_t i = 0; i < n; i++)
			out[i] = i != off;
		*min = off < n ? 0 : 1;
		*max = n > 1 || off >= n ? 1 : 0;
		return;
	}
	default:
		for (size_t i = 0; i < n; i++)
			out[i] = rlb_policy_priority(c, i, rr_last);
		range_of(out, n, min, max);
		return;
	}
}
