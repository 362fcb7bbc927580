/* connlife.c - a client with a program's normal life around connect():
 * signals, retries, changed modes, threads, vfork, dup, its own socket
 * options. Reproduces, with the library preloaded or without, what
 * tests/integration/program_life.sh checks.
 *
 *   connlife [options] MODE HOST PORT
 *
 * Modes (HOST is resolved with getaddrinfo, AF_INET, SOCK_STREAM):
 *   walk      a client: each address in turn, a new socket each, until one
 *             connects. -n non-blocking (poll, then SO_ERROR), -b
 *             non-blocking connect() then blocking and connect() again,
 *             -r connect() again after EINTR, -a ALARM_MS one SIGALRM,
 *             -S PERIOD_US SIGALRM every PERIOD_US (a storm), -R the
 *             handler has SA_RESTART. Prints per attempt
 *             "attempt ADDR RESULT" (RESULT 0, an errno name, or
 *             "EINTR*N" for N EINTRs retried), then "connected ADDR MS"
 *             or "failed MS", MS since the first connect().
 *   vfork     non-blocking connect() to the first address with the
 *             program's TCP_SYNCNT 4; a vfork() child closes the socket
 *             and exits; prints the TCP_SYNCNT the parent reads (libc),
 *             then waits -w MS and closes.
 *   dup       non-blocking connect(), dup(), close() of the original;
 *             prints the copy's TCP_SYNCNT by raw system call and the
 *             kernel's default.
 *   ownsyncnt non-blocking connect(); after EINPROGRESS the program sets
 *             TCP_SYNCNT 3; prints it read through libc while pending,
 *             then after the outcome (SO_ERROR) by raw system call.
 *   sndtimeo  blocking connect() while another thread sets SO_SNDTIMEO
 *             5 s on the socket after 300 ms; prints the value after.
 *   reuse     a blocking connect() in one thread; another closes the
 *             socket after 200 ms, reuses its number for a connection to
 *             ADDR2:PORT2 (-x ADDR2:PORT2) with SO_SNDTIMEO 7 s; after
 *             the first connect() returns, prints that connection's
 *             SO_SNDTIMEO (raw) and whether it still carries a request.
 *   efault    resolves HOST (tracking starts), then connect() with
 *             unreadable addresses; prints the errno names.
 *   unobserved non-blocking connect() to the first address, poll, an
 *             HTTP request without reading SO_ERROR, the reply, a second
 *             resolution; prints the raw TCP_SYNCNT and the default.
 * Exit status 0 when it ran (whatever it printed), 2 on usage errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int opt_nonblock, opt_nb_then_block, opt_retry, opt_restart;
static int opt_alarm_ms, opt_storm_us, opt_wait_ms = 1500;
static const char *opt_other;
static volatile sig_atomic_t signals;

static void on_signal(int sig)
{
	signals++;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static const char *ename(int e)
{
	static char buf[32];

	switch (e) {
	case 0:
		return "0";
	case EINTR:
		return "EINTR";
	case EINPROGRESS:
		return "EINPROGRESS";
	case EALREADY:
		return "EALREADY";
	case EISCONN:
		return "EISCONN";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ECONNRESET:
		return "ECONNRESET";
	case EFAULT:
		return "EFAULT";
	case EINVAL:
		return "EINVAL";
	case EHOSTUNREACH:
		return "EHOSTUNREACH";
	}
	snprintf(buf, sizeof(buf), "errno%d", e);
	return buf;
}

static void signals_start(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	struct itimerval it = {{0, 0}, {0, 0}};

	sa.sa_flags = opt_restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	if (opt_storm_us) {
		it.it_value.tv_usec = opt_storm_us;
		it.it_interval.tv_usec = opt_storm_us;
	} else if (opt_alarm_ms) {
		it.it_value.tv_sec = opt_alarm_ms / 1000;
		it.it_value.tv_usec = opt_alarm_ms % 1000 * 1000;
	}
	setitimer(ITIMER_REAL, &it, NULL);
}

static void signals_stop(void)
{
	struct itimerval it = {{0, 0}, {0, 0}};

	setitimer(ITIMER_REAL, &it, NULL);
}

static struct addrinfo *resolve(const char *host, const char *port)
{
	struct addrinfo hints = {0}, *res = NULL;
	int rc;

	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		printf("resolve %s\n", gai_strerror(rc));
		exit(0);
	}
	return res;
}

static const char *addr_of(const struct sockaddr *sa)
{
	static char buf[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
		  sizeof(buf));
	return buf;
}

static int wait_writable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	long end = now_ms() + ms;
	int rc;

	do
		rc = poll(&p, 1,
			  (int)(end - now_ms() > 0 ? end - now_ms() : 0));
	while (rc < 0 && errno == EINTR);
	return rc;
}

static int so_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		return errno;
	return err;
}

/* One attempt of `walk`; returns 0 when connected, else the errno. */
static int attempt(int fd, const struct addrinfo *ai)
{
	int rc, err, eintr = 0;

	if (opt_nonblock || opt_nb_then_block)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
	err = rc == 0 ? 0 : errno;
	if (opt_nb_then_block && err == EINPROGRESS) {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		err = rc == 0 ? 0 : errno;
	}
	while (opt_retry && err == EINTR) {
		eintr++;
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		err = rc == 0 ? 0 : errno;
	}
	if (opt_nonblock && err == EINPROGRESS) {
		if (wait_writable(fd, 200000) == 1)
			err = so_error(fd);
		else
			err = ETIMEDOUT;
	}
	if (err == EISCONN)
		err = 0;
	if (eintr)
		printf("attempt %s %s EINTR*%d\n", addr_of(ai->ai_addr),
		       ename(err), eintr);
	else
		printf("attempt %s %s\n", addr_of(ai->ai_addr), ename(err));
	return err;
}

