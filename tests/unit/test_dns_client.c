/* test_dns_client.c - the library's own stub resolver (dns_client.c), its
 * messages (dnsmsg.c: questions, which reply answers which) and
 * resolv.conf as it reads it (resolv_conf.c), against real UDP and TCP
 * servers of the test's own on 127.0.0.1. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"

/* ------------------------------------------------------------------ */
/* Questions and replies */

static void test_dns_client_query_wire(void **state)
{
	/* clang-format off */
	static const uint8_t want[] = {
		/* id, RD, one question */
		0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
		/* web.rlb.test, type 33, class IN */
		3, 'w', 'e', 'b', 3, 'r', 'l', 'b', 4, 't', 'e', 's', 't', 0,
		0, 33, 0, 1,
	};
	/* clang-format on */
	uint8_t buf[300];

	assert_int_equal(
		rlb_dns_query(0x1234, "web.rlb.test.", 33, buf, sizeof(buf)),
		sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	/* Without its trailing dot, the same question. */
	assert_int_equal(
		rlb_dns_query(0x1234, "web.rlb.test", 33, buf, sizeof(buf)),
		sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(rlb_dns_query(1, "bad..name", 1, buf, sizeof(buf)),
			 -EINVAL);
	assert_int_equal(rlb_dns_query(1, "ok.test", 1, buf, 100), -EINVAL);
}

static void test_dns_client_reply_of_matches_question(void **state)
{
	uint8_t q[300], r[300];
	ssize_t n = rlb_dns_query(0xbeef, "Web.rlb.test", 1, q, sizeof(q));

	assert_true(n > 0);
	memcpy(r, q, (size_t)n);
	/* Not a response yet. */
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n), 0);
	r[2] |= 0x80;
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n), 1);
	/* The name in any case (0x20 encoding). */
	r[13] = 'W';
	r[14] = 'E';
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n), 1);
	r[2] |= 0x02; /* TC */
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n), 2);
	r[2] &= (uint8_t)~0x02;
	/* Another id, another type, a shorter message: not its answer. */
	r[1] ^= 1;
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n), 0);
	r[1] ^= 1;
	r[n - 3] = 28;
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n), 0);
	r[n - 3] = 1;
	assert_int_equal(rlb_dns_reply_of(q, (size_t)n, r, (size_t)n - 1), 0);
}

/* ------------------------------------------------------------------ */
/* resolv.conf */

static const char *ns_text(const struct rlb_resolv_conf *rc, size_t i,
			   char *buf, size_t len)
{
	const struct sockaddr *sa = (const struct sockaddr *)&rc->ns[i];

	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, buf,
			  (socklen_t)len);
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr,
			  buf, (socklen_t)len);
	return buf;
}

static void test_dns_client_resolv_conf(void **state)
{
	static const char text[] =
		"# a comment\n"
		"; another\n"
		"search a.test b.test\n"
		"nameserver 127.0.0.53 # the stub\n"
		"nameserver\tfe80::1%2\n"
		"nameserver fe80::2%eth0\n"
		"nameserver bogus\n"
		"nameserver 10.0.0.1\n"
		"nameserver 10.0.0.2\n"
		"options ndots:5 timeout:2 attempts:9 rotate\n"
		"optionsX use-vc\n";
	struct rlb_resolv_conf rc;
	char a[64];

	rlb_resolv_conf_parse(text, sizeof(text) - 1, NULL, &rc);
	/* At most three; a scope by name is left out; garbage skipped. */
	assert_int_equal(rc.nns, 3);
	assert_string_equal(ns_text(&rc, 0, a, sizeof(a)), "127.0.0.53");
	assert_string_equal(ns_text(&rc, 1, a, sizeof(a)), "fe80::1");
	assert_int_equal(((struct sockaddr_in6 *)&rc.ns[1])->sin6_scope_id, 2);
	assert_string_equal(ns_text(&rc, 2, a, sizeof(a)), "10.0.0.1");
	assert_int_equal(ntohs(((struct sockaddr_in *)&rc.ns[0])->sin_port),
			 53);
	assert_int_equal(rc.timeout_s, 2);
	assert_int_equal(rc.attempts, 5); /* glibc's RES_MAXRETRY */
	assert_true(rc.rotate);
	assert_false(rc.use_vc);
	/* RES_OPTIONS comes after the file. */
	rlb_resolv_conf_parse(text, sizeof(text) - 1,
			      "timeout:40 attempts:0 use-vc", &rc);
	assert_int_equal(rc.timeout_s, 30);
	assert_int_equal(rc.attempts, 1);
	assert_true(rc.use_vc);
	/* No file: glibc's defaults and the loopback's server. */
	rlb_resolv_conf_parse(NULL, 0, NULL, &rc);
	assert_int_equal(rc.nns, 1);
	assert_string_equal(ns_text(&rc, 0, a, sizeof(a)), "127.0.0.1");
	assert_int_equal(rc.timeout_s, 5);
	assert_int_equal(rc.attempts, 2);
}

