/* forkloop.c - fork() while the library refreshes DNS clusters (issue 20). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/*
 * Usage:
 *   forkloop [-t THREADS] [-d SECS] [-w SECS] [-k KIDS] [-p PLAIN] [-r]
 *            NAME...
 *   forkloop -L [-n FORKS] [-s MS] NAME
 *
 * Stress (the default): THREADS threads (8) resolve the NAMEs in turn
 * (getaddrinfo, AF_UNSPEC, SOCK_STREAM, then freeaddrinfo) as fast as
 * they can, so that a cluster with dns_refresh_floor_ms = 10 and TTL 0
 * is being refreshed all the time; the main thread forks children for
 * SECS seconds (35), at most KIDS (16) alive at once. Each child, under
 * alarm(W) (W = -w, 5 s), resolves PLAIN ("localhost", libc's resolver)
 * and then NAME[0] (the library), and _exit()s 0 when both returned, 1
 * when one failed, 2 when the alarm fired (a lookup that never
 * returns). The parent kills a child still alive 2 W after its fork()
 * (counted as hung too). -r: one more thread changes the mtime of
 * /etc/resolv.conf every millisecond, so that glibc re-reads it, under
 * its resolv.conf lock, at every res_ninit(): a wider window for a
 * fork() to catch that lock held (the library's refresh thread inside
 * res_ninit), hence a higher hit rate for the same run time. (-r touches
 * the file it finds there: meant for dns_hangs.sh's namespace, where
 * /etc/resolv.conf is the test's own.)
 * Prints one line:
 *   children=C ok=O failed=F hung=H killed=K lookups=L gai_errors=G
 *   fork_median_us=M fork_max_us=X
 * fork() is timed in the parent around the call.
 *
 * Latency (-L): fork() time, FORKS children (100) each doing _exit(0) at
 * once, 2 ms apart, in three states of NAME (a DNS cluster whose server
 * answers slowly, e.g. 2 s): "idle", before NAME is used; "first", while
 * a thread waits for NAME's first answer; "refresh", while a background
 * refresh is in flight (a lookup made MS ms, -s, default 1200, after the
 * first answer: past the refresh floor). One line each:
 *   STATE forks=N median_us=M max_us=X lookup_ms=T
 * (lookup_ms: how long the lookup that started the state took, measured
 * when it returned.)
 *
 * A watchdog (alarm) ends the process after SECS + 60 s (-L: 60 s) with
 * "watchdog" on stdout and status 3. Exit status 0 when no child failed
 * or hung (-L: when every fork() returned), 1 otherwise, 2 on usage
 * errors.
 */

#define CHILD_OK     0
#define CHILD_FAILED 1
#define CHILD_HUNG   2
#define MAX_KIDS     64

struct kid {
	pid_t pid;	 /* 0: a free slot */
	double start_ms; /* when it was forked */
};

struct samples {
	double *us; /* fork() times */
	size_t n;   /* used */
	size_t cap; /* allocated */
};

static char **names;
static int nnames;
static const char *plain = "localhost";
static int watchdog_s = 5;
static atomic_bool stop;
static atomic_ulong lookups;
static atomic_ulong gai_errors;

static void *resolver(void *arg)
{
	unsigned long n = 0;

	while (!atomic_load(&stop)) {
		if (resolve(names[n % nnames]) != 0)
			atomic_fetch_add(&gai_errors, 1);
		n++;
	}
	atomic_fetch_add(&lookups, n);
	return NULL;
}

static void *toucher(void *arg)
{
	while (!atomic_load(&stop)) {
		utimensat(AT_FDCWD, "/etc/resolv.conf", NULL, 0);
		sleep_ms(1);
	}
	return NULL;
}

static void on_child_alarm(int sig)
{
	_exit(CHILD_HUNG);
}

static void on_watchdog(int sig)
{
	static const char msg[] = "watchdog\n";

	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(4);
	_exit(3);
}

/* What a stress child does: two lookups under an alarm. */
static void child(void)
{
	int rc;

	signal(SIGALRM, on_child_alarm);
	alarm(watchdog_s);
	rc = resolve(plain);
	if (resolve(names[0]) != 0)
		rc = 1;
	_exit(rc == 0 ? CHILD_OK : CHILD_FAILED);
}

static void add_sample(struct samples *s, double us)
{
	double *p;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4096;
		p = realloc(s->us, s->cap * sizeof(*p));
		if (!p) {
			s->cap = s->n;
			return;
		}
		s->us = p;
	}
	s->us[s->n++] = us;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median and max of the samples (sorts them); 0 when there are none. */
static void summary(struct samples *s, double *median, double *max)
{
	*median = *max = 0;
	if (!s->n)
		return;
	qsort(s->us, s->n, sizeof(*s->us), cmp_double);
	*median = s->us[s->n / 2];
	*max = s->us[s->n - 1];
}

static pid_t timed_fork(struct samples *s)
{
	double t0 = now_ms();
	pid_t pid = fork();

	if (pid > 0)
		add_sample(s, (now_ms() - t0) * 1e3);
	return pid;
}

static void usage(void)
{
	fprintf(stderr, "usage: forkloop [-t THREADS] [-d SECS] [-w SECS] "
			"[-k KIDS] [-p PLAIN] [-r] NAME...\n"
			"       forkloop -L [-n FORKS] [-s MS] NAME\n");
	exit(2);
}

