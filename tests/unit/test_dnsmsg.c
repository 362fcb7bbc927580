/* test_dnsmsg.c - unit tests of dnsmsg.c: DNS messages built byte by byte,
 * well formed, cut off and malformed. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"

#define F_QR	0x8000
#define F_AA	0x0400
#define F_TC	0x0200
#define F_RD	0x0100
#define F_RA	0x0080
#define F_REPLY (F_QR | F_RD | F_RA)

#define CLASS_IN 1
#define CLASS_CH 3
#define TYPE_SOA 6
#define TYPE_TXT 16
#define TYPE_OPT 41

#define MSG_MAX (1 << 17) /* past 64 KiB: the parser takes any length */
#define QNAME	12	  /* offset of the question's name */

/* ------------------------------------------------------------------ */
/* A message builder: a header, one question, then records whose names
 * are labels followed by a compression pointer or the root. */

struct msg {
	uint8_t *b;
	size_t n;
	const char *qname; /* the question, as msg_new() was given it */
	uint16_t qtype;
	int sec;	    /* the next records' section: 0 an, 1 ns, 2 ar */
	uint16_t count[3];  /* records per section, written by done() */
	size_t rdlength_at; /* the open record's rdlength */
};

static void put8(struct msg *m, unsigned v)
{
	assert_true(m->n < MSG_MAX);
	m->b[m->n++] = (uint8_t)v;
}

static void put16(struct msg *m, unsigned v)
{
	put8(m, v >> 8);
	put8(m, v);
}

static void put32(struct msg *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void put_raw(struct msg *m, const void *p, size_t n)
{
	assert_true(m->n + n <= MSG_MAX);
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

/*
 * The labels of dotted ("" for none), then a pointer to offset ptr, or
 * the root when ptr is 0 (the header, never a valid target). Returns the
 * name's offset.
 */
static size_t put_name(struct msg *m, const char *dotted, size_t ptr)
{
	size_t at = m->n;

	while (*dotted) {
		size_t len = strcspn(dotted, ".");

		put8(m, len);
		put_raw(m, dotted, len);
		dotted += len;
		if (*dotted)
			dotted++;
	}
	if (ptr)
		put16(m, 0xc000 | ptr);
	else
		put8(m, 0);
	return at;
}

/* A header with these flags and one question (qdcount 1). */
static struct msg *msg_new(uint16_t flags, const char *qname, uint16_t qtype)
{
	struct msg *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->b = calloc(1, MSG_MAX);
	assert_non_null(m->b);
	m->qname = qname;
	m->qtype = qtype;
	put16(m, 0x1234);
	put16(m, flags);
	put16(m, 1);
	put16(m, 0);
	put16(m, 0);
	put16(m, 0);
	put_name(m, qname, 0);
	put16(m, qtype);
	put16(m, CLASS_IN);
	return m;
}

static void msg_free(struct msg *m)
{
	free(m->b);
	free(m);
}

/* The fixed part of a record whose owner was just written; its rdata
 * follows, closed by rr_end(). */
static void rr_begin(struct msg *m, uint16_t type, uint16_t class, uint32_t ttl)
{
	put16(m, type);
	put16(m, class);
	put32(m, ttl);
	m->rdlength_at = m->n;
	put16(m, 0);
	m->count[m->sec]++;
}

static void rr_end(struct msg *m)
{
	size_t len = m->n - m->rdlength_at - 2;

	m->b[m->rdlength_at] = (uint8_t)(len >> 8);
	m->b[m->rdlength_at + 1] = (uint8_t)len;
}

/* The section counts into the header; returns the length. */
static size_t done(struct msg *m)
{
	for (int i = 0; i < 3; i++) {
		m->b[6 + 2 * i] = (uint8_t)(m->count[i] >> 8);
		m->b[7 + 2 * i] = (uint8_t)m->count[i];
	}
	return m->n;
}

/* An A or AAAA record of class IN, owned by owner + pointer oref. */
static void rr_addr(struct msg *m, const char *owner, size_t oref, uint32_t ttl,
		    const char *ip)
{
	uint8_t a[16];
	bool v6 = strchr(ip, ':') != NULL;

	assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, ip, a), 1);
	put_name(m, owner, oref);
	rr_begin(m, v6 ? RLB_DNS_T_AAAA : RLB_DNS_T_A, CLASS_IN, ttl);
	put_raw(m, a, v6 ? 16 : 4);
	rr_end(m);
}

/* An SRV of class IN; returns the offset of its target. */
static size_t rr_srv(struct msg *m, size_t oref, uint32_t ttl, unsigned prio,
		     unsigned weight, unsigned port, const char *target,
		     size_t tref)
{
	size_t at;

	put_name(m, "", oref);
	rr_begin(m, RLB_DNS_T_SRV, CLASS_IN, ttl);
	put16(m, prio);
	put16(m, weight);
	put16(m, port);
	at = put_name(m, target, tref);
	rr_end(m);
	return at;
}

/* A CNAME of class IN from owner + oref; returns its target's offset. */
static size_t rr_cname(struct msg *m, const char *owner, size_t oref,
		       uint32_t ttl, const char *target, size_t tref)
{
	size_t at;

	put_name(m, owner, oref);
	rr_begin(m, RLB_DNS_T_CNAME, CLASS_IN, ttl);
	at = put_name(m, target, tref);
	rr_end(m);
	return at;
}

/* An SOA for the authority section of a negative answer. */
static void rr_soa(struct msg *m, size_t oref)
{
	put_name(m, "", oref);
	rr_begin(m, TYPE_SOA, CLASS_IN, 900);
	put_name(m, "ns1", oref);
	put_name(m, "hostmaster", oref);
	for (int i = 0; i < 5; i++)
		put32(m, 3600);
	rr_end(m);
}

