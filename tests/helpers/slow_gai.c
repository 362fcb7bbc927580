/* slow_gai.c - an LD_PRELOAD shim for tests: getaddrinfo() of the one name
 * $SLOW_GAI_NAME takes $SLOW_GAI_MS milliseconds and answers as for
 * $SLOW_GAI_ADDR (default 127.0.0.1); every other name goes to the real
 * getaddrinfo at once. So a test has one slow lookup that never leaves
 * the host (tests/integration/probe.sh). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef int gai_fn(const char *, const char *, const struct addrinfo *,
		   struct addrinfo **);

__attribute__((visibility("default"))) int
getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
	    struct addrinfo **res)
{
	gai_fn *real = (gai_fn *)dlsym(RTLD_NEXT, "getaddrinfo");
	const char *name = getenv("SLOW_GAI_NAME");

	if (!real)
		return EAI_SYSTEM;
	if (node && name && strcasecmp(node, name) == 0) {
		const char *ms = getenv("SLOW_GAI_MS");
		const char *addr = getenv("SLOW_GAI_ADDR");
		long n = ms ? strtol(ms, NULL, 10) : 1000;
		struct timespec ts = {n / 1000, n % 1000 * 1000000L};

		while (nanosleep(&ts, &ts) != 0)
			;
		node = addr ? addr : "127.0.0.1";
	}
	return real(node, service, hints, res);
}
