/* cancelgai.c - pthread_cancel() of a thread inside getaddrinfo (issue 20). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/*
 * Usage:
 *   cancelgai [-c CANCEL_MS] [-w WAIT_MS] asking|waiting NAME
 *
 * NAME is a DNS cluster whose server answers slowly (seconds), resolved
 * (getaddrinfo, AF_UNSPEC, SOCK_STREAM) for the first time by this
 * process. Deferred cancellation, the default type.
 *
 *   asking   thread A resolves NAME; A is cancelled CANCEL_MS (500) in,
 *            while it asks for the first answer.
 *   waiting  thread A resolves NAME; 100 ms later thread B resolves it
 *            too, waiting for A's answer; B is cancelled CANCEL_MS in.
 *            Then A is joined.
 *
 * Then thread L resolves NAME (a later lookup), and in waiting mode a
 * thread forks a child that resolves NAME under alarm(5) and exits 0
 * (ok) or 1 (failed; 2: hung), reaped by that thread. Every join is
 * bounded by WAIT_MS (8000): a step that does not end in time is
 * reported "hung" and the next one still runs. One line per step, times
 * in ms from the step's start (the cancelled thread's: from the
 * pthread_cancel() call):
 *
 *   cancelled ms=N start_ms=N end=canceled|returned rc=EAI
 *                                   (or: cancelled hung; start_ms: from
 *                                   the start of its lookup)
 *   asker ms=N rc=EAI                             (waiting mode)
 *   later ms=N rc=EAI
 *   fork ms=N child=ok|failed|hung child_ms=N     (waiting mode)
 *
 * rc is getaddrinfo's result (0 or an EAI_* number; "-" when it never
 * returned, i.e. it was cancelled inside). Exit status 0 when every step
 * ended, 1 when one hung, 2 on usage errors.
 */

struct lookup {
	const char *name; /* what to resolve */
	pthread_t thread;
	double start_ms;  /* when the thread was made */
	atomic_bool done; /* getaddrinfo returned */
	double ms;	  /* how long it took */
	int rc;		  /* what it returned */
};

struct forker {
	const char *name; /* what the child resolves */
	pthread_t thread;
	double fork_ms;	 /* how long fork() took */
	double child_ms; /* fork() to the child's reaping */
	int status;	 /* the child's exit status, -1: not reaped */
};

static void *lookup_thread(void *arg)
{
	struct lookup *l = arg;
	double t0 = now_ms();

	l->rc = resolve(l->name);
	l->ms = now_ms() - t0;
	atomic_store(&l->done, true);
	/* A cancel that arrived during the lookup acts here. */
	pthread_testcancel();
	return NULL;
}

static int start_lookup(struct lookup *l, const char *name)
{
	memset(l, 0, sizeof(*l));
	l->name = name;
	l->start_ms = now_ms();
	return pthread_create(&l->thread, NULL, lookup_thread, l);
}

/* Join within wait_ms of now: 0 and what the thread returned, or -1. */
static int join_within(pthread_t t, int wait_ms, void **ret)
{
	struct timespec ts;
	long ns;

	clock_gettime(CLOCK_REALTIME, &ts);
	ns = ts.tv_nsec + (long)(wait_ms % 1000) * 1000000L;
	ts.tv_sec += wait_ms / 1000 + ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	return pthread_timedjoin_np(t, ret, &ts) == 0 ? 0 : -1;
}

static void on_child_alarm(int sig)
{
	_exit(2);
}

static void *fork_thread(void *arg)
{
	struct forker *f = arg;
	double t0 = now_ms();
	int status;
	pid_t pid;

	f->status = -1;
	pid = fork();
	if (pid == 0) {
		signal(SIGALRM, on_child_alarm);
		alarm(5);
		_exit(resolve(f->name) == 0 ? 0 : 1);
	}
	f->fork_ms = now_ms() - t0;
	if (pid < 0)
		return NULL;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	f->child_ms = now_ms() - t0;
	f->status = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
	return NULL;
}

static void print_rc(const struct lookup *l)
{
	if (atomic_load(&l->done))
		printf(" rc=%d\n", l->rc);
	else
		printf(" rc=-\n");
}

/* Join the cancelled thread; 1 when it hung. */
static int report_cancelled(struct lookup *l, int wait_ms)
{
	double t0 = now_ms();
	void *ret;

	pthread_cancel(l->thread);
	if (join_within(l->thread, wait_ms, &ret) < 0) {
		printf("cancelled hung\n");
		return 1;
	}
	printf("cancelled ms=%.0f start_ms=%.0f end=%s", now_ms() - t0,
	       now_ms() - l->start_ms,
	       ret == PTHREAD_CANCELED ? "canceled" : "returned");
	print_rc(l);
	return 0;
}

/* Join a lookup started at t0; 1 when it hung. */
static int report_lookup(const char *step, struct lookup *l, double t0,
			 int wait_ms)
{
	if (join_within(l->thread, wait_ms, NULL) < 0) {
		printf("%s hung\n", step);
		return 1;
	}
	printf("%s ms=%.0f", step, now_ms() - t0);
	print_rc(l);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: cancelgai [-c CANCEL_MS] [-w WAIT_MS] "
			"asking|waiting NAME\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, cancel_ms = 500, wait_ms = 8000, waiting, hung = 0;
	static struct lookup a, b, l;
	static struct forker f;
	const char *name;
	double t0;

	while ((opt = getopt(argc, argv, "c:w:")) != -1) {
		switch (opt) {
		case 'c':
			cancel_ms = atoi(optarg);
			break;
		case 'w':
			wait_ms = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2 || cancel_ms < 100 || wait_ms < 1)
		usage();
	if (strcmp(argv[optind], "waiting") == 0)
		waiting = 1;
	else if (strcmp(argv[optind], "asking") == 0)
		waiting = 0;
	else
		usage();
	name = argv[optind + 1];
	setvbuf(stdout, NULL, _IOLBF, 0);

	t0 = now_ms();
	if (start_lookup(&a, name) != 0)
		return 1;
	if (waiting) {
		sleep_ms(100);
		if (start_lookup(&b, name) != 0)
			return 1;
	}
	sleep_ms(cancel_ms - (now_ms() - t0));
	hung |= report_cancelled(waiting ? &b : &a, wait_ms);
	if (waiting)
		hung |= report_lookup("asker", &a, t0, wait_ms);

	t0 = now_ms();
	if (start_lookup(&l, name) != 0)
		return 1;
	hung |= report_lookup("later", &l, t0, wait_ms);

	if (waiting) {
		f.name = name;
		if (pthread_create(&f.thread, NULL, fork_thread, &f) != 0)
			return 1;
		if (join_within(f.thread, wait_ms, NULL) < 0) {
			printf("fork hung\n");
			hung = 1;
		} else {
			printf("fork ms=%.0f child=%s child_ms=%.0f\n",
			       f.fork_ms,
			       f.status == 0   ? "ok"
			       : f.status == 1 ? "failed"
					       : "hung",
			       f.child_ms);
			hung |= f.status != 0;
		}
	}
	fflush(stdout);
	_exit(hung);
}