/* The EDNS OPT pseudo-record of the additional section. */
static void rr_opt(struct msg *m)
{
	put8(m, 0);
	rr_begin(m, TYPE_OPT, 1232, 0);
	rr_end(m);
}

/* The rest of an A record (TTL 1, 0.0.0.1) whose owner was just written. */
static void rr_a_rest(struct msg *m)
{
	rr_begin(m, RLB_DNS_T_A, CLASS_IN, 1);
	put32(m, 1);
	rr_end(m);
}

static int parse(struct msg *m, const char *qname, uint16_t qtype,
		 struct rlb_dns_reply *r)
{
	return rlb_dns_parse(m->b, done(m), qname, qtype, r);
}

/* Parse as the answer to m's own question, which must succeed. */
static void parse_ok(struct msg *m, struct rlb_dns_reply *r)
{
	assert_int_equal(parse(m, m->qname, m->qtype, r), 0);
}

/* Parse as the answer to (qname, qtype) and expect -EINVAL with nothing
 * in the reply; frees m. */
static void expect_einval_as(struct msg *m, const char *qname, uint16_t qtype)
{
	struct rlb_dns_reply r;

	memset(&r, 0xa5, sizeof(r));
	assert_int_equal(parse(m, qname, qtype, &r), -EINVAL);
	assert_null(r.records);
	assert_int_equal(r.n, 0);
	msg_free(m);
}

/* The same, as the answer to m's own question. */
static void expect_einval(struct msg *m)
{
	expect_einval_as(m, m->qname, m->qtype);
}

static void assert_addr(const struct rlb_dns_record *rec, const char *ip)
{
	uint8_t a[16];
	int af = strchr(ip, ':') ? AF_INET6 : AF_INET;

	assert_int_equal(inet_pton(af, ip, a), 1);
	assert_int_equal(rec->type,
			 af == AF_INET ? RLB_DNS_T_A : RLB_DNS_T_AAAA);
	assert_int_equal(rec->addr.family, af);
	assert_memory_equal(rec->addr.bytes, a, af == AF_INET ? 4 : 16);
}

/* ------------------------------------------------------------------ */
/* Answers */

/* The SRV message of a service with three targets, their addresses in
 * the additional section, compressed as a server compresses them. */
static struct msg *srv_message(void)
{
	struct msg *m =
		msg_new(F_REPLY | F_AA, "_db._tcp.example.com", RLB_DNS_T_SRV);
	size_t zone = QNAME + 4 + 5; /* "example.com" in the question */
	size_t t1, t2, t3;

	t1 = rr_srv(m, QNAME, 300, 10, 60, 9000, "db1", zone);
	t2 = rr_srv(m, QNAME, 200, 10, 40, 9001, "db2", zone);
	t3 = rr_srv(m, QNAME, 400, 20, 0, 9002, "db3", zone);
	m->sec = 2;
	rr_addr(m, "", t1, 60, "192.0.2.1");
	rr_addr(m, "", t2, 60, "192.0.2.2");
	rr_addr(m, "", t3, 60, "2001:db8::3");
	rr_opt(m);
	return m;
}

static void test_dnsmsg_srv_targets_and_additional(void **state)
{
	struct msg *m = srv_message();
	struct rlb_dns_reply r;

	assert_int_equal(parse(m, "_db._tcp.example.com.", RLB_DNS_T_SRV, &r),
			 0);
	assert_int_equal(r.rcode, RLB_DNS_RCODE_NOERROR);
	assert_false(r.truncated);
	assert_int_equal(r.nanswer, 3);
	assert_int_equal(r.n, 6);
	assert_int_equal(r.min_ttl, 200);
	assert_int_equal(r.records[0].type, RLB_DNS_T_SRV);
	assert_string_equal(r.records[0].name, "db1.example.com");
	assert_int_equal(r.records[0].priority, 10);
	assert_int_equal(r.records[0].weight, 60);
	assert_int_equal(r.records[0].port, 9000);
	assert_int_equal(r.records[0].ttl, 300);
	assert_string_equal(r.records[1].name, "db2.example.com");
	assert_int_equal(r.records[1].port, 9001);
	assert_string_equal(r.records[2].name, "db3.example.com");
	assert_int_equal(r.records[2].priority, 20);
	assert_int_equal(r.records[2].weight, 0);
	assert_int_equal(r.records[2].port, 9002);
	assert_addr(&r.records[3], "192.0.2.1");
	assert_string_equal(r.records[3].name, "db1.example.com");
	assert_int_equal(r.records[3].ttl, 60);
	assert_addr(&r.records[4], "192.0.2.2");
	assert_string_equal(r.records[4].name, "db2.example.com");
	assert_addr(&r.records[5], "2001:db8::3");
	assert_string_equal(r.records[5].name, "db3.example.com");
	rlb_dns_reply_free(&r);
	assert_null(r.records);
	assert_int_equal(r.n, 0);
	msg_free(m);
}

