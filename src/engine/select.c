/* select.c - one selection: the ordering key of design.md §3 and its sort. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* Keys for up to this many replicas live on the stack. */
#define STACK_KEYS 64
/* Ranges up to this size are insertion sorted. */
#define SMALL_RANGE 16
/* Above this many keys, sort packed integer keys by radix instead. */
#define RADIX_MIN 64
/* Bits of the random tiebreak in a packed key. */
#define RANDOM_BITS 32
/* Draws taken from the generator at a time. */
#define RANDOM_BATCH 64
/* From this many packed keys, sort_packed() buckets by the top bits
 * first, into at most 2^MSD_MAX_BITS buckets. */
#define MSD_MIN	     (SMALL_RANGE + 1)
#define MSD_MAX_BITS 10

size_t rlb_selection_size(size_t n)
{
	size_t per = 3 * sizeof(uint64_t) + sizeof(int64_t) + sizeof(uint32_t);

	if (n > (SIZE_MAX - sizeof(struct rlb_selection)) / per)
		return 0;
	return sizeof(struct rlb_selection) + n * per;
}

struct rlb_selection *rlb_selection_at(void *mem, size_t n)
{
	struct rlb_selection *sel = mem;

	/* 8-byte arrays first so that every array is naturally aligned. */
	sel->n = n;
	sel->errors = (uint64_t *)(sel + 1);
	sel->slowdowns = sel->errors + n;
	sel->policy_prio = (int64_t *)(sel->slowdowns + n);
	sel->in_flight = (uint64_t *)(sel->policy_prio + n);
	sel->order = (uint32_t *)(sel->in_flight + n);
	return sel;
}

struct rlb_selection *rlb_selection_new(size_t n)
{
	size_t len = rlb_selection_size(n);
	void *mem = len ? malloc(len) : NULL;

	return mem ? rlb_selection_at(mem, n) : NULL;
}

static inline bool key_less(const struct rlb_select_key *a,
			    const struct rlb_select_key *b)
{
	if (a->errors != b->errors)
		return a->errors < b->errors;
	if (a->slowdowns != b->slowdowns)
		return a->slowdowns < b->slowdowns;
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (a->policy_prio != b->policy_prio)
		return a->policy_prio < b->policy_prio;
	if (a->random != b->random)
		return a->random < b->random;
	return a->index < b->index;
}

static inline void key_swap(struct rlb_select_key *a, struct rlb_select_key *b)
{
	struct rlb_select_key t = *a;

	*a = *b;
	*b = t;
}

static void insertion_sort(struct rlb_select_key *k, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct rlb_select_key v = k[i];
		size_t j = i;

		while (j > 0 && key_less(&v, &k[j - 1])) {
			k[j] = k[j - 1];
			j--;
		}
		k[j] = v;
	}
}

static void sift_down(struct rlb_select_key *k, size_t root, size_t n)
{
	for (;;) {
		size_t child = 2 * root + 1;

		if (child >= n)
			return;
		if (child + 1 < n && key_less(&k[child], &k[child + 1]))
			child++;
		if (!key_less(&k[root], &k[child]))
			return;
		key_swap(&k[root], &k[child]);
		root = child;
	}
}

static void heap_sort(struct rlb_select_key *k, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(k, i, n);
	for (size_t end = n; end-- > 1;) {
		key_swap(&k[0], &k[end]);
		sift_down(k, 0, end);
	}
}

/*
 * Hoare partition of k[lo..hi] (inclusive) around the median of three;
 * returns p with lo <= p < hi such that k[lo..p] <= k[p+1..hi].
 */
static size_t partition(struct rlb_select_key *k, size_t lo, size_t hi)
{
	size_t mid = lo + (hi - lo) / 2;
	struct rlb_select_key pivot;
	size_t i = lo, j = hi;

	if (key_less(&k[mid], &k[lo]))
		key_swap(&k[mid], &k[lo]);
	if (key_less(&k[hi], &k[mid])) {
		key_swap(&k[hi], &k[mid]);
		if (key_less(&k[mid], &k[lo]))
			key_swap(&k[mid], &k[lo]);
	}
	pivot = k[mid];
	/* k[lo] <= pivot <= k[hi] act as sentinels for both scans. */
	for (;;) {
		do
			i++;
		while (key_less(&k[i], &pivot));
		do
			j--;
		while (key_less(&pivot, &k[j]));
		if (i >= j)
			return j;
		key_swap(&k[i], &k[j]);
	}
}

