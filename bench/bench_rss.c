/* bench_rss.c - the resident memory of a small program that resolves one
 * name once.
 *
 * Resolves NAME (getaddrinfo, SOCK_STREAM, port 9000), frees the answer
 * and prints its VmRSS from /proc/self/status, in kB. scripts/bench runs
 * it with libreplicalb preloaded (NAME virtual, a 3-replica config) and
 * without it (NAME "127.0.0.1", which glibc resolves without NSS), and
 * takes the difference: the memory the library adds to a process.
 *
 * Usage: bench_rss NAME
 */
#include "config.h"

#include <netdb.h>
#include <sys/socket.h>

#include "bench.h"

int main(int argc, char **argv)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	char line[256];
	FILE *f;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: bench_rss NAME\n");
		return 2;
	}
	rc = getaddrinfo(argv[1], "9000", &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "bench_rss: getaddrinfo(%s): %s\n", argv[1],
			gai_strerror(rc));
		return 1;
	}
	freeaddrinfo(res);
	f = fopen("/proc/self/status", "r");
	if (!f) {
		perror("bench_rss: /proc/self/status");
		return 1;
	}
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6)) {
			printf("%ld\n", strtol(line + 6, NULL, 10));
			fclose(f);
			return 0;
		}
	fclose(f);
	fprintf(stderr, "bench_rss: no VmRSS in /proc/self/status\n");
	return 1;
}
