/* bench_refresh.c - what a DNS membership refresh in flight costs the
 * resolutions that go on meanwhile (design.md §15.3): resolutions per
 * second of a cluster with srv members while a refresh is held at the
 * DNS server, ÷ the same while none is. Alongside, the same cluster
 * with no refresh due ÷ a cluster of config replicas (what looking at a
 * membership costs a resolution at all).
 *
 * Unlike the other benchmarks this links the preload layer itself
 * (through the hook's path: the snapshot, the cluster, its members, the
 * answer), with its DNS client answered in-process, so that
 * "a refresh held in flight" is exact: its thread waits at a gate.
 *
 * Usage: bench_refresh [-r ROUNDS] [-t MS]
 * Prints "refresh in_flight_per_s idle_per_s ratio" and
 * "membership dns_per_s config_per_s ratio" (medians of rounds, each
 * round's ratio measured side by side).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/preload.h"
#include "bench/bench.h"

#define SRV "_ch._tcp.bench.test."

/* The library's clock, moved on to make a refresh due (the seam's). */
static int (*real_now)(clockid_t, struct timespec *);
static _Atomic long long shift_s;

static int shifted_now(clockid_t clock, struct timespec *ts)
{
	int rc = real_now(clock, ts);

	ts->tv_sec += shift_s;
	return rc;
}

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_closed, held;
static uint8_t answer[512];
static size_t answer_len;

/* The DNS server, in-process: every question waits at the gate while it
 * is closed, then gets the answer built below. */
static void fake_ask(struct rlb_dns_question *q, size_t n, int64_t deadline)
{
	pthread_mutex_lock(&gate_lock);
	held = true;
	pthread_cond_broadcast(&gate_cond);
	while (gate_closed)
		pthread_cond_wait(&gate_cond, &gate_lock);
	held = false;
	pthread_mutex_unlock(&gate_lock);
	for (size_t i = 0; i < n; i++) {
		size_t len = answer_len < q[i].cap ? answer_len : q[i].cap;

		memcpy(q[i].buf, answer, len);
		q[i].len = (ssize_t)len;
	}
}

static const struct rlb_dns_client fake_dns = {.ask = fake_ask};

static void put(const void *p, size_t n)
{
	memcpy(answer + answer_len, p, n);
	answer_len += n;
}

static void put_name(const char *const *labels)
{
	for (; *labels; labels++) {
		uint8_t n = (uint8_t)strlen(*labels);

		put(&n, 1);
		put(*labels, n);
	}
	put("", 1);
}

/* The server's answer: three SRV targets, each with its A record. */
static void build_answer(void)
{
	static const char *const qname[] = {"_ch", "_tcp", "bench", "test",
					    NULL};
	static const uint8_t head[12] = {0x12, 0x34, 0x84, 0, 0, 1,
					 0,    3,    0,	   0, 0, 3};

	put(head, sizeof(head));
	put_name(qname);
	put("\0\x21\0\x01", 4);
	for (int i = 0; i < 3; i++) {
		/* Owner: a pointer to the question's name (offset 12). */
		uint8_t rr[] = {0xc0, 12, 0, 33, 0, 1, 0, 0,	0,
				60,   0,  0, 0,	 1, 0, 1, 0x23, 0x28};
		uint8_t target[] = {1, (uint8_t)('a' + i), 0xc0, 12 + 9};

		/* rdlength: 6 + the target (one label, then "bench.test"
		 * by pointer). */
		rr[11] = 6 + sizeof(target);
		put(rr, sizeof(rr));
		put(target, sizeof(target));
	}
	for (int i = 0; i < 3; i++) {
		uint8_t rr[] = {1,    (uint8_t)('a' + i),
				0xc0, 12 + 9,
				0,    1,
				0,    1,
				0,    0,
				0,    60,
				0,    4,
				127,  0,
				0,    (uint8_t)(21 + i)};

		put(rr, sizeof(rr));
	}
}

static void write_config(const char *dir)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/replicalb.conf", dir);
	f = fopen(path, "w");
	if (!f)
		exit(1);
	fprintf(f,
		"state_dir = \"%s\";\n"
		"clusters = ( { name = \"dns.cluster\"; srv = \"" SRV "\";\n"
		"  dns_refresh_floor_ms = 1000; dns_cache_ttl = 0; },\n"
		"  { name = \"config.cluster\"; replicas = ( \"127.0.0.21\","
		" \"127.0.0.22\", \"127.0.0.23\" ); port = 9000; } );\n",
		dir);
	fclose(f);
	setenv("REPLICALB_CONFIG", path, 1);
}