/* glibc's schedule: retrans << ns, divided by the servers past the first. */
static void test_dns_client_budget_is_glibcs(void **state)
{
	struct rlb_resolv_conf rc;

	rlb_resolv_conf_parse("nameserver 127.0.0.1\n", 21, NULL, &rc);
	assert_int_equal(rlb_resolv_conf_budget_ms(&rc), 10000);
	rlb_resolv_conf_parse("nameserver 127.0.0.1\nnameserver 127.0.0.2\n"
			      "nameserver 127.0.0.3\n",
			      63, NULL, &rc);
	assert_int_equal(rlb_resolv_conf_wait_ms(&rc, 0), 5000);
	assert_int_equal(rlb_resolv_conf_wait_ms(&rc, 1), 3000);
	assert_int_equal(rlb_resolv_conf_wait_ms(&rc, 2), 6000);
	assert_int_equal(rlb_resolv_conf_budget_ms(&rc), 28000);
	rlb_resolv_conf_parse("options timeout:0 attempts:1\n", 29, NULL, &rc);
	assert_int_equal(rlb_resolv_conf_budget_ms(&rc), 1000);
}

/* ------------------------------------------------------------------ */
/* A server of the test's own: UDP and TCP on one port of 127.0.0.1 */

static struct server {
	int udp, tcp;
	uint16_t port;
	pthread_t thread;
	pthread_mutex_t lock;
	bool stop;
	/* What it does with each question (under lock). */
	int delay_ms;  /* answered this much later, all in parallel */
	int rcode;     /* the answers' RCODE */
	bool truncate; /* UDP answers: TC, no records */
	bool forge;    /* first a reply with another id */
	unsigned udp_asked, tcp_asked;
} srv = {.udp = -1, .tcp = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The answer to query q[0 .. n): one A record 127.0.0.9, or as told. */
static size_t make_answer(const uint8_t *q, size_t n, uint8_t *out, int rcode,
			  bool truncate)
{
	static const uint8_t rr[] = {0xc0, 12, 0, 1, 0,	  1, 0, 0,
				     0,	   60, 0, 4, 127, 0, 0, 9};
	size_t len = n;

	memcpy(out, q, n);
	out[2] = (uint8_t)(0x80 | (q[2] & 0x79) | (truncate ? 0x02 : 0));
	out[3] = (uint8_t)(0x80 | rcode);
	if (!truncate && rcode == 0) {
		out[7] = 1; /* ANCOUNT */
		memcpy(out + len, rr, sizeof(rr));
		len += sizeof(rr);
	}
	return len;
}

struct pending_reply {
	int64_t due;
	struct sockaddr_storage to;
	socklen_t tolen;
	uint8_t msg[600];
	size_t len;
};

static void serve_tcp(void)
{
	int fd = accept(srv.tcp, NULL, NULL);
	uint8_t q[600], out[700], lenb[2];
	size_t n;

	if (fd < 0)
		return;
	if (recv(fd, lenb, 2, MSG_WAITALL) == 2 &&
	    (n = (size_t)(lenb[0] << 8 | lenb[1])) <= sizeof(q) &&
	    recv(fd, q, n, MSG_WAITALL) == (ssize_t)n) {
		size_t len;

		pthread_mutex_lock(&srv.lock);
		srv.tcp_asked++;
		len = make_answer(q, n, out + 2, srv.rcode, false);
		pthread_mutex_unlock(&srv.lock);
		out[0] = (uint8_t)(len >> 8);
		out[1] = (uint8_t)len;
		if (send(fd, out, len + 2, 0) < 0) {
			/* The client went away: its loss. */
		}
	}
	close(fd);
}

static void *server_main(void *arg)
{
	struct pending_reply p[64];
	size_t np = 0;

	for (;;) {
		struct pollfd fds[2] = {{.fd = srv.udp, .events = POLLIN},
					{.fd = srv.tcp, .events = POLLIN}};
		int64_t now = mono_ms();
		bool stop;

		pthread_mutex_lock(&srv.lock);
		stop = srv.stop;
		pthread_mutex_unlock(&srv.lock);
		if (stop)
			break;
		for (size_t i = 0; i < np;) {
			if (p[i].due > now) {
				i++;
				continue;
			}
			sendto(srv.udp, p[i].msg, p[i].len, 0,
			       (struct sockaddr *)&p[i].to, p[i].tolen);
			p[i] = p[--np];
		}
		if (poll(fds, 2, 5) <= 0)
			continue;
		if (fds[1].revents & POLLIN)
			serve_tcp();
		if ((fds[0].revents & POLLIN) && np < 63) {
			struct pending_reply *r = &p[np];
			uint8_t q[600];
			ssize_t n;

			r->tolen = sizeof(r->to);
			n = recvfrom(srv.udp, q, sizeof(q), 0,
				     (struct sockaddr *)&r->to, &r->tolen);
			if (n < 12)
				continue;
			pthread_mutex_lock(&srv.lock);
			srv.udp_asked++;
			if (srv.forge) {
				/* Another id first: to be dropped. */
				r->len = make_answer(q, (size_t)n, r->msg, 3,
						     false);
				r->msg[1] ^= 0x5a;
				r->due = now;
				p[np + 1].to = r->to;
				p[np + 1].tolen = r->tolen;
				r = &p[++np];
			}
			r->len = make_answer(q, (size_t)n, r->msg, srv.rcode,
					     srv.truncate);
			r->due = now + srv.delay_ms;
			pthread_mutex_unlock(&srv.lock);
			np++;
		}
	}
	return NULL;
}

static int bind_port(int type, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	return fd;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	getsockname(fd, (struct sockaddr *)&sa, &len);
	return ntohs(sa.sin_port);
}

static int setup(void **state)
{
	/* A UDP port whose TCP twin is free too. */
	for (int i = 0; i < 20 && srv.tcp < 0; i++) {
		if (srv.udp >= 0)
			close(srv.udp);
		srv.udp = bind_port(SOCK_DGRAM, 0);
		srv.port = port_of(srv.udp);
		srv.tcp = bind_port(SOCK_STREAM, srv.port);
	}
	if (srv.tcp < 0 || listen(srv.tcp, 16) != 0)
		return -1;
	return pthread_create(&srv.thread, NULL, server_main, NULL);
}

static int teardown(void **state)
{
	pthread_mutex_lock(&srv.lock);
	srv.stop = true;
	pthread_mutex_unlock(&srv.lock);
	pthread_join(srv.thread, NULL);
	close(srv.udp);
	close(srv.tcp);
	rlb_dns_stub_use(NULL);
	return 0;
}

static void behave(int delay_ms, int rcode, bool truncate, bool forge)
{
	pthread_mutex_lock(&srv.lock);
	srv.delay_ms = delay_ms;
	srv.rcode = rcode;
	srv.truncate = truncate;
	srv.forge = forge;
	srv.udp_asked = srv.tcp_asked = 0;
	pthread_mutex_unlock(&srv.lock);
}

/* The stub asks these servers (ports on 127.0.0.1), timeout 1 s. */
static struct rlb_resolv_conf conf;

static void use_servers(const uint16_t *ports, size_t n, int attempts)
{
	memset(&conf, 0, sizeof(conf));
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_in *sa = (struct sockaddr_in *)&conf.ns[i];

		sa->sin_family = AF_INET;
		sa->sin_port = htons(ports[i]);
		sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		conf.nslen[i] = sizeof(*sa);
	}
	conf.nns = n;
	conf.timeout_s = 1;
	conf.attempts = attempts;
	rlb_dns_stub_use(&conf);
}