/* With CONNLIFE_SIGNALS=FILE, the signals delivered are added to FILE
 * as one line, for a test that reports how many it sent. */
static void note_signals(void)
{
	const char *path = getenv("CONNLIFE_SIGNALS");
	FILE *f = path ? fopen(path, "a") : NULL;

	if (f) {
		fprintf(f, "%d\n", (int)signals);
		fclose(f);
	}
}

static int mode_walk(const char *host, const char *port)
{
	struct addrinfo *res = resolve(host, port), *ai;
	long t0;

	signals_start();
	t0 = now_ms();
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype, 0);

		if (attempt(fd, ai) == 0) {
			signals_stop();
			note_signals();
			printf("connected %s %ld\n", addr_of(ai->ai_addr),
			       now_ms() - t0);
			close(fd);
			freeaddrinfo(res);
			return 0;
		}
		close(fd);
	}
	signals_stop();
	note_signals();
	printf("failed %ld\n", now_ms() - t0);
	freeaddrinfo(res);
	return 0;
}

static int syncnt_of(int fd, int raw)
{
	int v = -1;
	socklen_t len = sizeof(v);

	if (raw)
		syscall(SYS_getsockopt, fd, IPPROTO_TCP, TCP_SYNCNT, &v, &len);
	else
		getsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &v, &len);
	return v;
}

static int default_syncnt(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), v = syncnt_of(fd, 1);

	close(fd);
	return v;
}

static int nb_socket(void)
{
	return socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
}

static int mode_vfork(const char *host, const char *port)
{
	struct addrinfo *res = resolve(host, port);
	int fd = nb_socket(), four = 4, rc;
	pid_t pid;

	setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &four, sizeof(four));
	rc = connect(fd, res->ai_addr, res->ai_addrlen);
	printf("connect %s\n", ename(rc == 0 ? 0 : errno));
	pid = vfork();
	if (pid == 0) {
		close(fd);
		_exit(0);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	printf("syncnt %d\n", syncnt_of(fd, 0));
	usleep(opt_wait_ms * 1000);
	close(fd);
	freeaddrinfo(res);
	return 0;
}

static int mode_dup(const char *host, const char *port)
{
	struct addrinfo *res = resolve(host, port);
	int fd = nb_socket(), copy, rc;

	rc = connect(fd, res->ai_addr, res->ai_addrlen);
	printf("connect %s\n", ename(rc == 0 ? 0 : errno));
	copy = dup(fd);
	close(fd);
	printf("copy syncnt %d default %d\n", syncnt_of(copy, 1),
	       default_syncnt());
	close(copy);
	freeaddrinfo(res);
	return 0;
}

static int mode_ownsyncnt(const char *host, const char *port)
{
	struct addrinfo *res = resolve(host, port);
	int fd = nb_socket(), three = 3, rc;

	rc = connect(fd, res->ai_addr, res->ai_addrlen);
	printf("connect %s\n", ename(rc == 0 ? 0 : errno));
	setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &three, sizeof(three));
	printf("pending syncnt %d\n", syncnt_of(fd, 0));
	wait_writable(fd, 10000);
	printf("so_error %s\n", ename(so_error(fd)));
	printf("after syncnt %d raw %d\n", syncnt_of(fd, 0), syncnt_of(fd, 1));
	close(fd);
	freeaddrinfo(res);
	return 0;
}

static int shared_fd = -1;

static void *set_sndtimeo_later(void *arg)
{
	struct timeval tv = {5, 0};

	usleep(300000);
	setsockopt(shared_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return NULL;
}

static double sndtimeo_of(int fd)
{
	struct timeval tv = {-1, 0};
	socklen_t len = sizeof(tv);

	syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len);
	return tv.tv_sec + tv.tv_usec / 1e6;
}

static int mode_sndtimeo(const char *host, const char *port)
{
	struct addrinfo *res = resolve(host, port);
	pthread_t t;
	int rc;

	shared_fd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_create(&t, NULL, set_sndtimeo_later, NULL);
	rc = connect(shared_fd, res->ai_addr, res->ai_addrlen);
	printf("connect %s\n", ename(rc == 0 ? 0 : errno));
	pthread_join(t, NULL);
	printf("sndtimeo %.1f\n", sndtimeo_of(shared_fd));
	close(shared_fd);
	freeaddrinfo(res);
	return 0;
}

