/* clock.h - the library's clock moved on through the seam (design.md
 * §10.3), so that a test waits for the library's clock, never sleeps for
 * it. */
#ifndef RLB_TEST_CLOCK_H
#define RLB_TEST_CLOCK_H

#include <stdint.h>

/* Move the clock the library reads (rlb_libc()->now) on by ms. */
void test_clock_advance(int64_t ms);

#endif /* RLB_TEST_CLOCK_H */