static void test_dnsmsg_a_answers(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;

	rr_addr(m, "", QNAME, 30, "198.51.100.7");
	rr_addr(m, "", QNAME, 30, "198.51.100.8");
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 2);
	assert_int_equal(r.n, 2);
	assert_addr(&r.records[0], "198.51.100.7");
	assert_addr(&r.records[1], "198.51.100.8");
	assert_string_equal(r.records[1].name, "db.example.com");
	assert_int_equal(r.records[0].port, 0);
	assert_int_equal(r.min_ttl, 30);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_aaaa_answers(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_AAAA);
	struct rlb_dns_reply r;

	rr_addr(m, "", QNAME, 30, "2001:db8::1");
	rr_addr(m, "", QNAME, 30, "198.51.100.1"); /* not asked for */
	rr_addr(m, "", QNAME, 20, "2001:db8::2");
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 2);
	assert_int_equal(r.n, 2);
	assert_addr(&r.records[0], "2001:db8::1");
	assert_addr(&r.records[1], "2001:db8::2");
	assert_int_equal(r.min_ttl, 20);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_cname_chain_to_a(void **state)
{
	struct msg *m = msg_new(F_REPLY, "www.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t edge, origin;

	edge = rr_cname(m, "", QNAME, 300, "edge", QNAME + 4);
	origin = rr_cname(m, "", edge, 100, "origin.cdn.example.net", 0);
	rr_addr(m, "", origin, 200, "203.0.113.5");
	rr_addr(m, "", origin, 200, "203.0.113.6");
	rr_addr(m, "", QNAME + 4, 5, "203.0.113.99"); /* example.com's */
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 2);
	assert_addr(&r.records[0], "203.0.113.5");
	assert_string_equal(r.records[0].name, "origin.cdn.example.net");
	assert_addr(&r.records[1], "203.0.113.6");
	assert_int_equal(r.min_ttl, 100);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_cname_chain_any_order(void **state)
{
	struct msg *m = msg_new(F_REPLY, "www.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t b, c;

	/* The address first, then c -> final, then b -> c, then www -> b. */
	put_name(m, "final.example.org", 0);
	rr_begin(m, RLB_DNS_T_A, CLASS_IN, 50);
	put_raw(m, "\xc0\x00\x02\x01", 4);
	rr_end(m);
	c = m->n;
	rr_cname(m, "c.example.org", 0, 70, "final.example.org", 0);
	b = m->n;
	rr_cname(m, "b.example.org", 0, 60, "", c);
	rr_cname(m, "", QNAME, 80, "", b);
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 1);
	assert_addr(&r.records[0], "192.0.2.1");
	assert_string_equal(r.records[0].name, "final.example.org");
	assert_int_equal(r.min_ttl, 50);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_cname_loop(void **state)
{
	struct msg *m = msg_new(F_REPLY, "a.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t b;

	b = rr_cname(m, "", QNAME, 10, "b", QNAME + 2);
	rr_cname(m, "", b, 20, "", QNAME);
	rr_addr(m, "other.example.com", 0, 5, "192.0.2.9");
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.min_ttl, 10);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* A chain longer than the parser follows: the names past it are not
 * reached, so their addresses are not the answer. */
static void test_dnsmsg_cname_chain_bounded(void **state)
{
	struct msg *m = msg_new(F_REPLY, "n0.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	char owner[16], target[16];

	for (int i = 0; i < 20; i++) {
		snprintf(owner, sizeof(owner), "n%d", i);
		snprintf(target, sizeof(target), "n%d", i + 1);
		rr_cname(m, owner, QNAME + 3, 100, target, QNAME + 3);
		snprintf(owner, sizeof(owner), "n%d", i + 1);
		put_name(m, owner, QNAME + 3);
		rr_begin(m, RLB_DNS_T_A, CLASS_IN, 100);
		put32(m, 0xc0000200 | (uint32_t)(i + 1));
		rr_end(m);
	}
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 16); /* n1 .. n16 */
	assert_string_equal(r.records[0].name, "n1.example.com");
	assert_string_equal(r.records[15].name, "n16.example.com");
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_nxdomain(void **state)
{
	struct msg *m = msg_new(F_REPLY | RLB_DNS_RCODE_NXDOMAIN,
				"gone.example.com", RLB_DNS_T_SRV);
	struct rlb_dns_reply r;

	m->sec = 1;
	rr_soa(m, QNAME + 5);
	parse_ok(m, &r);
	assert_int_equal(r.rcode, RLB_DNS_RCODE_NXDOMAIN);
	assert_int_equal(r.nanswer, 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.min_ttl, UINT32_MAX);
	rlb_dns_reply_free(&r);
	msg_free(m);

	/* An error still answers this question only. */
	m = msg_new(F_REPLY | RLB_DNS_RCODE_SERVFAIL, "x.example.com",
		    RLB_DNS_T_A);
	parse_ok(m, &r);
	assert_int_equal(r.rcode, RLB_DNS_RCODE_SERVFAIL);
	rlb_dns_reply_free(&r);
	expect_einval_as(m, "y.example.com", RLB_DNS_T_A);
}

static void test_dnsmsg_nodata(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_AAAA);
	struct rlb_dns_reply r;

	m->sec = 1;
	rr_soa(m, QNAME + 3);
	m->sec = 2;
	rr_opt(m);
	parse_ok(m, &r);
	assert_int_equal(r.rcode, RLB_DNS_RCODE_NOERROR);
	assert_int_equal(r.nanswer, 0);
	assert_int_equal(r.n, 0);
	assert_null(r.records);
	assert_int_equal(r.min_ttl, UINT32_MAX);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* ------------------------------------------------------------------ */
/* Cut off: with TC what is whole, without it nothing */

static void test_dnsmsg_truncated_partial_record(void **state)
{
	struct msg *m = msg_new(F_REPLY | F_TC, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t len;

	rr_addr(m, "", QNAME, 30, "192.0.2.1");
	rr_addr(m, "", QNAME, 30, "192.0.2.2");
	rr_addr(m, "", QNAME, 30, "192.0.2.3");
	len = done(m) - 2; /* the third address cut in the middle */
	assert_int_equal(
		rlb_dns_parse(m->b, len, "db.example.com", RLB_DNS_T_A, &r), 0);
	assert_true(r.truncated);
	assert_int_equal(r.nanswer, 2);
	assert_int_equal(r.n, 2);
	assert_addr(&r.records[1], "192.0.2.2");
	rlb_dns_reply_free(&r);

	/* TC with records missing whole: the same. */
	m->b[7] = 5;
	assert_int_equal(
		rlb_dns_parse(m->b, m->n, "db.example.com", RLB_DNS_T_A, &r),
		0);
	assert_int_equal(r.nanswer, 3);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_cut_without_tc(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;

	rr_addr(m, "", QNAME, 30, "192.0.2.1");
	rr_addr(m, "", QNAME, 30, "192.0.2.2");
	assert_int_equal(rlb_dns_parse(m->b, done(m) - 1, "db.example.com",
				       RLB_DNS_T_A, &r),
			 -EINVAL);
	/* A record counted but absent. */
	m->b[7] = 3;
	assert_int_equal(
		rlb_dns_parse(m->b, m->n, "db.example.com", RLB_DNS_T_A, &r),
		-EINVAL);
	msg_free(m);
}

/* Every cut of a real-looking message: with TC each one after the
 * question parses, to fewer records; without TC none does. */
static void test_dnsmsg_every_cut(void **state)
{
	struct msg *m = srv_message();
	size_t len = done(m), question = QNAME + 22 + 4;
	struct rlb_dns_reply r;

	for (size_t cut = 0; cut < len; cut++) {
		int rc;

		m->b[2] &= ~(F_TC >> 8);
		rc = rlb_dns_parse(m->b, cut, "_db._tcp.example.com",
				   RLB_DNS_T_SRV, &r);
		assert_int_equal(rc, -EINVAL);
		m->b[2] |= F_TC >> 8;
		rc = rlb_dns_parse(m->b, cut, "_db._tcp.example.com",
				   RLB_DNS_T_SRV, &r);
		assert_int_equal(rc, cut < question ? -EINVAL : 0);
		if (rc == 0) {
			assert_true(r.truncated);
			assert_true(r.n <= 6);
			assert_true(r.nanswer <= 3);
		}
		rlb_dns_reply_free(&r);
	}
	msg_free(m);
}

static void test_dnsmsg_rdlength_overruns(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;

	rr_addr(m, "", QNAME, 30, "192.0.2.1");
	put_name(m, "", QNAME);
	rr_begin(m, TYPE_TXT, CLASS_IN, 30);
	put_raw(m,
		"\x03"
		"abc",
		4);
	rr_end(m);
	m->b[m->rdlength_at + 1] = 5; /* one byte past the end */
	assert_int_equal(parse(m, "db.example.com", RLB_DNS_T_A, &r), -EINVAL);
	m->b[2] |= F_TC >> 8;
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 1);
	rlb_dns_reply_free(&r);
	m->b[m->rdlength_at] = 0xff;
	parse_ok(m, &r);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* ------------------------------------------------------------------ */
/* Malformed names */

static void test_dnsmsg_pointer_loop(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	size_t at = m->n;

	/* A pointer to itself. */
	put16(m, 0xc000 | at);
	rr_a_rest(m);
	expect_einval(m);

	/* A label, then a pointer back to that label. */
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	at = put_name(m, "x", 0);
	m->n--;
	put16(m, 0xc000 | at);
	rr_a_rest(m);
	expect_einval(m);

	/* Two pointers into each other: the second points forward. */
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	at = m->n;
	put16(m, 0xc000 | (at + 2));
	put16(m, 0xc000 | at);
	rr_a_rest(m);
	expect_einval(m);
}

/* A pointer back to labels that run on over the pointer itself. */
static void test_dnsmsg_pointer_into_itself(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	size_t at;

	put_name(m, "", QNAME);
	rr_begin(m, TYPE_TXT, CLASS_IN, 1);
	put_raw(m, "\x01\x02", 2); /* its last byte: a label of 2 */
	rr_end(m);
	at = m->n;
	put16(m, 0xc000 | (at - 1));
	rr_a_rest(m);
	expect_einval(m);
}

static void test_dnsmsg_forward_pointer(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	size_t at = m->n;

	/* The owner points at the A record's owner that comes after it. */
	put16(m, 0xc000 | (at + 16));
	rr_a_rest(m);
	rr_addr(m, "", QNAME, 1, "192.0.2.1");
	expect_einval(m);

	/* An SRV target pointing at the next record. */
	m = msg_new(F_REPLY, "_s._tcp.example.com", RLB_DNS_T_SRV);
	rr_srv(m, QNAME, 1, 0, 0, 1, "", m->n + 12 + 6 + 2);
	rr_srv(m, QNAME, 1, 0, 0, 1, "t", QNAME + 8);
	expect_einval(m);
}

static void test_dnsmsg_pointer_out_of_range(void **state)
{
	static const unsigned targets[] = {0x3fff, 0, 5, QNAME - 1};

	for (size_t i = 0; i < sizeof(targets) / sizeof(*targets); i++) {
		struct msg *m =
			msg_new(F_REPLY | F_TC, "db.example.com", RLB_DNS_T_A);

		put16(m, 0xc000 | targets[i]);
		rr_a_rest(m);
		expect_einval(m);
	}
}

static void test_dnsmsg_label_types(void **state)
{
	static const uint8_t bad[] = {64, 0x40 | 1, 0x80, 0xbf};
	char label[0xbf];

	memset(label, 'a', sizeof(label));
	for (size_t i = 0; i < sizeof(bad); i++) {
		struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);

		put8(m, bad[i]);
		put_raw(m, label, bad[i]);
		put8(m, 0);
		rr_a_rest(m);
		expect_einval(m);
	}
}

static void test_dnsmsg_name_too_long(void **state)
{
	char l63[64], name[300];
	struct rlb_dns_reply r;
	struct msg *m;
	size_t at;

	memset(l63, 'a', 63);
	l63[63] = '\0';
	/* 4 labels of 63 and a label of 1: 4 * 64 + 2 + 1 = 259 bytes. */
	snprintf(name, sizeof(name), "%s.%s.%s.%s.b", l63, l63, l63, l63);
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	rr_addr(m, name, 0, 1, "192.0.2.1");
	expect_einval(m);

	/* 3 * 64 + 62 + 1 = 255: the longest there is, and it parses. */
	snprintf(name, sizeof(name), "%s.%s.%s.%.61s", l63, l63, l63, l63);
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	rr_addr(m, name, 0, 1, "192.0.2.1");
	parse_ok(m, &r);
	rlb_dns_reply_free(&r);
	msg_free(m);

	/* Too long only once the pointers are followed: 64 + 64 * 3 + 16. */
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	snprintf(name, sizeof(name), "%s.%s.%s", l63, l63, l63);
	at = m->n;
	rr_addr(m, name, QNAME, 1, "192.0.2.1");
	rr_addr(m, l63, at, 1, "192.0.2.2");
	expect_einval(m);
}

/* ------------------------------------------------------------------ */
/* Malformed records */

static void test_dnsmsg_a_rdlength_5(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);

	rr_addr(m, "", QNAME, 30, "192.0.2.1");
	put_name(m, "", QNAME);
	rr_begin(m, RLB_DNS_T_A, CLASS_IN, 30);
	put_raw(m, "\xc0\x00\x02\x02\x00", 5);
	rr_end(m);
	expect_einval(m);
}

/* Each type's rdata shape, in any section: one bad record is enough. */
static void test_dnsmsg_rdata_shapes(void **state)
{
	static const struct {
		uint16_t type;
		const char *rdata;
		size_t len;
	} bad[] = {
		{RLB_DNS_T_AAAA, "\x20\x01\x0d\xb8", 4},
		{RLB_DNS_T_A, "", 0},
		{RLB_DNS_T_SRV, "\0\1\0\1\0\1", 6},
		/* target "abc" overflows 8 bytes */
		{RLB_DNS_T_SRV, "\0\1\0\1\0\1\3a", 8},
		/* target then one byte more */
		{RLB_DNS_T_SRV, "\0\1\0\1\0\1\0\0", 8},
		{RLB_DNS_T_CNAME, "", 0},
		{RLB_DNS_T_CNAME, "\1a\0\0", 4},
		{RLB_DNS_T_CNAME, "\3ab", 3},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		for (int sec = 0; sec < 3; sec++) {
			struct msg *m =
				msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);

			m->sec = sec;
			put_name(m, "", QNAME);
			rr_begin(m, bad[i].type, CLASS_IN, 1);
			put_raw(m, bad[i].rdata, bad[i].len);
			rr_end(m);
			expect_einval(m);
		}
	}
}

/* ------------------------------------------------------------------ */
/* Names and the question */

static void test_dnsmsg_srv_target_in_question(void **state)
{
	struct msg *m = msg_new(F_REPLY, "_db._tcp.example.com", RLB_DNS_T_SRV);
	struct rlb_dns_reply r;

	rr_srv(m, QNAME, 60, 1, 1, 5432, "", QNAME + 9);   /* example.com */
	rr_srv(m, QNAME, 60, 1, 1, 5433, "", QNAME);	   /* the qname */
	rr_srv(m, QNAME, 60, 1, 1, 5434, "pg", QNAME + 4); /* pg._tcp... */
	rr_srv(m, QNAME, 60, 1, 1, 5435, "", 0);	   /* "." */
	assert_int_equal(parse(m, "_DB._tcp.Example.com", RLB_DNS_T_SRV, &r),
			 0);
	assert_int_equal(r.nanswer, 4);
	assert_string_equal(r.records[0].name, "example.com");
	assert_string_equal(r.records[1].name, "_db._tcp.example.com");
	assert_string_equal(r.records[2].name, "pg._tcp.example.com");
	assert_string_equal(r.records[3].name, "");
	assert_int_equal(r.records[3].port, 5435);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* Targets that are no host name are skipped, not the message. */
static void test_dnsmsg_srv_target_not_plain_skipped(void **state)
{
	static const char *const weird[] = {"a.b",  "a b",   "a\200",
					    "\0ab", "a\377", "a*"};
	struct msg *m = msg_new(F_REPLY, "_db._tcp.example.com", RLB_DNS_T_SRV);
	struct rlb_dns_reply r;

	rr_srv(m, QNAME, 60, 1, 1, 1, "good1", QNAME + 9);
	for (size_t i = 0; i < sizeof(weird) / sizeof(*weird); i++) {
		put_name(m, "", QNAME);
		rr_begin(m, RLB_DNS_T_SRV, CLASS_IN, 1);
		put_raw(m, "\0\1\0\1\0\2", 6);
		put8(m, 3);
		put_raw(m, weird[i], 3);
		put16(m, 0xc000 | (QNAME + 9));
		rr_end(m);
	}
	rr_srv(m, QNAME, 60, 1, 1, 3, "good_2-x", QNAME + 9);
	m->sec = 2;
	rr_addr(m, "a\001b", QNAME + 9, 5, "192.0.2.1"); /* skipped too */
	rr_addr(m, "good1", QNAME + 9, 5, "192.0.2.2");
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 2);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.records[0].name, "good1.example.com");
	assert_string_equal(r.records[1].name, "good_2-x.example.com");
	assert_int_equal(r.records[1].port, 3);
	assert_string_equal(r.records[2].name, "good1.example.com");
	assert_int_equal(r.min_ttl, 60);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_question_mismatch(void **state)
{
	struct rlb_dns_reply r;
	struct msg *m;

	expect_einval_as(msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A),
			 "db.example.org", RLB_DNS_T_A);
	expect_einval_as(msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A),
			 "db.example.com", RLB_DNS_T_AAAA);
	expect_einval_as(msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A),
			 "example.com", RLB_DNS_T_A);
	expect_einval_as(msg_new(F_REPLY, "a.db.example.com", RLB_DNS_T_A),
			 "db.example.com", RLB_DNS_T_A);
	/* A dot inside a label is not two labels: "db.example" "com". */
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	m->b[QNAME] = 10;
	m->b[QNAME + 3] = '.';
	expect_einval(m);

	/* Class CH. */
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	m->b[m->n - 1] = CLASS_CH;
	expect_einval(m);

	/* No question, two questions. */
	for (int qd = 0; qd <= 2; qd += 2) {
		m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
		m->b[5] = (uint8_t)qd;
		expect_einval(m);
	}

	/* The question cut off, even with TC; a header cut off. */
	m = msg_new(F_REPLY | F_TC, "db.example.com", RLB_DNS_T_A);
	for (size_t len = 0; len < m->n; len++)
		assert_int_equal(rlb_dns_parse(m->b, len, "db.example.com",
					       RLB_DNS_T_A, &r),
				 -EINVAL);
	assert_int_equal(
		rlb_dns_parse(m->b, m->n, "db.example.com", RLB_DNS_T_A, &r),
		0);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_not_a_response(void **state)
{
	struct msg *m = msg_new(F_RD, "db.example.com", RLB_DNS_T_A);

	rr_addr(m, "", QNAME, 30, "192.0.2.1");
	expect_einval(m);
	/* Opcode 2 (STATUS), 5 (UPDATE). */
	expect_einval(
		msg_new(F_REPLY | 2 << 11, "db.example.com", RLB_DNS_T_A));
	expect_einval(
		msg_new(F_REPLY | 5 << 11, "db.example.com", RLB_DNS_T_A));
}

static void test_dnsmsg_other_class_skipped(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;

	/* CHAOS's A is a name and an address: not checked, skipped. */
	put_name(m, "", QNAME);
	rr_begin(m, RLB_DNS_T_A, CLASS_CH, 1);
	put_name(m, "ch", 0);
	put16(m, 0x1234);
	rr_end(m);
	put_name(m, "", QNAME);
	rr_begin(m, TYPE_TXT, CLASS_IN, 1);
	put_raw(m, "\x02hi", 3);
	rr_end(m);
	rr_addr(m, "", QNAME, 40, "192.0.2.1");
	m->sec = 2;
	put_name(m, "", QNAME);
	rr_begin(m, RLB_DNS_T_AAAA, CLASS_CH, 1);
	rr_end(m);
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 1);
	assert_int_equal(r.n, 1);
	assert_addr(&r.records[0], "192.0.2.1");
	assert_int_equal(r.min_ttl, 40);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_mixed_case_owner(void **state)
{
	struct msg *m = msg_new(F_REPLY, "Db.ExAmPle.CoM", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t cname;

	rr_addr(m, "DB.EXAMPLE.COM", 0, 30, "192.0.2.1");
	rr_addr(m, "dB", QNAME + 3, 30, "192.0.2.2");
	cname = rr_cname(m, "db.example.COM", 0, 30, "Alias.Example.Net", 0);
	rr_addr(m, "ALIAS.example.NET", 0, 30, "192.0.2.3");
	rr_addr(m, "", cname, 30, "192.0.2.4");
	assert_int_equal(parse(m, "db.EXAMPLE.com.", RLB_DNS_T_A, &r), 0);
	assert_int_equal(r.nanswer, 4);
	assert_string_equal(r.records[0].name, "db.example.com");
	assert_string_equal(r.records[1].name, "db.example.com");
	assert_string_equal(r.records[2].name, "alias.example.net");
	assert_string_equal(r.records[3].name, "alias.example.net");
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* ------------------------------------------------------------------ */
/* Size */

static void test_dnsmsg_500_srv_records(void **state)
{
	struct msg *m = msg_new(F_REPLY, "_db._tcp.example.com", RLB_DNS_T_SRV);
	struct rlb_dns_reply r;
	size_t targets[500];
	char name[32];

	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "r%03d", i);
		targets[i] = rr_srv(m, QNAME, 600 - (uint32_t)i, (unsigned)i, 1,
				    9000 + (unsigned)i, name, QNAME + 9);
	}
	m->sec = 2;
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "10.0.%d.%d", i / 256, i % 256);
		rr_addr(m, "", targets[i], 60, name);
	}
	assert_true(done(m) < 65536);
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 500);
	assert_int_equal(r.n, 1000);
	assert_int_equal(r.min_ttl, 101);
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "r%03d.example.com", i);
		assert_string_equal(r.records[i].name, name);
		assert_int_equal(r.records[i].port, 9000 + i);
		assert_int_equal(r.records[i].priority, i);
		assert_string_equal(r.records[500 + i].name, name);
		assert_int_equal(r.records[500 + i].addr.bytes[3], i % 256);
	}
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* More answers than a cluster may have: the first RLB_MAX_REPLICAS. */
static void test_dnsmsg_answers_capped(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;

	for (uint32_t i = 0; i < RLB_MAX_REPLICAS + 904; i++) {
		put_name(m, "", QNAME);
		rr_begin(m, RLB_DNS_T_A, CLASS_IN, 10000 - i);
		put32(m, 0x0a000000 | i);
		rr_end(m);
	}
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, RLB_MAX_REPLICAS);
	assert_int_equal(r.n, RLB_MAX_REPLICAS);
	assert_int_equal(r.records[RLB_MAX_REPLICAS - 1].addr.bytes[2],
			 (RLB_MAX_REPLICAS - 1) >> 8);
	assert_int_equal(r.min_ttl, 10000 - (RLB_MAX_REPLICAS - 1));
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_min_ttl(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t alias;

	rr_addr(m, "", QNAME, 300, "192.0.2.1");
	alias = rr_cname(m, "", QNAME, 45, "alias", QNAME + 3);
	rr_addr(m, "", alias, 120, "192.0.2.2");
	rr_cname(m, "unrelated", QNAME + 3, 1, "x", QNAME + 3); /* not ours */
	rr_addr(m, "other", QNAME + 3, 2, "192.0.2.3");		/* neither */
	m->sec = 1;
	rr_soa(m, QNAME + 3); /* authority: not the answer's */
	m->sec = 2;
	rr_addr(m, "", QNAME, 3, "192.0.2.4"); /* additional: not either */
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 2);
	assert_int_equal(r.n, 3);
	assert_int_equal(r.min_ttl, 45);
	rlb_dns_reply_free(&r);
	msg_free(m);

	/* TTLs with the top bit set stay as the server sent them. */
	m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	rr_addr(m, "", QNAME, 0x80000000u, "192.0.2.1");
	parse_ok(m, &r);
	assert_int_equal(r.min_ttl, 0x80000000u);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

