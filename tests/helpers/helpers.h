/* helpers.h - what the stress helpers (forkloop.c, cancelgai.c) share:
 * a monotonic clock in ms, a sleep that signals do not cut short, and
 * one resolution of a name through getaddrinfo(). */
#ifndef RLB_TEST_HELPERS_H
#define RLB_TEST_HELPERS_H

#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void sleep_ms(double ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(ms / 1e3);
	ts.tv_nsec = (long)((ms - ts.tv_sec * 1e3) * 1e6);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* getaddrinfo(host, "80") for a stream socket: its return code. */
static inline int resolve(const char *host)
{
	struct addrinfo hints, *res;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, "80", &hints, &res);
	if (rc == 0)
		freeaddrinfo(res);
	return rc;
}

#endif /* RLB_TEST_HELPERS_H */