static uint8_t bufs[8][4096];
static struct rlb_dns_question qs[8];

/* Ask n questions (a0.rlb.test ...) of type A; how long it took. */
static int64_t ask(size_t n, int64_t deadline)
{
	static char names[8][32];
	int64_t t0 = mono_ms();

	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "a%zu.rlb.test", i);
		qs[i] = (struct rlb_dns_question){.name = names[i],
						  .type = RLB_DNS_T_A,
						  .buf = bufs[i],
						  .cap = sizeof(bufs[i])};
	}
	errno = EBADMSG;
	rlb_dns_stub.ask(qs, n, deadline);
	assert_int_equal(errno, EBADMSG);
	return mono_ms() - t0;
}

/* The one A record of question i's answer. */
static void assert_answered(size_t i, int rcode)
{
	struct rlb_dns_reply r;

	assert_true(qs[i].len > 0);
	assert_int_equal(rlb_dns_parse(qs[i].buf, (size_t)qs[i].len, qs[i].name,
				       RLB_DNS_T_A, &r),
			 0);
	assert_int_equal(r.rcode, rcode);
	if (rcode == 0) {
		assert_int_equal(r.nanswer, 1);
		assert_int_equal(r.records[0].addr.bytes[3], 9);
	}
	rlb_dns_reply_free(&r);
}