/* ------------------------------------------------------------------ */
/* Real messages */

/*
 * Answers of dnsmasq 2.90 over UDP, without EDNS, in tests/data/dns/,
 * to a server started as
 *
 *   dnsmasq --port=5399 --no-resolv --no-hosts --local=/example.test/
 *     --local-ttl=60
 *     --srv-host=_db._tcp.example.test,db1.example.test,9000,10,60
 *     --srv-host=_db._tcp.example.test,db2.example.test,9001,10,40
 *     --srv-host=_db._tcp.example.test,db3.example.test,9002,20,0
 *     --host-record=db1.example.test,192.0.2.1,2001:db8::1
 *     --host-record=db2.example.test,192.0.2.2
 *     --host-record=db3.example.test,2001:db8::3
 *     --cname=www.example.test,alias.example.test
 *     --cname=alias.example.test,db1.example.test
 *
 * and, for truncated.bin, 60 --host-record=many.example.test,10.0.0.N
 * (29 fit in 512 bytes, with TC set).
 */
static struct rlb_dns_reply real(const char *file, const char *qname,
				 uint16_t qtype)
{
	static uint8_t buf[65536];
	struct rlb_dns_reply r;
	char *path;
	FILE *f;
	size_t len;

	assert_true(asprintf(&path, "%s/dns/%s", TEST_DATA_DIR, file) > 0);
	f = fopen(path, "rb");
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	free(path);
	assert_int_equal(rlb_dns_parse(buf, len, qname, qtype, &r), 0);
	return r;
}

