/* bench.h - small helpers shared by the benchmark programs: the clock,
 * medians and a parsed "ADDR:PORT". Header-only: every program is linked
 * with libc alone, so the preloaded library is the only replicalb code in
 * the process.
 */
#ifndef RLB_BENCH_H
#define RLB_BENCH_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* CLOCK_MONOTONIC in ns. */
static inline double bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of v[0..n), which it sorts; 0 for n == 0. */
static inline double bench_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The q-quantile (0..1) of v[0..n), sorted already: nearest rank. */
static inline double bench_quantile(const double *v, size_t n, double q)
{
	size_t k;

	if (n == 0)
		return 0;
	k = (size_t)(q * n);
	return v[k >= n ? n - 1 : k];
}

/* "A.B.C.D:PORT" into sa; 0, or -1 when it is not one. */
static inline int bench_parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* A TCP socket listening on sa (SO_REUSEADDR, a backlog of 4096), with
 * TYPE_FLAGS (SOCK_NONBLOCK, SOCK_CLOEXEC) for socket(); -1 and errno on
 * failure. */
static inline int bench_listen(const struct sockaddr_in *sa, int type_flags)
{
	int fd = socket(AF_INET, SOCK_STREAM | type_flags, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 ||
	    listen(fd, 4096) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

#endif