/* Questions are asked together: 6 answers 300 ms late take 300 ms. */
static void test_dns_client_questions_in_parallel(void **state)
{
	int64_t took;

	use_servers(&srv.port, 1, 1);
	behave(300, 0, false, false);
	took = ask(6, INT64_MAX);
	for (size_t i = 0; i < 6; i++)
		assert_answered(i, 0);
	assert_true(took >= 290);
	assert_true(took < 600);
	assert_int_equal(srv.udp_asked, 6);
}

/* A truncated UDP answer is asked again over TCP; forgeries dropped. */
static void test_dns_client_truncated_goes_tcp(void **state)
{
	use_servers(&srv.port, 1, 1);
	behave(0, 0, true, true);
	ask(2, INT64_MAX);
	assert_answered(0, 0);
	assert_answered(1, 0);
	assert_int_equal(srv.tcp_asked, 2);
}

/* A silent first server costs its wait; a closed one nothing. */
static void test_dns_client_next_server(void **state)
{
	int silent = bind_port(SOCK_DGRAM, 0),
	    closed = bind_port(SOCK_DGRAM, 0);
	uint16_t ports[2] = {port_of(silent), srv.port};
	int64_t took;

	assert_true(silent >= 0 && closed >= 0);
	behave(0, 0, false, false);
	use_servers(ports, 2, 1);
	took = ask(3, INT64_MAX);
	assert_answered(0, 0);
	assert_answered(2, 0);
	assert_true(took >= 990 && took < 1500);
	/* A port with nobody: refused at once (ICMP), the next asked. */
	ports[0] = port_of(closed);
	close(closed);
	use_servers(ports, 2, 1);
	took = ask(3, INT64_MAX);
	assert_answered(1, 0);
	assert_true(took < 500);
	close(silent);
}

/* SERVFAIL passes the question on; when all say so, that is the answer. */
static void test_dns_client_servfail_next_then_kept(void **state)
{
	uint16_t ports[2] = {srv.port, srv.port};

	behave(0, 2, false, false);
	use_servers(ports, 2, 1);
	ask(1, INT64_MAX);
	assert_answered(0, 2);
	assert_int_equal(srv.udp_asked, 2);
}

/* Nobody answers: every question fails by its deadline, or by the
 * schedule (attempts x wait). */
static void test_dns_client_deadline_and_schedule(void **state)
{
	int silent = bind_port(SOCK_DGRAM, 0);
	uint16_t port = port_of(silent);
	int64_t took;

	use_servers(&port, 1, 2);
	took = ask(4, mono_ms() + 300);
	assert_true(took >= 290 && took < 700);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(qs[i].len, -1);
		assert_int_equal(qs[i].err, ETIMEDOUT);
	}
	took = ask(4, INT64_MAX);
	assert_true(took >= 1990 && took < 2600);
	close(silent);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dns_client_query_wire),
		cmocka_unit_test(test_dns_client_reply_of_matches_question),
		cmocka_unit_test(test_dns_client_resolv_conf),
		cmocka_unit_test(test_dns_client_budget_is_glibcs),
		cmocka_unit_test(test_dns_client_questions_in_parallel),
		cmocka_unit_test(test_dns_client_truncated_goes_tcp),
		cmocka_unit_test(test_dns_client_next_server),
		cmocka_unit_test(test_dns_client_servfail_next_then_kept),
		cmocka_unit_test(test_dns_client_deadline_and_schedule),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