static struct sockaddr_in other;
static int reused = -1;

static void *close_and_reuse(void *arg)
{
	struct timeval tv = {7, 0};
	int fd;

	usleep(200000);
	close(shared_fd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&other, sizeof(other)) != 0)
		printf("other connect %s\n", ename(errno));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	reused = fd;
	return NULL;
}

static int mode_reuse(const char *host, const char *port)
{
	static const char req[] = "GET / HTTP/1.0\r\n\r\n";
	struct addrinfo *res = resolve(host, port);
	char buf[256], addr[64], *colon;
	pthread_t t;
	ssize_t n;
	int rc;

	if (!opt_other || strlen(opt_other) >= sizeof(addr))
		return 2;
	strcpy(addr, opt_other);
	colon = strchr(addr, ':');
	if (!colon)
		return 2;
	*colon = '\0';
	other.sin_family = AF_INET;
	other.sin_port = htons(atoi(colon + 1));
	inet_pton(AF_INET, addr, &other.sin_addr);
	shared_fd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_create(&t, NULL, close_and_reuse, NULL);
	rc = connect(shared_fd, res->ai_addr, res->ai_addrlen);
	printf("connect %s\n", ename(rc == 0 ? 0 : errno));
	pthread_join(t, NULL);
	printf("same number %s\n", reused == shared_fd ? "yes" : "no");
	printf("sndtimeo %.1f\n", sndtimeo_of(reused));
	n = send(reused, req, sizeof(req) - 1, MSG_NOSIGNAL);
	n = n > 0 ? recv(reused, buf, sizeof(buf), 0) : -1;
	printf("request %s\n", n > 0 ? "answered" : ename(errno));
	close(reused);
	freeaddrinfo(res);
	return 0;
}

static int mode_efault(const char *host, const char *port)
{
	struct addrinfo *res = resolve(host, port);
	long page = sysconf(_SC_PAGESIZE);
	void *gone =
		mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc;

	munmap(gone, page);
	rc = connect(fd, (const struct sockaddr *)1, 16);
	printf("small %s\n", ename(rc == 0 ? 0 : errno));
	rc = connect(fd, gone, 16);
	printf("unmapped %s\n", ename(rc == 0 ? 0 : errno));
	close(fd);
	freeaddrinfo(res);
	return 0;
}

static int mode_unobserved(const char *host, const char *port)
{
	static const char req[] = "GET / HTTP/1.0\r\n\r\n";
	struct addrinfo *res = resolve(host, port);
	int fd = nb_socket(), rc;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[512];
	ssize_t n = 0;

	rc = connect(fd, res->ai_addr, res->ai_addrlen);
	printf("connect %s\n", ename(rc == 0 ? 0 : errno));
	wait_writable(fd, 10000);
	send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
	while (poll(&p, 1, 5000) == 1 &&
	       (n = recv(fd, buf, sizeof(buf), 0)) > 0)
		;
	freeaddrinfo(resolve(host, port));
	printf("syncnt %d default %d\n", syncnt_of(fd, 1), default_syncnt());
	close(fd);
	freeaddrinfo(res);
	return 0;
}

int main(int argc, char **argv)
{
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "nbrRa:S:w:x:")) != -1) {
		switch (c) {
		case 'n':
			opt_nonblock = 1;
			break;
		case 'b':
			opt_nb_then_block = 1;
			break;
		case 'r':
			opt_retry = 1;
			break;
		case 'R':
			opt_restart = 1;
			break;
		case 'a':
			opt_alarm_ms = atoi(optarg);
			break;
		case 'S':
			opt_storm_us = atoi(optarg);
			break;
		case 'w':
			opt_wait_ms = atoi(optarg);
			break;
		case 'x':
			opt_other = optarg;
			break;
		default:
			return 2;
		}
	}
	if (argc - optind != 3)
		return 2;
	argv += optind;
	if (!strcmp(argv[0], "walk"))
		return mode_walk(argv[1], argv[2]);
	if (!strcmp(argv[0], "vfork"))
		return mode_vfork(argv[1], argv[2]);
	if (!strcmp(argv[0], "dup"))
		return mode_dup(argv[1], argv[2]);
	if (!strcmp(argv[0], "ownsyncnt"))
		return mode_ownsyncnt(argv[1], argv[2]);
	if (!strcmp(argv[0], "sndtimeo"))
		return mode_sndtimeo(argv[1], argv[2]);
	if (!strcmp(argv[0], "reuse"))
		return mode_reuse(argv[1], argv[2]);
	if (!strcmp(argv[0], "efault"))
		return mode_efault(argv[1], argv[2]);
	if (!strcmp(argv[0], "unobserved"))
		return mode_unobserved(argv[1], argv[2]);
	return 2;
}