static void test_dnsmsg_real_dnsmasq_answers(void **state)
{
	struct rlb_dns_reply r;

	r = real("srv.bin", "_db._tcp.example.test", RLB_DNS_T_SRV);
	assert_int_equal(r.nanswer, 3);
	assert_int_equal(r.n, 7);
	assert_int_equal(r.min_ttl, 60);
	assert_string_equal(r.records[0].name, "db3.example.test");
	assert_int_equal(r.records[0].port, 9002);
	assert_int_equal(r.records[0].priority, 20);
	assert_string_equal(r.records[2].name, "db1.example.test");
	assert_int_equal(r.records[2].weight, 60);
	for (size_t i = 3; i < 7; i++)
		assert_int_equal(strncmp(r.records[i].name, "db", 2), 0);
	assert_addr(&r.records[3], "192.0.2.2");
	assert_addr(&r.records[6], "2001:db8::3");
	assert_string_equal(r.records[6].name, "db3.example.test");
	rlb_dns_reply_free(&r);

	r = real("a.bin", "db1.example.test", RLB_DNS_T_A);
	assert_int_equal(r.nanswer, 1);
	assert_addr(&r.records[0], "192.0.2.1");
	rlb_dns_reply_free(&r);
	r = real("aaaa.bin", "DB1.example.test.", RLB_DNS_T_AAAA);
	assert_int_equal(r.nanswer, 1);
	assert_addr(&r.records[0], "2001:db8::1");
	rlb_dns_reply_free(&r);

	r = real("cname_a.bin", "www.example.test", RLB_DNS_T_A);
	assert_int_equal(r.nanswer, 1);
	assert_addr(&r.records[0], "192.0.2.1");
	assert_string_equal(r.records[0].name, "db1.example.test");
	rlb_dns_reply_free(&r);

	r = real("nxdomain.bin", "nope.example.test", RLB_DNS_T_A);
	assert_int_equal(r.rcode, RLB_DNS_RCODE_NXDOMAIN);
	assert_int_equal(r.n, 0);
	rlb_dns_reply_free(&r);
	r = real("nodata.bin", "db3.example.test", RLB_DNS_T_A);
	assert_int_equal(r.rcode, RLB_DNS_RCODE_NOERROR);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.min_ttl, UINT32_MAX);
	rlb_dns_reply_free(&r);

	r = real("truncated.bin", "many.example.test", RLB_DNS_T_A);
	assert_true(r.truncated);
	assert_int_equal(r.nanswer, 29);
	rlb_dns_reply_free(&r);
}

