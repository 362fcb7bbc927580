/* util.c - small helpers shared by every module: environment, hashing,
 * random numbers, clocks, diagnostics. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/base.h"

uint64_t rlb_hash64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	/* 0 and 1 mark empty and dropped slots in health files. */
	return h < 2 ? h + 2 : h;
}

/*
 * Forks bump the generation so that each thread of the child reseeds on
 * its next draw: otherwise pre-fork workers would share one sequence.
 */
static atomic_uint fork_generation;
static RLB_TLS uint64_t rng_state;
static RLB_TLS unsigned rng_generation;
/* Set by tests (rlb_random_set_source); NULL in the library. */
static RLB_TLS uint32_t (*rng_source)(void *arg);
static RLB_TLS void *rng_source_arg;

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(unsigned generation)
{
	uint64_t seed = 0;
	struct timespec ts;
	int saved = errno;

	if (rlb_libc()->getrandom(&seed, sizeof(seed), GRND_NONBLOCK) !=
	    sizeof(seed))
		seed = 0;
	if (rlb_libc()->now(CLOCK_MONOTONIC, &ts) == 0)
		seed ^= (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec;
	seed ^= (uint64_t)rlb_libc()->getpid() << 32;
	seed ^= (uint64_t)(uintptr_t)&rng_state;
	rng_state = splitmix64(&seed);
	rng_generation = generation;
	errno = saved;
}

/*
 * splitmix64's high half: a counter and a mix, so that the draws of a
 * batch do not wait on each other as a shift register's steps do.
 */
static inline uint32_t rng_next(uint64_t *x)
{
	return (uint32_t)(splitmix64(x) >> 32);
}

uint32_t rlb_random_u32(void)
{
	unsigned gen =
		atomic_load_explicit(&fork_generation, memory_order_relaxed) +
		1;

	if (rng_source)
		return rng_source(rng_source_arg);
	if (rng_generation != gen)
		rng_seed(gen);
	return rng_next(&rng_state);
}

void rlb_random_fill(uint32_t *out, size_t n)
{
	unsigned gen =
		atomic_load_explicit(&fork_generation, memory_order_relaxed) +
		1;
	uint64_t x;

	if (rng_source) {
		for (size_t i = 0; i < n; i++)
			out[i] = rng_source(rng_source_arg);
		return;
	}
	if (rng_generation != gen)
		rng_seed(gen);
	x = rng_state;
	for (size_t i = 0; i < n; i++)
		out[i] = rng_next(&x);
	rng_state = x;
}

void rlb_random_set_source(uint32_t (*fn)(void *arg), void *arg)
{
	rng_source = fn;
	rng_source_arg = arg;
}

void rlb_util_after_fork_child(void)
{
	atomic_fetch_add_explicit(&fork_generation, 1, memory_order_relaxed);
}

/*
 * Coarse clocks: a few ns, and whole seconds or ms is all we need. A clock
 * that cannot be read (the seam failing) gives the latest reading: time
 * stands still rather than jumping to 0, where every deadline computed
 * from it would lie decades ahead. Kept only when it moves, so that the
 * threads reading it share a cache line that rarely changes.
 */
static _Atomic int64_t last_now, last_monotonic_ms;

/* Inlined into each caller, so that unit_ns is a constant: the divisions
 * are then multiplications (an idiv each was half the cost of a read). */
static inline __attribute__((always_inline)) int64_t
clock_read(clockid_t clock, _Atomic int64_t *last, int64_t unit_ns)
{
	struct timespec ts;
	int64_t v, prev;
	int saved = errno;

	if (rlb_libc()->now(clock, &ts) != 0) {
		errno = saved;
		return atomic_load_explicit(last, memory_order_relaxed);
	}
	v = (int64_t)ts.tv_sec * (1000000000 / unit_ns) + ts.tv_nsec / unit_ns;
	prev = atomic_load_explicit(last, memory_order_relaxed);
	if (v != prev)
		atomic_store_explicit(last, v, memory_order_relaxed);
	return v;
}

int64_t rlb_now(void)
{
	return clock_read(CLOCK_REALTIME_COARSE, &last_now, 1000000000);
}

int64_t rlb_monotonic_ms(void)
{
	return clock_read(CLOCK_MONOTONIC_COARSE, &last_monotonic_ms, 1000000);
}

/* This thread's operation clock (INT64_MIN: none). */
static RLB_TLS int64_t op_ms = INT64_MIN;
/*
 * The wall clock minus the monotonic one, in ms, as last measured, and
 * the monotonic time of the next measurement. Threads that measure at
 * once store offsets a tick apart at most: either will do.
 */
static _Atomic int64_t wall_offset_ms, wall_offset_due_ms = INT64_MIN;
static _Atomic int64_t last_wall_ms; /* clock_read()'s fallback */
#define WALL_OFFSET_TTL_MS 1000

void rlb_op_clock_begin(int64_t mono_ms)
{
	op_ms = mono_ms;
}

void rlb_op_clock_end(void)
{
	op_ms = INT64_MIN;
}

int64_t rlb_op_monotonic_ms(void)
{
	return op_ms != INT64_MIN ? op_ms : rlb_monotonic_ms();
}

int64_t rlb_op_now(void)
{
	int64_t mono = op_ms, off, sum;

	if (mono == INT64_MIN)
		return rlb_now();
	if (mono >=
	    atomic_load_explicit(&wall_offset_due_ms, memory_order_acquire)) {
		/* Both clocks read now, one after the other: the offset is
		 * true to a tick. */
		off = clock_read(CLOCK_REALTIME_COARSE, &last_wall_ms,
				 1000000) -
		      rlb_monotonic_ms();
		atomic_store_explicit(&wall_offset_ms, off,
				      memory_order_relaxed);
		atomic_store_explicit(&wall_offset_due_ms,
				      mono + WALL_OFFSET_TTL_MS,
				      memory_order_release);
	} else {
		off = atomic_load_explicit(&wall_offset_ms,
					   memory_order_relaxed);
	}
	/* Whole seconds, rounded down as time(NULL) is. */
	sum = mono + off;
	return sum / 1000 - (sum % 1000 < 0);
}

/* Scratch buffers cached by this thread (rlb_scratch_take()). */
#define SCRATCH_SLOTS 2
static RLB_TLS struct scratch {
	void *p;
	size_t len;
} scratch[SCRATCH_SLOTS];
static RLB_TLS bool scratch_registered; /* the key's destructor will run */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;

static void scratch_free(void *unused)
{
	(void)unused;
	for (size_t k = 0; k < SCRATCH_SLOTS; k++) {
		free(scratch[k].p);
		scratch[k].p = NULL;
		scratch[k].len = 0;
	}
	scratch_registered = false;
}

static void scratch_init(void)
{
	scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

void *rlb_scratch_take(size_t len, size_t *cap)
{
	size_t best = SCRATCH_SLOTS;
	void *p;

	/* The smallest that will do, so that the larger one stays for a
	 * larger taker of the same call. */
	for (size_t k = 0; k < SCRATCH_SLOTS; k++)
		if (scratch[k].p && scratch[k].len >= len &&
		    (best == SCRATCH_SLOTS ||
		     scratch[k].len < scratch[best].len))
			best = k;
	if (best == SCRATCH_SLOTS) {
		*cap = len ? len : 1;
		return malloc(*cap);
	}
	p = scratch[best].p;
	*cap = scratch[best].len;
	scratch[best].p = NULL;
	scratch[best].len = 0;
	return p;
}

void rlb_scratch_put(void *p, size_t cap)
{
	size_t k, small = 0;

	if (!p)
		return;
	if (!scratch_registered) {
		pthread_once(&scratch_once, scratch_init);
		/* Without the key, nothing would free the cache at exit. */
		if (!scratch_key_ok ||
		    pthread_setspecific(scratch_key, scratch) != 0) {
			free(p);
			return;
		}
		scratch_registered = true;
	}
	for (k = 0; k < SCRATCH_SLOTS; k++) {
		if (!scratch[k].p)
			break;
		if (scratch[k].len < scratch[small].len)
			small = k;
	}
	if (k == SCRATCH_SLOTS) {
		if (scratch[small].len >= cap) {
			free(p);
			return;
		}
		k = small;
		free(scratch[k].p);
	}
	scratch[k].p = p;
	scratch[k].len = cap;
}

void rlb_ascii_lower(char *dst, const char *src, size_t dstlen)
{
	size_t i;

	if (dstlen == 0)
		return;
	for (i = 0; i + 1 < dstlen && src[i]; i++) {
		char ch = src[i];

		dst[i] = ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
	}
	dst[i] = '\0';
}

void rlb_diag_add(struct rlb_diag *d, const char *fmt, ...)
{
	char **grown;
	char *msg;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return;
	grown = realloc(d->msgs, (d->n + 1) * sizeof(*grown));
	if (!grown) {
		free(msg);
		return;
	}
	d->msgs = grown;
	d->msgs[d->n++] = msg;
}

void rlb_diag_free(struct rlb_diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->msgs[i]);
	free(d->msgs);
	d->msgs = NULL;
	d->n = 0;
}

void rlb_local_fqdn(char *buf, size_t len)
{
	struct addrinfo hints = {0}, *res = NULL;
	char host[RLB_MAX_HOST + 1] = "";
	int saved = errno;

	if (rlb_libc()->gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	snprintf(buf, len, "%s", host);
	hints.ai_flags = AI_CANONNAME | AI_ADDRCONFIG;
	hints.ai_family = AF_UNSPEC;
	/* The real resolver: never our own getaddrinfo hook. */
	if (host[0] && rlb_libc()->getaddrinfo(host, NULL, &hints, &res) == 0) {
		if (res && res->ai_canonname && res->ai_canonname[0])
			snprintf(buf, len, "%s", res->ai_canonname);
		rlb_libc()->freeaddrinfo(res);
	}
	errno = saved;
}

bool rlb_errno_counts(int err)
{
	switch (err) {
	case ECONNREFUSED:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case ECONNRESET:
		return true;
	default:
		return false;
	}
}

int rlb_cancel_off(void)
{
	int old = PTHREAD_CANCEL_ENABLE;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

void rlb_cancel_restore(int old)
{
	pthread_setcancelstate(old, NULL);
}
