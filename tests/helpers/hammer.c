/* hammer.c - thread, fork and exec stress for the preloaded library. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Usage:
 *   hammer [-t THREADS] [-i ITERS] [-f FORK_EVERY] [-x EXEC_EVERY]
 *          [-p PYTHON] NAME PORT
 *   hammer --child ROUNDS NAME PORT
 *
 * Every thread does ITERS rounds. A round resolves NAME (getaddrinfo,
 * SOCK_STREAM), connects to every address of the list in list order
 * (blocking on even rounds; non-blocking with poll() and SO_ERROR on odd
 * ones), closes each socket and frees the list; every 8th round also calls
 * gethostbyname_r(). Threads 0-3 fork a child every FORK_EVERY rounds that
 * does 3 rounds itself (getaddrinfo only, see round_once()); threads 4-5
 * every EXEC_EVERY rounds exec this program in --child mode, /bin/true
 * and, with -p, PYTHON resolving NAME.
 *
 * Prints one line of totals over all threads and children:
 *   rounds=R ok=O refused=F other=X gai_errors=G forks=K execs=E failures=B
 * "refused" is the number of connects that reported ECONNREFUSED, which is
 * what the library must have counted against the refusing replica.
 * Exit status 0 when there were no other errors, no resolver errors and
 * every child exited 0; 1 otherwise; 2 on usage errors.
 */

struct counts {
	unsigned long rounds;	/* resolutions done */
	unsigned long ok;	/* connects that succeeded */
	unsigned long refused;	/* connects that failed with ECONNREFUSED */
	unsigned long other;	/* connects that failed otherwise or hung */
	unsigned long gai;	/* resolver failures */
	unsigned long forks;	/* fork children reaped */
	unsigned long execs;	/* exec children reaped */
	unsigned long failures; /* children that failed or misreported */
};

static const char *name;
static const char *port;
static const char *python;
static int iters = 1000;
static int fork_every = 100;
static int exec_every = 250;

static void add_counts(struct counts *to, const struct counts *from)
{
	to->rounds += from->rounds;
	to->ok += from->ok;
	to->refused += from->refused;
	to->other += from->other;
	to->gai += from->gai;
	to->forks += from->forks;
	to->execs += from->execs;
	to->failures += from->failures;
}

static void classify(int err, struct counts *c)
{
	if (err == 0)
		c->ok++;
	else if (err == ECONNREFUSED)
		c->refused++;
	else
		c->other++;
}

static void connect_one(const struct addrinfo *ai, int nonblock,
			struct counts *c)
{
	int type = ai->ai_socktype | SOCK_CLOEXEC;
	struct pollfd pfd;
	socklen_t len;
	int fd, err;

	if (nonblock)
		type |= SOCK_NONBLOCK;
	fd = socket(ai->ai_family, type, ai->ai_protocol);
	if (fd < 0) {
		c->other++;
		return;
	}
	err = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
	if (nonblock && err == EINPROGRESS) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		len = sizeof(err);
		if (poll(&pfd, 1, 10000) != 1)
			err = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
	}
	classify(err, c);
	close(fd);
}

/*
 * One round. `forked`: we are a fork child of a multithreaded process, so
 * skip gethostbyname_r(), which takes glibc's resolv.conf lock even for an
 * address literal; a thread of the parent may have held it at fork() and
 * the child would wait forever (a glibc limit, not the library's).
 */
static void round_once(int n, int forked, struct counts *c)
{
	struct addrinfo hints, *res, *ai;
	struct hostent he, *hp;
	char buf[4096];
	int rc, herr;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	c->rounds++;
	rc = getaddrinfo(name, port, &hints, &res);
	if (rc != 0) {
		c->gai++;
		return;
	}
	for (ai = res; ai; ai = ai->ai_next)
		connect_one(ai, n & 1, c);
	freeaddrinfo(res);

	if (!forked && n % 8 == 0) {
		hp = NULL;
		rc = gethostbyname_r(name, &he, buf, sizeof(buf), &hp, &herr);
		if (rc != 0 || hp == NULL || hp->h_addr_list[0] == NULL)
			c->gai++;
	}
}