static int stress(int nthreads, int secs, int max_kids, int touch)
{
	unsigned long children = 0, ok = 0, failed = 0, hung = 0, killed = 0;
	struct kid kids[MAX_KIDS] = {{0}};
	struct samples s = {0};
	pthread_t *threads, touch_thread;
	double end, median, max, t;
	int i, alive = 0, status;
	pid_t pid;

	threads = calloc(nthreads, sizeof(*threads));
	if (!threads)
		return 1;
	for (i = 0; i < nthreads; i++) {
		if (pthread_create(&threads[i], NULL, resolver, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	if (touch && pthread_create(&touch_thread, NULL, toucher, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}
	end = now_ms() + secs * 1e3;
	while (now_ms() < end || alive) {
		/* Reap: no wait here; a child that outlives 2 W is killed. */
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (i = 0; i < max_kids && kids[i].pid != pid; i++)
				;
			if (i == max_kids)
				continue;
			kids[i].pid = 0;
			alive--;
			if (WIFEXITED(status) &&
			    WEXITSTATUS(status) == CHILD_OK)
				ok++;
			else if (WIFEXITED(status) &&
				 WEXITSTATUS(status) == CHILD_HUNG)
				hung++;
			else if (WIFSIGNALED(status) &&
				 WTERMSIG(status) == SIGKILL)
				killed++;
			else
				failed++;
		}
		t = now_ms();
		for (i = 0; i < max_kids; i++) {
			if (kids[i].pid &&
			    t - kids[i].start_ms > 2e3 * watchdog_s) {
				kill(kids[i].pid, SIGKILL);
				kids[i].start_ms = t;
			}
		}
		if (t >= end || alive == max_kids) {
			sleep_ms(0.2);
			continue;
		}
		for (i = 0; kids[i].pid; i++)
			;
		pid = timed_fork(&s);
		if (pid == 0)
			child();
		if (pid < 0) {
			perror("fork");
			sleep_ms(10);
			continue;
		}
		kids[i].pid = pid;
		kids[i].start_ms = now_ms();
		alive++;
		children++;
	}
	atomic_store(&stop, true);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	if (touch)
		pthread_join(touch_thread, NULL);
	summary(&s, &median, &max);
	printf("children=%lu ok=%lu failed=%lu hung=%lu killed=%lu "
	       "lookups=%lu gai_errors=%lu fork_median_us=%.0f "
	       "fork_max_us=%.0f\n",
	       children, ok, failed, hung, killed, atomic_load(&lookups),
	       atomic_load(&gai_errors), median, max);
	free(threads);
	free(s.us);
	return failed || hung || killed ? 1 : 0;
}

struct lookup {
	pthread_t thread;
	atomic_bool done; /* the lookup returned */
	double ms;	  /* how long it took */
	int rc;		  /* what it returned */
};

static void *lookup_thread(void *arg)
{
	struct lookup *l = arg;
	double t0 = now_ms();

	l->rc = resolve(names[0]);
	l->ms = now_ms() - t0;
	atomic_store(&l->done, true);
	return NULL;
}

/* FORKS children forked 2 ms apart (while `busy`, if given, is not
 * done), each reaped before the next; one line of figures. */
static int fork_burst(const char *state, int forks, struct lookup *busy)
{
	struct samples s = {0};
	double median, max;
	int i, status;
	pid_t pid;

	for (i = 0; i < forks; i++) {
		if (busy && atomic_load(&busy->done))
			break;
		pid = timed_fork(&s);
		if (pid == 0)
			_exit(0);
		if (pid < 0)
			return -1;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		sleep_ms(2);
	}
	summary(&s, &median, &max);
	printf("%s forks=%zu median_us=%.0f max_us=%.0f", state, s.n, median,
	       max);
	fflush(stdout);
	free(s.us);
	return 0;
}

static int start_lookup(struct lookup *l)
{
	atomic_store(&l->done, false);
	return pthread_create(&l->thread, NULL, lookup_thread, l);
}

static int latency(int forks, int settle_ms)
{
	struct lookup l;
	int rc = 0;

	rc |= fork_burst("idle", forks, NULL);
	printf(" lookup_ms=0\n");
	if (start_lookup(&l) != 0)
		return 1;
	sleep_ms(50);
	rc |= fork_burst("first", forks, &l);
	pthread_join(l.thread, NULL);
	printf(" lookup_ms=%.0f rc=%d\n", l.ms, l.rc);
	sleep_ms(settle_ms);
	if (start_lookup(&l) != 0)
		return 1;
	pthread_join(l.thread, NULL);
	/* The lookup returned at once; the refresh it started goes on. */
	sleep_ms(20);
	rc |= fork_burst("refresh", forks, NULL);
	printf(" lookup_ms=%.0f rc=%d\n", l.ms, l.rc);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	int opt, nthreads = 8, secs = 35, max_kids = 16, touch = 0;
	int lat = 0, forks = 100, settle_ms = 1200;

	while ((opt = getopt(argc, argv, "t:d:w:k:p:rLn:s:")) != -1) {
		switch (opt) {
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'd':
			secs = atoi(optarg);
			break;
		case 'w':
			watchdog_s = atoi(optarg);
			break;
		case 'k':
			max_kids = atoi(optarg);
			break;
		case 'p':
			plain = optarg;
			break;
		case 'r':
			touch = 1;
			break;
		case 'L':
			lat = 1;
			break;
		case 'n':
			forks = atoi(optarg);
			break;
		case 's':
			settle_ms = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind >= argc || nthreads < 1 || secs < 0 || watchdog_s < 1 ||
	    max_kids < 1 || max_kids > MAX_KIDS || forks < 1)
		usage();
	names = argv + optind;
	nnames = argc - optind;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_watchdog);
	alarm(lat ? 60 : secs + 60);
	return lat ? latency(forks, settle_ms)
		   : stress(nthreads, secs, max_kids, touch);
}