/*
 * Introsort without recursion: quicksort that always continues with the
 * smaller side (so the explicit stack stays below log2 n), heapsort for a
 * range that goes too deep, insertion sort for small ranges.
 */
static void intro_sort(struct rlb_select_key *keys, size_t n)
{
	struct {
		size_t lo, hi;
		unsigned depth;
	} stack[64];
	size_t top = 0, lo = 0, hi;
	unsigned depth = 0;

	if (n < 2)
		return;
	for (size_t m = n; m > 1; m >>= 1)
		depth += 2;
	hi = n - 1;
	for (;;) {
		size_t len = hi - lo + 1, p;

		if (len <= SMALL_RANGE) {
			insertion_sort(keys + lo, len);
		} else if (depth == 0) {
			heap_sort(keys + lo, len);
		} else {
			depth--;
			p = partition(keys, lo, hi);
			stack[top].depth = depth;
			if (p - lo + 1 < hi - p) {
				stack[top].lo = p + 1;
				stack[top].hi = hi;
				hi = p;
			} else {
				stack[top].lo = lo;
				stack[top].hi = p;
				lo = p + 1;
			}
			top++;
			continue;
		}
		if (top == 0)
			return;
		top--;
		lo = stack[top].lo;
		hi = stack[top].hi;
		depth = stack[top].depth;
	}
}

static unsigned bit_width(uint64_t x)
{
	return x ? 64 - (unsigned)__builtin_clzll(x) : 0;
}

static uint64_t shl(uint64_t v, unsigned w)
{
	return w >= 64 ? 0 : v << w;
}

/*
 * Large key sets: comparison sorts lose most of their time to branch
 * mispredictions there. Instead, each field of the key is reduced to the
 * bits its range spans (for a selection: errors and config priority
 * usually none, the policy a few, random 32), the fields are concatenated
 * in key order into one uint64 with the key's position in the lowest bits,
 * and the integers are LSD radix sorted a byte at a time.
 *
 * Stable LSD radix sort of a[0..n) on bits [lo, hi), a byte per pass;
 * bytes that every key shares are skipped. The keys start in position
 * order and the position fills bits below lo, so those need no pass.
 * b is scratch for n; returns whichever of a and b holds the result.
 */
