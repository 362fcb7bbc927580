/* clock.c - see clock.h. */
#include "config.h"

#include <stdatomic.h>
#include <time.h>

#include "base/base.h"
#include "clock.h"

/* The real clock, and how far the library's is moved on. */
static int (*clock_real)(clockid_t clock, struct timespec *ts);
/* Atomic: the library's own threads read the clock too. */
static _Atomic int64_t clock_shift_ms;

static int shifted_now(clockid_t clock, struct timespec *ts)
{
	int rc = clock_real(clock, ts);
	int64_t shift = atomic_load(&clock_shift_ms);
	int64_t ns = ts->tv_nsec + shift % 1000 * 1000000;

	ts->tv_sec += shift / 1000 + ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	return rc;
}

void test_clock_advance(int64_t ms)
{
	if (!clock_real) {
		clock_real = rlb_libc()->now;
		rlb_libc()->now = shifted_now;
	}
	clock_shift_ms += ms;
}