/* One resolution as the hook makes it. */
static void resolve(const char *name)
{
	static const struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct rlb_snapshot *snap = rlb_session_acquire();
	struct rlb_cluster *c = rlb_config_find(snap->cfg, name);
	struct addrinfo *res = NULL;

	if (c->srv)
		c = rlb_session_members(c, &snap);
	if (!c || rlb_resolve_getaddrinfo(c, "9000", &hints, &res) != 0) {
		fprintf(stderr, "bench_refresh: %s does not resolve\n", name);
		exit(1);
	}
	rlb_session_release(snap);
	freeaddrinfo(res);
}

/* Resolutions of name per second for about ms. */
static double rate(const char *name, double ms)
{
	double t0 = bench_now_ns(), end = t0 + ms * 1e6, t;
	long n = 0;

	do {
		for (int k = 0; k < 64; k++, n++)
			resolve(name);
		t = bench_now_ns();
	} while (t < end);
	return n / ((t - t0) / 1e9);
}

static void set_gate(bool closed)
{
	pthread_mutex_lock(&gate_lock);
	gate_closed = closed;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

/* Wait until a refresh is held at the gate: one resolution starts it. */
static void hold_a_refresh(void)
{
	set_gate(true);
	shift_s += 2; /* past the floor (1 s): the refresh is due */
	pthread_mutex_lock(&gate_lock);
	while (!held) {
		pthread_mutex_unlock(&gate_lock);
		resolve("dns.cluster");
		usleep(1000);
		pthread_mutex_lock(&gate_lock);
	}
	pthread_mutex_unlock(&gate_lock);
}

/* Let the refresh held go, and wait for it to end. */
static void release_refresh(void)
{
	set_gate(false);
	pthread_mutex_lock(&gate_lock);
	while (held) {
		pthread_mutex_unlock(&gate_lock);
		usleep(1000);
		pthread_mutex_lock(&gate_lock);
	}
	pthread_mutex_unlock(&gate_lock);
	usleep(2000);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/rlb-bench-refresh-XXXXXX", cmd[100];
	double ms = 30, *in, *idle, *dns, *cfg, *r1, *r2;
	int rounds = 15, opt;

	while ((opt = getopt(argc, argv, "r:t:")) != -1) {
		if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 't')
			ms = atof(optarg);
		else
			return 2;
	}
	if (rounds < 1 || !mkdtemp(dir))
		return 2;
	in = calloc((size_t)rounds, sizeof(double));
	idle = calloc((size_t)rounds, sizeof(double));
	dns = calloc((size_t)rounds, sizeof(double));
	cfg = calloc((size_t)rounds, sizeof(double));
	r1 = calloc((size_t)rounds, sizeof(double));
	r2 = calloc((size_t)rounds, sizeof(double));
	if (!in || !idle || !dns || !cfg || !r1 || !r2)
		return 1;
	build_answer();
	write_config(dir);
	setenv("REPLICALB_LOG_LEVEL", "none", 1);
	rlb_libc_bind();
	rlb_session_set_dns(&fake_dns);
	real_now = rlb_libc()->now;
	rlb_libc()->now = shifted_now;
	resolve("dns.cluster"); /* the first answer */
	for (int r = 0; r < rounds; r++) {
		/* No refresh in flight: the last ended just now, and the
		 * next is due after the floor (1 s). */
		idle[r] = rate("dns.cluster", ms);
		hold_a_refresh();
		in[r] = rate("dns.cluster", ms);
		release_refresh();
		cfg[r] = rate("config.cluster", ms);
		hold_a_refresh();
		dns[r] = rate("dns.cluster", ms);
		release_refresh();
		r1[r] = in[r] / idle[r];
		r2[r] = dns[r] / cfg[r];
	}
	printf("refresh %.0f %.0f %.3f\n", bench_median(in, (size_t)rounds),
	       bench_median(idle, (size_t)rounds),
	       bench_median(r1, (size_t)rounds));
	printf("membership %.0f %.0f %.3f\n", bench_median(dns, (size_t)rounds),
	       bench_median(cfg, (size_t)rounds),
	       bench_median(r2, (size_t)rounds));
	rlb_health_remove_state(&(struct rlb_config){.state_dir = dir}, true,
				NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