/* Read exactly len bytes unless EOF or an error comes first. */
static size_t read_full(int fd, void *p, size_t len)
{
	size_t got = 0;
	ssize_t r;

	while (got < len) {
		r = read(fd, (char *)p + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static int reap(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A pipe and a child at its other end; -1, counted, if either fails. */
static pid_t fork_with_pipe(int p[2], struct counts *c)
{
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		c->failures++;
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		c->failures++;
	}
	return pid;
}

/* A forked child (no exec) does 3 rounds and sends its counts back. */
static void do_fork(struct counts *c)
{
	struct counts child;
	int p[2], i;
	pid_t pid;
	size_t got;

	pid = fork_with_pipe(p, c);
	if (pid < 0)
		return;
	if (pid == 0) {
		memset(&child, 0, sizeof(child));
		for (i = 0; i < 3; i++)
			round_once(i, 1, &child);
		if (write(p[1], &child, sizeof(child)) != sizeof(child))
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	got = read_full(p[0], &child, sizeof(child));
	close(p[0]);
	if (reap(pid) != 0 || got != sizeof(child)) {
		c->failures++;
		return;
	}
	add_counts(c, &child);
	c->forks++;
}

/* Fork and exec argv; with `parse`, read its stdout as a totals line. */
static void do_exec(char *const argv[], int parse, struct counts *c)
{
	struct counts child;
	char buf[512];
	int p[2], n;
	pid_t pid;
	size_t got;

	pid = fork_with_pipe(p, c);
	if (pid < 0)
		return;
	if (pid == 0) {
		if (dup2(p[1], STDOUT_FILENO) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	got = read_full(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	buf[got] = '\0';
	if (reap(pid) != 0) {
		fprintf(stderr, "hammer: %s failed\n", argv[0]);
		c->failures++;
		return;
	}
	c->execs++;
	if (!parse)
		return;
	memset(&child, 0, sizeof(child));
	n = sscanf(buf,
		   "rounds=%lu ok=%lu refused=%lu other=%lu gai_errors=%lu",
		   &child.rounds, &child.ok, &child.refused, &child.other,
		   &child.gai);
	if (n != 5) {
		fprintf(stderr, "hammer: bad child output: %s\n", buf);
		c->failures++;
		return;
	}
	add_counts(c, &child);
}

struct worker {
	pthread_t tid;
	int index;	 /* thread number, 0 .. nthreads-1 */
	struct counts c; /* this thread's totals */
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct counts *c = &w->c;
	int t = w->index;
	char *self[] = {"/proc/self/exe", "--child",	"3",
			(char *)name,	  (char *)port, NULL};
	char *truth[] = {"/bin/true", NULL};
	char *py[] = {(char *)python,
		      "-c",
		      "import socket, sys; "
		      "assert socket.getaddrinfo(sys.argv[1], sys.argv[2])",
		      (char *)name,
		      (char *)port,
		      NULL};
	int i;

	for (i = 0; i < iters; i++) {
		if (fork_every > 0 && t < 4 && i % fork_every == fork_every / 2)
			do_fork(c);
		if (exec_every > 0 && t >= 4 && t < 6 &&
		    i % exec_every == exec_every / 2) {
			do_exec(self, 1, c);
			do_exec(truth, 0, c);
			if (python)
				do_exec(py, 0, c);
		}
		round_once(i, 0, c);
	}
	return NULL;
}

static void print_counts(const struct counts *c)
{
	printf("rounds=%lu ok=%lu refused=%lu other=%lu gai_errors=%lu "
	       "forks=%lu execs=%lu failures=%lu\n",
	       c->rounds, c->ok, c->refused, c->other, c->gai, c->forks,
	       c->execs, c->failures);
	fflush(stdout);
}

static int usage(void)
{
	fprintf(stderr, "usage: hammer [-t THREADS] [-i ITERS] [-f FORK_EVERY] "
			"[-x EXEC_EVERY] [-p PYTHON] NAME PORT\n"
			"       hammer --child ROUNDS NAME PORT\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct counts total;
	struct worker *w;
	int nthreads = 16, opt, i, rounds;

	if (argc == 5 && strcmp(argv[1], "--child") == 0) {
		rounds = atoi(argv[2]);
		name = argv[3];
		port = argv[4];
		memset(&total, 0, sizeof(total));
		for (i = 0; i < rounds; i++)
			round_once(i, 0, &total);
		print_counts(&total);
		return total.other || total.gai ? 1 : 0;
	}

	while ((opt = getopt(argc, argv, "t:i:f:x:p:")) != -1) {
		switch (opt) {
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'i':
			iters = atoi(optarg);
			break;
		case 'f':
			fork_every = atoi(optarg);
			break;
		case 'x':
			exec_every = atoi(optarg);
			break;
		case 'p':
			python = optarg;
			break;
		default:
			return usage();
		}
	}
	if (argc - optind != 2 || nthreads < 1 || nthreads > 256 || iters < 0)
		return usage();
	name = argv[optind];
	port = argv[optind + 1];

	w = calloc((size_t)nthreads, sizeof(*w));
	if (!w)
		return 1;
	for (i = 0; i < nthreads; i++) {
		w[i].index = i;
		if (pthread_create(&w[i].tid, NULL, worker, &w[i]) != 0) {
			fprintf(stderr, "hammer: pthread_create failed\n");
			return 1;
		}
	}
	memset(&total, 0, sizeof(total));
	for (i = 0; i < nthreads; i++) {
		pthread_join(w[i].tid, NULL);
		add_counts(&total, &w[i].c);
	}
	print_counts(&total);
	free(w);
	return total.other || total.gai || total.failures ? 1 : 0;
}