/* ------------------------------------------------------------------ */
/* The API's edges */

static void test_dnsmsg_bad_arguments(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;
	size_t len = done(m);

	assert_int_equal(
		rlb_dns_parse(m->b, len, "db.example.com", RLB_DNS_T_CNAME, &r),
		-EINVAL);
	assert_int_equal(
		rlb_dns_parse(m->b, len, "db.example.com", TYPE_TXT, &r),
		-EINVAL);
	assert_int_equal(
		rlb_dns_parse(m->b, len, "db..example.com", RLB_DNS_T_A, &r),
		-EINVAL);
	assert_int_equal(rlb_dns_parse(m->b, len, "", RLB_DNS_T_A, &r),
			 -EINVAL);
	assert_int_equal(rlb_dns_parse(m->b, len, NULL, RLB_DNS_T_A, &r),
			 -EINVAL);
	assert_int_equal(
		rlb_dns_parse(NULL, 0, "db.example.com", RLB_DNS_T_A, &r),
		-EINVAL);
	assert_int_equal(
		rlb_dns_parse(m->b, len, "db.example.com", RLB_DNS_T_A, NULL),
		-EINVAL);
	rlb_dns_reply_free(NULL);
	msg_free(m);
}

static void test_dnsmsg_keeps_errno(void **state)
{
	struct msg *m = srv_message();
	struct rlb_dns_reply r;

	errno = EILSEQ;
	parse_ok(m, &r);
	assert_int_equal(errno, EILSEQ);
	rlb_dns_reply_free(&r);
	m->b[2] = 0;
	assert_int_equal(parse(m, "_db._tcp.example.com", RLB_DNS_T_SRV, &r),
			 -EINVAL);
	assert_int_equal(errno, EILSEQ);
	msg_free(m);
}

