/* bench_errors.c - many processes recording errors and selecting on one
 * shared health state at once, black-box.
 *
 * Forks PROCS children, which start together and each make ATTEMPTS
 * attempts: resolve HOST (getaddrinfo, SOCK_STREAM), connect to the first
 * address, which refuses (nothing listens there), close. With
 * libreplicalb preloaded and HOST a virtual name, every refusal is an
 * error the library records against a replica in the shared state, and
 * every resolution a selection that reads the errors back; scripts/bench
 * then checks with replicalbctl that the state counted every refusal.
 * With HOST an address and no library, the same system calls, for the
 * ratio.
 *
 * Usage: bench_errors [-P PROCS] [-n ATTEMPTS] HOST PORT
 *
 * Prints one line:
 *   procs P attempts A refused R other O seconds S rate PER_SECOND
 * Exit 1 when a child failed or an attempt did other than refuse.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

struct tally {
	long refused; /* connects that failed with ECONNREFUSED */
	long other;   /* lookups or connects that did anything else */
};

static void child(const char *host, const char *port, long attempts,
		  int start_fd, struct tally *t)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	char c;

	/* The start line: EOF once the parent closes its end. */
	while (read(start_fd, &c, 1) < 0 && errno == EINTR)
		;
	for (long i = 0; i < attempts; i++) {
		int fd;

		if (getaddrinfo(host, port, &hints, &res) != 0) {
			t->other++;
			continue;
		}
		fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			t->other++;
		else if (connect(fd, res->ai_addr, res->ai_addrlen) != 0 &&
			 errno == ECONNREFUSED)
			t->refused++;
		else
			t->other++;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	int opt, procs = 16, start[2], bad = 0;
	long attempts = 2000, refused = 0, other = 0;
	struct tally *t;
	double t0, secs;

	while ((opt = getopt(argc, argv, "P:n:h")) != -1) {
		switch (opt) {
		case 'P':
			procs = atoi(optarg);
			break;
		case 'n':
			attempts = atol(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (optind + 2 != argc || procs < 1 || procs > 1024 || attempts < 1)
		goto usage;
	t = mmap(NULL, procs * sizeof(*t), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED || pipe(start) != 0) {
		perror("bench_errors");
		return 1;
	}
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("bench_errors: fork");
			return 1;
		}
		if (pid == 0) {
			close(start[1]);
			child(argv[optind], argv[optind + 1], attempts,
			      start[0], &t[i]);
		}
	}
	close(start[0]);
	t0 = bench_now_ns();
	close(start[1]);
	for (int i = 0; i < procs; i++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	secs = (bench_now_ns() - t0) / 1e9;
	for (int i = 0; i < procs; i++) {
		refused += t[i].refused;
		other += t[i].other;
	}
	printf("procs %d attempts %ld refused %ld other %ld seconds %.3f "
	       "rate %.1f\n",
	       procs, procs * attempts, refused, other, secs,
	       procs * attempts / secs);
	if (bad || other) {
		fprintf(stderr,
			"bench_errors: %d children failed, %ld attempts "
			"did not refuse\n",
			bad, other);
		return 1;
	}
	return 0;
usage:
	fprintf(stderr, "usage: bench_errors [-P PROCS] [-n ATTEMPTS] HOST "
			"PORT\n");
	return 2;
}
