/* policy.c - load-balancing policies as the config knows them: their names
 * (parsing, suggestions) and the pure hostname distances. How each one
 * orders replicas is the engine's (engine/policies.c). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/model.h"

#define RLB_POLICY_NAME(id, name, ops) [RLB_POLICY_##id] = name,
static const char *const policy_names[RLB_POLICY_COUNT] = {
	RLB_POLICY_LIST(RLB_POLICY_NAME)};
#undef RLB_POLICY_NAME

/* Short names people type for the new hostname policies. */
static const struct {
	const char *alias;
	enum rlb_policy p;
} policy_aliases[] = {
	{"lcp", RLB_POLICY_LCP},
	{"lcs", RLB_POLICY_LCS},
	{"leastconn", RLB_POLICY_LEAST_REQUEST}, /* HAProxy's */
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

const char *rlb_closest_word(const char *word,
			     const char *(*cand)(void *ctx, size_t i),
			     void *ctx, size_t n, bool strict)
{
	size_t best_d = SIZE_MAX, len = strlen(word);
	const char *best = NULL, *c;

	for (size_t i = 0; len >= 3 && i < n; i++)
		if ((c = cand(ctx, i)) && strncasecmp(c, word, len) == 0)
			return c;
	for (size_t i = 0; i < n; i++) {
		size_t d;

		if (!(c = cand(ctx, i)))
			continue;
		d = rlb_levenshtein(word, c);
		if (d < best_d && (strict ? d <= 2 && d * 3 <= len
					  : d <= 2 || d * 3 <= len)) {
			best_d = d;
			best = c;
		}
	}
	return best;
}