/* Bytes after the last record are not records: ignored. */
static void test_dnsmsg_trailing_bytes_ignored(void **state)
{
	struct msg *m = msg_new(F_REPLY, "db.example.com", RLB_DNS_T_A);
	struct rlb_dns_reply r;

	rr_addr(m, "", QNAME, 30, "192.0.2.1");
	put_raw(m, "\xc0\xff\xff", 3);
	parse_ok(m, &r);
	assert_int_equal(r.nanswer, 1);
	rlb_dns_reply_free(&r);
	msg_free(m);
}

static void test_dnsmsg_name_valid(void **state)
{
	char name[300], l63[64];

	memset(l63, 'x', 63);
	l63[63] = '\0';
	assert_true(rlb_dns_name_valid("example.com"));
	assert_true(rlb_dns_name_valid("example.com."));
	assert_true(rlb_dns_name_valid("_db._tcp.Example-1.COM"));
	assert_true(rlb_dns_name_valid("localhost"));
	assert_true(rlb_dns_name_valid("-a.b_"));
	assert_true(rlb_dns_name_valid(l63));
	assert_false(rlb_dns_name_valid(NULL));
	assert_false(rlb_dns_name_valid(""));
	assert_false(rlb_dns_name_valid("."));
	assert_false(rlb_dns_name_valid(".example.com"));
	assert_false(rlb_dns_name_valid("example..com"));
	assert_false(rlb_dns_name_valid("example.com.."));
	assert_false(rlb_dns_name_valid("exa mple.com"));
	assert_false(rlb_dns_name_valid("exa*mple.com"));
	assert_false(rlb_dns_name_valid("ex\xc3\xa9.com"));
	assert_false(rlb_dns_name_valid("192.0.2.1:80"));
	snprintf(name, sizeof(name), "%sx.com", l63);
	assert_false(rlb_dns_name_valid(name)); /* a label of 64 */
	/* 253 bytes, with or without the trailing dot; not 254. */
	snprintf(name, sizeof(name), "%s.%s.%s.%.61s", l63, l63, l63, l63);
	assert_int_equal(strlen(name), 253);
	assert_true(rlb_dns_name_valid(name));
	strcat(name, ".");
	assert_true(rlb_dns_name_valid(name));
	name[253] = 'x';
	assert_false(rlb_dns_name_valid(name));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dnsmsg_srv_targets_and_additional),
		cmocka_unit_test(test_dnsmsg_a_answers),
		cmocka_unit_test(test_dnsmsg_aaaa_answers),
		cmocka_unit_test(test_dnsmsg_cname_chain_to_a),
		cmocka_unit_test(test_dnsmsg_cname_chain_any_order),
		cmocka_unit_test(test_dnsmsg_cname_loop),
		cmocka_unit_test(test_dnsmsg_cname_chain_bounded),
		cmocka_unit_test(test_dnsmsg_nxdomain),
		cmocka_unit_test(test_dnsmsg_nodata),
		cmocka_unit_test(test_dnsmsg_truncated_partial_record),
		cmocka_unit_test(test_dnsmsg_cut_without_tc),
		cmocka_unit_test(test_dnsmsg_every_cut),
		cmocka_unit_test(test_dnsmsg_rdlength_overruns),
		cmocka_unit_test(test_dnsmsg_pointer_loop),
		cmocka_unit_test(test_dnsmsg_pointer_into_itself),
		cmocka_unit_test(test_dnsmsg_forward_pointer),
		cmocka_unit_test(test_dnsmsg_pointer_out_of_range),
		cmocka_unit_test(test_dnsmsg_label_types),
		cmocka_unit_test(test_dnsmsg_name_too_long),
		cmocka_unit_test(test_dnsmsg_a_rdlength_5),
		cmocka_unit_test(test_dnsmsg_rdata_shapes),
		cmocka_unit_test(test_dnsmsg_srv_target_in_question),
		cmocka_unit_test(test_dnsmsg_srv_target_not_plain_skipped),
		cmocka_unit_test(test_dnsmsg_question_mismatch),
		cmocka_unit_test(test_dnsmsg_not_a_response),
		cmocka_unit_test(test_dnsmsg_other_class_skipped),
		cmocka_unit_test(test_dnsmsg_mixed_case_owner),
		cmocka_unit_test(test_dnsmsg_500_srv_records),
		cmocka_unit_test(test_dnsmsg_answers_capped),
		cmocka_unit_test(test_dnsmsg_min_ttl),
		cmocka_unit_test(test_dnsmsg_real_dnsmasq_answers),
		cmocka_unit_test(test_dnsmsg_bad_arguments),
		cmocka_unit_test(test_dnsmsg_keeps_errno),
		cmocka_unit_test(test_dnsmsg_trailing_bytes_ignored),
		cmocka_unit_test(test_dnsmsg_name_valid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