static uint64_t *radix_u64(uint64_t *a, uint64_t *b, size_t n, unsigned lo,
			   unsigned hi)
{
	for (unsigned shift = lo; shift < hi; shift += 8) {
		uint32_t count[256] = {0}, sum = 0;
		uint64_t *t;

		for (size_t i = 0; i < n; i++)
			count[(a[i] >> shift) & 0xff]++;
		if (count[(a[0] >> shift) & 0xff] == n)
			continue;
		for (size_t d = 0; d < 256; d++) {
			uint32_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			b[count[(a[i] >> shift) & 0xff]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	return a;
}

static void insertion_u64(uint64_t *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		uint64_t v = a[i];
		size_t j = i;

		while (j > 0 && v < a[j - 1]) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = v;
	}
}

/* a[i], a[j] in order, without a branch: the draws make it a coin toss. */
static inline void cswap_u64(uint64_t *a, size_t i, size_t j)
{
	uint64_t x = a[i], y = a[j];

	a[i] = x < y ? x : y;
	a[j] = x < y ? y : x;
}

/* Up to 4 keys (most clusters): a sorting network. */
static void sort4_u64(uint64_t *a, size_t n)
{
	if (n == 2) {
		cswap_u64(a, 0, 1);
	} else if (n == 3) {
		cswap_u64(a, 0, 1);
		cswap_u64(a, 1, 2);
		cswap_u64(a, 0, 1);
	} else if (n == 4) {
		cswap_u64(a, 0, 1);
		cswap_u64(a, 2, 3);
		cswap_u64(a, 0, 2);
		cswap_u64(a, 1, 3);
		cswap_u64(a, 1, 2);
	}
}

/*
 * Sort distinct packed keys a[0..n) whose bits below lo are their
 * position (so already in order) and that have none at or above hi; b is
 * scratch for n. Few keys: a network or insertion sort. Many, over a
 * wide range (the 32 random bits): one pass by the top bits, about one
 * key per bucket, then each bucket on its own (insertion, or the LSD
 * radix of what is left of the bits); else the LSD radix. Returns a or
 * b, the sorted one.
 */
static uint64_t *sort_packed(uint64_t *a, uint64_t *b, size_t n, unsigned lo,
			     unsigned hi)
{
	uint32_t count[(1u << MSD_MAX_BITS) + 1];
	unsigned bits, shift;

	if (n <= 4) {
		sort4_u64(a, n);
		return a;
	}
	if (n <= SMALL_RANGE) {
		insertion_u64(a, n);
		return a;
	}
	if (n < MSD_MIN || hi - lo <= 16)
		return radix_u64(a, b, n, lo, hi);
	bits = bit_width(n);
	bits = bits > MSD_MAX_BITS ? MSD_MAX_BITS : bits;
	shift = hi - bits;
	memset(count, 0, ((1u << bits) + 1) * sizeof(count[0]));
	for (size_t i = 0; i < n; i++)
		count[((a[i] >> shift) & ((1u << bits) - 1)) + 1]++;
	for (size_t d = 1; d <= (1u << bits); d++)
		count[d] += count[d - 1];
	for (size_t i = 0; i < n; i++)
		b[count[(a[i] >> shift) & ((1u << bits) - 1)]++] = a[i];
	/*
	 * count[d] is now where bucket d ends; bucket 0 starts at 0. When
	 * the buckets are small (the draws spread evenly, or a policy's few
	 * priorities above them: nearly always), one insertion pass over
	 * all of b finishes the sort: each key moves within its bucket
	 * only, about len^2 / 4 moves for a bucket of len, and a loop per
	 * bucket would cost a mispredicted branch or two per bucket. The
	 * sum of the squares bounds that work.
	 */
	{
		uint64_t squares = (uint64_t)count[0] * count[0];

		for (size_t d = 1; d < (1u << bits); d++) {
			uint64_t len = count[d] - count[d - 1];

			squares += len * len;
		}
		if (squares <= 16 * (uint64_t)n) {
			insertion_u64(b, n);
			return b;
		}
	}
	for (size_t d = 0, start = 0; d < (1u << bits); d++) {
		size_t end = count[d], len = end - start;

		if (len > SMALL_RANGE) {
			uint64_t *s =
				radix_u64(b + start, a + start, len, lo, shift);

			if (s != b + start)
				memcpy(b + start, s, len * sizeof(*s));
		} else if (len > 1) {
			insertion_u64(b + start, len);
		}
		start = end;
	}
	return b;
}

/*
 * sort_packed() for keys whose top wtop bits are the fields above the
 * draw (the policy's priority, the counts): those few classes first, by
 * one counting pass when they fit MSD_MAX_BITS, then each class by its
 * draws, which spread evenly. Without it, a policy of a few priorities
 * over many replicas (hostname_longest_common_prefix: most replicas share
 * a prefix length) spends the top bits of sort_packed()'s pass on them
 * and leaves buckets of dozens to the LSD radix.
 */
static uint64_t *sort_classes(uint64_t *a, uint64_t *b, size_t n, unsigned lo,
			      unsigned hi, unsigned wtop)
{
	uint32_t count[(1u << MSD_MAX_BITS) + 1];
	unsigned shift = hi - wtop;

	if (wtop == 0 || wtop > MSD_MAX_BITS || n < MSD_MIN)
		return sort_packed(a, b, n, lo, hi);
	memset(count, 0, ((1u << wtop) + 1) * sizeof(count[0]));
	for (size_t i = 0; i < n; i++)
		count[(a[i] >> shift) + 1]++;
	for (size_t d = 1; d <= (1u << wtop); d++)
		count[d] += count[d - 1];
	for (size_t i = 0; i < n; i++)
		b[count[a[i] >> shift]++] = a[i];
	for (size_t d = 0, start = 0; d < (1u << wtop); d++) {
		size_t end = count[d], len = end - start;

		if (len > 1) {
			uint64_t *s = sort_packed(b + start, a + start, len, lo,
						  shift);

			if (s != b + start)
				memcpy(b + start, s, len * sizeof(*s));
		}
		start = end;
	}
	return b;
}

/* Running minimum and maximum of one key field, offset to unsigned. */
struct range {
	uint64_t min, max;
};

static inline void range_init(struct range *r)
{
	r->min = UINT64_MAX;
	r->max = 0;
}

static inline void range_add(struct range *r, uint64_t v)
{
	r->min = v < r->min ? v : r->min;
	r->max = v > r->max ? v : r->max;
}

static inline unsigned range_bits(const struct range *r)
{
	return bit_width(r->max - r->min);
}

/* Signed to unsigned, preserving order. */
static inline uint64_t ord64(int64_t v)
{
	return (uint64_t)v ^ (UINT64_C(1) << 63);
}

/* Scratch bytes that radix_sort() needs for n keys. */
static size_t radix_scratch(size_t n)
{
	return n * (2 * sizeof(uint64_t) + sizeof(struct rlb_select_key));
}

/*
 * Radix sort of keys. The index field needs bits of its own only when it
 * is not already the position. Returns false, sorting nothing, when the
 * packed key would need more than 64 bits.
 */
static bool radix_sort(struct rlb_select_key *keys, size_t n, void *scratch)
{
	uint64_t *a = scratch, *b = a + n;
	struct rlb_select_key *sorted = (struct rlb_select_key *)(b + n);
	struct range e, d, p, q, r, x;
	bool index_is_pos = true;
	unsigned we, wd, wp, wq, wr, wi, wpos;

	range_init(&e);
	range_init(&d);
	range_init(&p);
	range_init(&q);
	range_init(&r);
	range_init(&x);
	for (size_t i = 0; i < n; i++) {
		range_add(&e, keys[i].errors);
		range_add(&d, keys[i].slowdowns);
		range_add(&p, ord64(keys[i].priority));
		range_add(&q, ord64(keys[i].policy_prio));
		range_add(&r, keys[i].random);
		range_add(&x, keys[i].index);
		index_is_pos &= keys[i].index == i;
	}
	we = range_bits(&e);
	wd = range_bits(&d);
	wp = range_bits(&p);
	wq = range_bits(&q);
	wr = range_bits(&r);
	wi = index_is_pos ? 0 : range_bits(&x);
	wpos = bit_width(n - 1);
	if (we + wd + wp + wq + wr + wi + wpos > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		const struct rlb_select_key *k = &keys[i];
		uint64_t v = k->errors - e.min;

		v = shl(v, wd) | (k->slowdowns - d.min);
		v = shl(v, wp) | (ord64(k->priority) - p.min);
		v = shl(v, wq) | (ord64(k->policy_prio) - q.min);
		v = shl(v, wr) | (k->random - r.min);
		v = shl(v, wi) | (index_is_pos ? 0 : k->index - x.min);
		a[i] = shl(v, wpos) | i;
	}
	a = radix_u64(a, b, n, wpos, we + wd + wp + wq + wr + wi + wpos);
	for (size_t i = 0; i < n; i++)
		sorted[i] = keys[a[i] & (shl(1, wpos) - 1)];
	memcpy(keys, sorted, n * sizeof(*keys));
	return true;
}

void rlb_select_sort(struct rlb_select_key *keys, size_t n)
{
	void *scratch;

	/* Without memory for the radix sort, the comparison sort will do. */
	if (n > RADIX_MIN && n <= UINT32_MAX) {
		scratch = malloc(radix_scratch(n));
		if (scratch && radix_sort(keys, n, scratch)) {
			free(scratch);
			return;
		}
		free(scratch);
	}
	intro_sort(keys, n);
}

/* Replica i's draw of n, from draws[], refilled every RANDOM_BATCH. */
static inline uint32_t draw(uint32_t *draws, size_t i, size_t n)
{
	if (i % RANDOM_BATCH == 0)
		rlb_random_fill(draws,
				n - i < RANDOM_BATCH ? n - i : RANDOM_BATCH);
	return draws[i % RANDOM_BATCH];
}

/* From this many replicas, a healthy selection shuffles (see below). */
#define SHUFFLE_MIN (STACK_KEYS + 1)

/* Shuffle o[0 .. len) (Fisher-Yates, from the last place down). */
static void shuffle(uint32_t *o, size_t len, uint32_t *draws, size_t *at,
		    size_t *avail, size_t *left)
{
	for (size_t k = len; k-- > 1;) {
		uint32_t t;
		size_t j;

		if (*at == *avail) {
			*avail = *left < RANDOM_BATCH ? *left : RANDOM_BATCH;
			rlb_random_fill(draws, *avail);
			*left -= *avail;
			*at = 0;
		}
		/* A place in 0..k: Lemire's multiply (its bias, k / 2^32,
		 * is far below what a test could see). */
		j = (size_t)(((uint64_t)draws[(*at)++] * (k + 1)) >> 32);
		t = o[k];
		o[k] = o[j];
		o[j] = t;
	}
}

/*
 * A healthy selection over many replicas, in linear time: the replicas
 * by class of policy priority, index order within a class (the
 * snapshot's layout; a counting pass for round_robin, whose priorities
 * turn), then each class shuffled: one draw per place but the first of
 * a class. Every order of a tie class is as likely as with a draw per
 * replica and a sort (design.md §3), for a fraction of the work of
 * sorting a thousand draws. qmin and wq: the priorities' range.
 */
static void shuffle_classes(const struct rlb_cluster *c,
			    const struct rlb_cluster_view *v,
			    struct rlb_selection *sel, size_t n, uint64_t qmin,
			    unsigned wq)
{
	uint32_t count[(1u << MSD_MAX_BITS) + 1];
	uint32_t draws[RANDOM_BATCH];
	const uint32_t *ends = count;
	size_t classes = 0, left, at = 0, avail = 0;

	if (v->class_order && n == c->nreplicas) {
		memcpy(sel->order, v->class_order, n * sizeof(*sel->order));
		ends = v->class_ends;
		classes = v->nclasses;
	} else {
		memset(count, 0, ((1u << wq) + 1) * sizeof(count[0]));
		for (size_t i = 0; i < n; i++)
			count[ord64(sel->policy_prio[i]) - qmin + 1]++;
		for (size_t d = 1; d <= (1u << wq); d++)
			count[d] += count[d - 1];
		for (size_t i = 0; i < n; i++)
			sel->order[count[ord64(sel->policy_prio[i]) - qmin]++] =
				(uint32_t)i;
		/* count[d] is now where class d ends. */
		classes = (size_t)1 << wq;
	}
	left = n;
	for (size_t d = 0, start = 0; d < classes; start = ends[d++])
		left -= ends[d] > start;
	for (size_t d = 0, start = 0; d < classes; start = ends[d++])
		shuffle(sel->order + start, ends[d] - start, draws, &at, &avail,
			&left);
}

/*
 * Selection over many replicas: the packed key built straight from the
 * per-replica values already in sel (index = position, so the order is
 * the low bits), into a (2n uint64s). False if it does not fit 64 bits.
 */
static bool select_packed(const struct rlb_cluster *c,
			  const struct rlb_cluster_view *view,
			  struct rlb_selection *sel, size_t n, uint64_t ignored,
			  bool counts_decide, struct range q, uint64_t *a)
{
	struct range e, d, p;
	unsigned we, wd, wp, wq, wpos = bit_width(n - 1), wkey;
	uint64_t *sorted, differ = counts_decide;
	int64_t prio0 = c->replicas[0].priority;
	uint32_t draws[RANDOM_BATCH];

	/*
	 * A healthy cluster (no errors beyond the ignored ones, no
	 * slowdowns, one config priority: nearly every selection) is ordered
	 * by the policy's priority and the draw alone.
	 */
	/* The snapshot knows when they share one (a miss per replica). */
	for (size_t i = 0; i < n && !differ && !view->one_priority; i++)
		differ |= (uint64_t)(c->replicas[i].priority ^ prio0);
	if (!differ) {
		wq = range_bits(&q);
		if (n >= SHUFFLE_MIN && wq <= MSD_MAX_BITS) {
			shuffle_classes(c, view, sel, n, q.min, wq);
			return true;
		}
		if (wq + RANDOM_BITS + wpos > 64)
			return false;
		for (size_t i = 0; i < n; i++) {
			uint64_t v = ord64(sel->policy_prio[i]) - q.min;

			v = v << RANDOM_BITS | draw(draws, i, n);
			a[i] = shl(v, wpos) | i;
		}
		wkey = wq + RANDOM_BITS + wpos;
		goto sort;
	}
	range_init(&e);
	range_init(&d);
	range_init(&p);
	for (size_t i = 0; i < n; i++) {
		uint64_t err = sel->errors[i];

		range_add(&e, err > ignored ? err - ignored : 0);
		range_add(&d, sel->slowdowns[i]);
		range_add(&p, ord64(c->replicas[i].priority));
	}
	we = range_bits(&e);
	wd = range_bits(&d);
	wp = range_bits(&p);
	wq = range_bits(&q);
	if (we + wd + wp + wq + RANDOM_BITS + wpos > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		uint64_t err = sel->errors[i];
		uint64_t v = (err > ignored ? err - ignored : 0) - e.min;

		v = shl(v, wd) | (sel->slowdowns[i] - d.min);
		v = shl(v, wp) | (ord64(c->replicas[i].priority) - p.min);
		v = shl(v, wq) | (ord64(sel->policy_prio[i]) - q.min);
		v = v << RANDOM_BITS | draw(draws, i, n);
		a[i] = shl(v, wpos) | i;
	}
	wkey = we + wd + wp + wq + RANDOM_BITS + wpos;
sort:
	sorted = sort_classes(a, a + n, n, wpos, wkey,
			      wkey - RANDOM_BITS - wpos);
	for (size_t i = 0; i < n; i++)
		sel->order[i] = (uint32_t)(sorted[i] & (shl(1, wpos) - 1));
	return true;
}

/* Ties of a weighted cluster ordered by weight this far into a run. */
#define WEIGHTED_PICKS 64

bool rlb_selection_tied(const struct rlb_cluster *c,
			const struct rlb_selection *sel, uint64_t ignored,
			uint32_t a, uint32_t b)
{
	uint64_t ea = sel->errors[a] > ignored ? sel->errors[a] - ignored : 0;
	uint64_t eb = sel->errors[b] > ignored ? sel->errors[b] - ignored : 0;

	return ea == eb && sel->slowdowns[a] == sel->slowdowns[b] &&
	       c->replicas[a].priority == c->replicas[b].priority &&
	       sel->policy_prio[a] == sel->policy_prio[b];
}

/*
 * RFC 2782's weighted choice, repeated: each place of run o[0 .. n) goes
 * to one of the replicas left with probability weight / sum of theirs.
 * Weight 0 comes after every weighted one (their random order kept).
 * Quadratic, so only the first WEIGHTED_PICKS places are chosen so.
 */
static void weighted_run(const struct rlb_cluster *c, uint32_t *o, size_t n)
{
	for (size_t k = 0; k + 1 < n && k < WEIGHTED_PICKS; k++) {
		uint64_t sum = 0, r, run = 0;
		uint32_t t;
		size_t j;

		for (j = k; j < n; j++)
			sum += c->replicas[o[j]].weight;
		if (sum == 0)
			return;
		r = ((uint64_t)rlb_random_u32() * sum) >> 32;
		for (j = k; j < n; j++) {
			run += c->replicas[o[j]].weight;
			if (run > r)
				break;
		}
		t = o[k];
		o[k] = o[j];
		o[j] = t;
	}
}

/* SRV weights (design.md §15) among ties of sel, once it is sorted. */
static void weighted_ties(const struct rlb_cluster *c,
			  struct rlb_selection *sel, size_t n, uint64_t ignored)
{
	for (size_t lo = 0, hi; lo < n; lo = hi) {
		for (hi = lo + 1; hi < n && rlb_selection_tied(c, sel, ignored,
							       sel->order[lo],
							       sel->order[hi]);
		     hi++)
			;
		if (hi - lo > 1)
			weighted_run(c, sel->order + lo, hi - lo);
	}
}

void rlb_select(struct rlb_cluster *c, bool peek, int64_t now,
		struct rlb_selection *sel)
{
	rlb_select_load(c, peek, now, NULL, sel);
}

/* A parsed config's cluster, not yet a snapshot's: no view. */
static const struct rlb_cluster_view no_view;

void rlb_select_load(struct rlb_cluster *c, bool peek, int64_t now,
		     const uint64_t *in_flight, struct rlb_selection *sel)
{
	/* Room for the keys, or for the packed keys and their scratch. */
	struct rlb_select_key stack_keys[STACK_KEYS];
	struct rlb_select_key *keys = stack_keys;
	size_t n = c->nreplicas < sel->n ? c->nreplicas : sel->n;
	uint64_t ignored, rr_last = 0;
	size_t cap = 0;
	int64_t pmin, pmax;
	struct range q; /* of the policy priorities */
	bool counts_decide;
	const struct rlb_cluster_view *v = c->view ? c->view : &no_view;
	const struct rlb_policy_ops *ops =
		v->policy ? v->policy : rlb_policy_ops(c->s.load_balancing);

	if (n == 0)
		return;
	ignored = c->s.max_ignored_errors > 0
			  ? (uint64_t)c->s.max_ignored_errors
			  : 0;
	counts_decide = !rlb_health_select_counts(c, n, now, peek, sel->errors,
						  sel->slowdowns);
	/* Only the policies that need them pay for the counter's turn and
	 * for the live counts. */
	if (ops->needs_counter)
		rr_last =
			(peek ? rlb_health_rr_peek(c) : rlb_health_rr_next(c)) %
			c->nreplicas;
	if (ops->needs_load && in_flight)
		memcpy(sel->in_flight, in_flight, n * sizeof(*in_flight));
	else if (ops->needs_load)
		rlb_health_in_flight(c, n, sel->in_flight);
	ops->priorities(c, v, rr_last, sel->policy_prio, n, &pmin, &pmax);
	q.min = ord64(pmin);
	q.max = ord64(pmax);
	if (n > STACK_KEYS) {
		keys = n <= UINT32_MAX
			       ? rlb_scratch_take(n * sizeof(*keys), &cap)
			       : NULL;
		if (!keys) {
			/* Out of memory: config order, never a crash. */
			for (size_t i = 0; i < n; i++)
				sel->order[i] = (uint32_t)i;
			goto out_pick;
		}
	}
	_Static_assert(sizeof(struct rlb_select_key) >= 2 * sizeof(uint64_t),
		       "the keys' room holds two packed keys per replica");
	if (select_packed(c, v, sel, n, ignored, counts_decide, q,
			  (uint64_t *)keys))
		goto out_keys;
	for (size_t i = 0; i < n; i++) {
		uint64_t err = sel->errors[i];

		keys[i].errors = err > ignored ? err - ignored : 0;
		keys[i].slowdowns = sel->slowdowns[i];
		keys[i].priority = c->replicas[i].priority;
		keys[i].policy_prio = sel->policy_prio[i];
		keys[i].random = rlb_random_u32();
		keys[i].index = (uint32_t)i;
	}
	intro_sort(keys, n);
	for (size_t i = 0; i < n; i++)
		sel->order[i] = keys[i].index;
out_keys:
	if (keys != stack_keys)
		rlb_scratch_put(keys, cap);
	if (c->weighted)
		weighted_ties(c, sel, n, ignored);
out_pick:
	if (ops->pick)
		ops->pick(c, sel, n, ignored);
}
