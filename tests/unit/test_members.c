/* test_members.c - DNS membership (design.md §15): what a refresh's answer
 * does to the members in force, against a scripted DNS client. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "tests/unit/dnswire.h"

/* ------------------------------------------------------------------ */
/* A scripted DNS: one answer (or failure) per question type */

enum script_kind { S_NONE, S_FAIL, S_MSG, S_GARBAGE };

static struct {
	enum script_kind kind[3]; /* SRV, A, AAAA */
	struct dw msg[3];
	unsigned asked[3];
	unsigned targets_asked;
	char last_name[300];
} dns;

static int slot_of(uint16_t type)
{
	return type == RLB_DNS_T_SRV ? 0 : type == RLB_DNS_T_A ? 1 : 2;
}

/* Reverse names the scripted server knows: question, then target. */
static const char *const ptr_known[][2] = {
	{"2.0.0.10.in-addr.arpa.", "ch-1.dc1.rlb.test"},
	{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2."
	 "ip6.arpa.",
	 "ch-6.dc2.rlb.test"},
};
static unsigned ptr_asked;

static ssize_t ask_ptr(const char *name, uint8_t *buf, size_t len)
{
	struct dw w;

	ptr_asked++;
	dw_start(&w, name, RLB_DNS_T_PTR, RLB_DNS_RCODE_NXDOMAIN);
	for (size_t i = 0; i < sizeof(ptr_known) / sizeof(*ptr_known); i++) {
		if (strcmp(name, ptr_known[i][0]) != 0)
			continue;
		dw_start(&w, name, RLB_DNS_T_PTR, 0);
		dw_ptr(&w, name, 60, ptr_known[i][1]);
	}
	assert_true(w.len <= len);
	memcpy(buf, w.buf, w.len);
	return (ssize_t)w.len;
}

static ssize_t script_ask(const char *name, uint16_t type, uint8_t *buf,
			  size_t len)
{
	int k = slot_of(type);

	if (type == RLB_DNS_T_PTR)
		return ask_ptr(name, buf, len);
	/* An SRV target's own address questions (the second round), when
	 * no A or AAAA answer is scripted: not answered, not counted. */
	if (type != RLB_DNS_T_SRV && dns.kind[k] == S_NONE) {
		dns.targets_asked++;
		errno = ETIMEDOUT;
		return -1;
	}
	dns.asked[k]++;
	snprintf(dns.last_name, sizeof(dns.last_name), "%s", name);
	switch (dns.kind[k]) {
	case S_MSG:
		assert_true(dns.msg[k].len <= len);
		memcpy(buf, dns.msg[k].buf, dns.msg[k].len);
		return (ssize_t)dns.msg[k].len;
	case S_GARBAGE:
		memset(buf, 0xff, 40);
		return 40;
	default:
		errno = ETIMEDOUT;
		return -1;
	}
}

static void script_ask_all(struct rlb_dns_question *q, size_t n,
			   int64_t deadline_ms)
{
	dw_ask_each(q, n, script_ask);
}

static const struct rlb_dns_client script = {.ask = script_ask_all};

static struct dw *answer(uint16_t type, const char *qname, int rcode)
{
	int k = slot_of(type);

	dns.kind[k] = S_MSG;
	dw_start(&dns.msg[k], qname, type, rcode);
	return &dns.msg[k];
}

static void script_fail(uint16_t type)
{
	dns.kind[slot_of(type)] = S_FAIL;
}

static int setup(void **state)
{
	memset(&dns, 0, sizeof(dns));
	return 0;
}

/* ------------------------------------------------------------------ */
/* Clusters */

static struct rlb_config *parse(const char *text)
{
	struct rlb_diag diag = {0};
	struct rlb_config *cfg = NULL;
	int rc = rlb_config_parse_string(text, "t.conf", &cfg, &diag);

	for (size_t i = 0; i < diag.n; i++)
		print_error("%s\n", diag.msgs[i]);
	rlb_diag_free(&diag);
	assert_int_equal(rc, 0);
	return cfg;
}

#define SRV_NAME "_ch._tcp.rlb.test."

/* One refresh of cluster c at now_ms into ms; whether it changed. */
static bool refresh(struct rlb_membership *ms, const struct rlb_cluster *c,
		    int64_t now_ms)
{
	struct rlb_members_answer a;

	assert_int_equal(rlb_members_ask(c, &script, INT64_MAX, &a), 0);
	return rlb_membership_apply(ms, c, &a, now_ms);
}

static void three_targets(uint32_t ttl)
{
	struct dw *w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);

	/* Out of order, as a rotating server sends them. */
	dw_srv(w, SRV_NAME, ttl, 10, 5, 9001, "b.rlb.test");
	dw_srv(w, SRV_NAME, ttl, 20, 0, 9002, "C.rlb.test.");
	dw_srv(w, SRV_NAME, ttl, 10, 5, 9000, "a.rlb.test");
}

static void test_members_srv_targets_ports_priorities(void **state)
{
	struct rlb_config *cfg =
		parse("clusters = ({ name = \"s.cluster\"; "
		      "srv = \"_CH._tcp.rlb.test\"; dns_cache_ttl = 30; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;

	/* Stored absolute and lowercase: no search list, one question. */
	assert_string_equal(c->srv, SRV_NAME);
	assert_null(c->dns);
	assert_int_equal(c->nreplicas, 0);
	three_targets(7);
	rlb_membership_init(&ms, c);
	assert_true(refresh(&ms, c, 1000));
	assert_string_equal(dns.last_name, SRV_NAME);
	assert_int_equal(ms.outcome, RLB_DNS_OK);
	assert_int_equal(ms.now.n, 3);
	/* Canonical order: by target, then port. */
	assert_string_equal(ms.now.m[0].host, "a.rlb.test");
	assert_int_equal(ms.now.m[0].port, 9000);
	assert_string_equal(ms.now.m[1].host, "b.rlb.test");
	assert_string_equal(ms.now.m[2].host, "c.rlb.test");
	assert_int_equal(ms.now.m[2].priority, 20);
	assert_int_equal(ms.now.m[1].weight, 5);
	/* The TTL (7 s) is shorter than dns_cache_ttl (30 s). */
	assert_int_equal(ms.due_ms, 1000 + 7000);
	assert_int_equal(rlb_members_add(c, &ms), 0);
	assert_int_equal(c->nreplicas, 3);
	assert_int_equal(c->replicas[2].priority, 20);
	assert_int_equal(c->replicas[2].port, 9002);
	assert_int_equal(c->replicas[2].source, RLB_SOURCE_SRV);
	assert_int_equal(c->replicas[0].identity,
			 rlb_replica_identity("a.rlb.test", 9000));
	assert_true(c->weighted);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_same_records_rotated_is_no_change(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct dw *w;

	rlb_membership_init(&ms, c);
	three_targets(60);
	assert_true(refresh(&ms, c, 0));
	w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);
	dw_srv(w, SRV_NAME, 60, 10, 5, 9000, "a.rlb.test");
	dw_srv(w, SRV_NAME, 60, 20, 0, 9002, "c.rlb.test");
	dw_srv(w, SRV_NAME, 60, 10, 5, 9001, "b.rlb.test");
	assert_false(refresh(&ms, c, 2000));
	/* dns_cache_ttl (15 s) is shorter than the TTL (60 s). */
	assert_int_equal(ms.due_ms, 2000 + 15000);
	/* A target removed is a change. */
	w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);
	dw_srv(w, SRV_NAME, 60, 10, 5, 9000, "a.rlb.test");
	assert_true(refresh(&ms, c, 3000));
	assert_int_equal(ms.now.n, 1);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_ttl_zero_takes_the_floor(void **state)
{
	struct rlb_config *cfg = parse(
		"clusters = ({ name = \"s.cluster\"; "
		"srv = \"_ch._tcp.rlb.test\"; dns_refresh_floor_ms = 250; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;

	rlb_membership_init(&ms, c);
	three_targets(0);
	refresh(&ms, c, 500);
	assert_int_equal(ms.due_ms, 500 + 250);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_failure_keeps_the_last_good(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;

	rlb_membership_init(&ms, c);
	/* Never answered: no members, and says so. */
	script_fail(RLB_DNS_T_SRV);
	assert_false(refresh(&ms, c, 0));
	assert_false(ms.answered);
	assert_int_equal(ms.outcome, RLB_DNS_FAILED);
	assert_non_null(strstr(ms.views[0].why, "no answer"));
	three_targets(60);
	assert_true(refresh(&ms, c, 1000));
	/* Down, malformed, empty (NODATA): the three stay. */
	script_fail(RLB_DNS_T_SRV);
	assert_false(refresh(&ms, c, 20000));
	assert_int_equal(ms.now.n, 3);
	assert_int_equal(ms.outcome, RLB_DNS_FAILED);
	dns.kind[0] = S_GARBAGE;
	assert_false(refresh(&ms, c, 40000));
	assert_int_equal(ms.outcome, RLB_DNS_MALFORMED);
	assert_int_equal(ms.now.n, 3);
	answer(RLB_DNS_T_SRV, SRV_NAME, 0);
	assert_false(refresh(&ms, c, 60000));
	assert_int_equal(ms.outcome, RLB_DNS_EMPTY);
	assert_int_equal(ms.now.n, 3);
	/* A server error too. */
	answer(RLB_DNS_T_SRV, SRV_NAME, RLB_DNS_RCODE_SERVFAIL);
	assert_false(refresh(&ms, c, 80000));
	assert_int_equal(ms.outcome, RLB_DNS_FAILED);
	assert_int_equal(ms.now.n, 3);
	/* The time of the members in force is that of their answer. */
	assert_int_equal(ms.answered_ms, 1000);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_nxdomain_held_then_emptied(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; "
				       "dns_hold_nx = 5; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;

	rlb_membership_init(&ms, c);
	three_targets(1);
	refresh(&ms, c, 0);
	answer(RLB_DNS_T_SRV, SRV_NAME, RLB_DNS_RCODE_NXDOMAIN);
	assert_false(refresh(&ms, c, 1000));
	assert_int_equal(ms.outcome, RLB_DNS_NXDOMAIN);
	assert_int_equal(ms.now.n, 3);
	assert_false(refresh(&ms, c, 5999));
	assert_int_equal(ms.now.n, 3);
	/* Five seconds after the first NXDOMAIN: none. */
	assert_true(refresh(&ms, c, 6000));
	assert_int_equal(ms.now.n, 0);
	assert_true(ms.answered);
	/* Back: the members return at once. */
	three_targets(1);
	assert_true(refresh(&ms, c, 7000));
	assert_int_equal(ms.now.n, 3);
	/* A new NXDOMAIN run starts its own hold. */
	answer(RLB_DNS_T_SRV, SRV_NAME, RLB_DNS_RCODE_NXDOMAIN);
	assert_false(refresh(&ms, c, 8000));
	assert_false(refresh(&ms, c, 12999));
	assert_int_equal(ms.now.n, 3);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_nxdomain_due_when_the_hold_ends(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; "
				       "dns_hold_nx = 2; dns_cache_ttl = 60; "
				       "});");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;

	rlb_membership_init(&ms, c);
	three_targets(60);
	refresh(&ms, c, 0);
	answer(RLB_DNS_T_SRV, SRV_NAME, RLB_DNS_RCODE_NXDOMAIN);
	refresh(&ms, c, 1000);
	assert_int_equal(ms.due_ms, 3000);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_dns_addresses(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"d.cluster\"; "
				       "dns = \"pool.rlb.test\"; port = 9000; "
				       "replicas = ( \"10.0.0.9\" ); });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct dw *w;

	assert_int_equal(c->nstatic, 1);
	w = answer(RLB_DNS_T_A, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.10");
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.9");
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.2");
	w = answer(RLB_DNS_T_AAAA, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 20, "2001:db8::1");
	rlb_membership_init(&ms, c);
	assert_true(refresh(&ms, c, 0));
	assert_int_equal(ms.now.n, 4);
	/* By address, IPv4 first. */
	assert_string_equal(ms.now.m[0].host, "10.0.0.2");
	assert_string_equal(ms.now.m[1].host, "10.0.0.9");
	assert_string_equal(ms.now.m[2].host, "10.0.0.10");
	assert_string_equal(ms.now.m[3].host, "2001:db8::1");
	assert_int_equal(ms.now.m[0].port, 9000);
	assert_true(ms.now.m[0].literal);
	assert_int_equal(ms.due_ms, 15000);
	/* 10.0.0.9:9000 is the config's replica already. */
	assert_int_equal(rlb_members_add(c, &ms), 0);
	assert_int_equal(c->nreplicas, 4);
	assert_int_equal(c->replicas[0].source, RLB_SOURCE_CONFIG);
	assert_string_equal(c->replicas[1].host, "10.0.0.2");
	assert_int_equal(c->replicas[1].source, RLB_SOURCE_DNS);
	assert_int_equal(c->replicas[1].nliteral, 1);
	assert_int_equal(c->replicas[3].literal[0].family, AF_INET6);
	assert_false(c->weighted);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_dns_reverse_names_for_hostname_policies(void **state)
{
	struct rlb_config *cfg = parse(
		"clusters = ({ name = \"d.cluster\"; dns = \"pool.rlb.test\"; "
		"port = 9000; load_balancing = \"nearest_hostname\"; }, "
		"{ name = \"r.cluster\"; dns = \"pool.rlb.test\"; port = 9000; "
		"});");
	struct rlb_membership ms;
	struct dw *w;

	w = answer(RLB_DNS_T_A, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.2");
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.3");
	w = answer(RLB_DNS_T_AAAA, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "2001:db8::1");
	ptr_asked = 0;
	rlb_membership_init(&ms, &cfg->clusters[0]);
	refresh(&ms, &cfg->clusters[0], 0);
	/* One PTR question per address; the name where there is one. */
	assert_int_equal(ptr_asked, 3);
	assert_int_equal(ms.now.n, 3);
	assert_string_equal(ms.now.m[0].host, "ch-1.dc1.rlb.test");
	assert_string_equal(ms.now.m[1].host, "10.0.0.3");
	assert_string_equal(ms.now.m[2].host, "ch-6.dc2.rlb.test");
	/* Its identity stays its address: a name change is no new member. */
	assert_int_equal(rlb_members_add(&cfg->clusters[0], &ms), 0);
	assert_int_equal(cfg->clusters[0].replicas[0].identity,
			 rlb_replica_identity("10.0.0.2", 9000));
	rlb_membership_clear(&ms);
	/* Other policies compare nothing: no reverse lookups. */
	ptr_asked = 0;
	rlb_membership_init(&ms, &cfg->clusters[1]);
	refresh(&ms, &cfg->clusters[1], 0);
	assert_int_equal(ptr_asked, 0);
	assert_string_equal(ms.now.m[0].host, "10.0.0.2");
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_failed_question_keeps_its_members(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"d.cluster\"; "
				       "dns = \"pool.rlb.test\"; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct dw *w;

	w = answer(RLB_DNS_T_A, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.1");
	w = answer(RLB_DNS_T_AAAA, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "2001:db8::1");
	rlb_membership_init(&ms, c);
	refresh(&ms, c, 0);
	assert_int_equal(ms.now.n, 2);
	/* AAAA times out; A has a new address: the IPv6 member stays. */
	w = answer(RLB_DNS_T_A, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.1");
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.3");
	script_fail(RLB_DNS_T_AAAA);
	assert_true(refresh(&ms, c, 1000));
	assert_int_equal(ms.outcome, RLB_DNS_OK);
	assert_int_equal(ms.now.n, 3);
	assert_string_equal(ms.now.m[2].host, "2001:db8::1");
	/* An IPv4-only name (AAAA: no records) has no IPv6 members. */
	answer(RLB_DNS_T_AAAA, "pool.rlb.test.", 0);
	assert_true(refresh(&ms, c, 2000));
	assert_int_equal(ms.now.n, 2);
	/* Both NXDOMAIN: held (30 s by default). */
	answer(RLB_DNS_T_A, "pool.rlb.test.", RLB_DNS_RCODE_NXDOMAIN);
	answer(RLB_DNS_T_AAAA, "pool.rlb.test.", RLB_DNS_RCODE_NXDOMAIN);
	assert_false(refresh(&ms, c, 3000));
	assert_int_equal(ms.outcome, RLB_DNS_NXDOMAIN);
	assert_int_equal(ms.now.n, 2);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_srv_and_dns_combined(void **state)
{
	struct rlb_config *cfg =
		parse("clusters = ({ name = \"b.cluster\"; "
		      "srv = \"_ch._tcp.rlb.test\"; "
		      "dns = \"pool.rlb.test\"; port = 9000; "
		      "replicas = ( \"static.rlb.test\" ); });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct dw *w;

	three_targets(60);
	w = answer(RLB_DNS_T_A, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.7");
	answer(RLB_DNS_T_AAAA, "pool.rlb.test.", 0);
	rlb_membership_init(&ms, c);
	assert_true(refresh(&ms, c, 0));
	/* srv members first (by source), then the dns one. */
	assert_int_equal(ms.now.n, 4);
	assert_int_equal(ms.now.m[0].source, RLB_SOURCE_SRV);
	assert_string_equal(ms.now.m[3].host, "10.0.0.7");
	/* The SRV question fails: its members stay, the dns ones follow
	 * their answer. */
	script_fail(RLB_DNS_T_SRV);
	w = answer(RLB_DNS_T_A, "pool.rlb.test.", 0);
	dw_addr(w, "pool.rlb.test", 30, "10.0.0.8");
	assert_true(refresh(&ms, c, 1000));
	assert_int_equal(ms.outcome, RLB_DNS_OK);
	assert_int_equal(ms.now.n, 4);
	assert_string_equal(ms.now.m[0].host, "a.rlb.test");
	assert_string_equal(ms.now.m[3].host, "10.0.0.8");
	/* Both fail: all stay. */
	script_fail(RLB_DNS_T_A);
	script_fail(RLB_DNS_T_AAAA);
	assert_false(refresh(&ms, c, 2000));
	assert_int_equal(ms.outcome, RLB_DNS_FAILED);
	assert_int_equal(ms.now.n, 4);
	/* The config replica first, then the members. */
	assert_int_equal(rlb_members_add(c, &ms), 0);
	assert_int_equal(c->nreplicas, 5);
	assert_int_equal(c->nstatic, 1);
	assert_string_equal(c->replicas[0].host, "static.rlb.test");
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_srv_target_root_is_no_service(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct dw *w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);

	/* RFC 2782: target "." means the service is not available. */
	dw_srv(w, SRV_NAME, 60, 0, 0, 0, ".");
	rlb_membership_init(&ms, c);
	assert_false(refresh(&ms, c, 0));
	assert_int_equal(ms.outcome, RLB_DNS_EMPTY);
	assert_int_equal(ms.now.n, 0);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_many_targets(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct dw *w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);
	char target[64];

	for (int i = 0; i < 600; i++) {
		snprintf(target, sizeof(target), "t%03d.rlb.test", i);
		dw_srv(w, SRV_NAME, 60, 1, 1, 9000, target);
	}
	/* Twice: one member each. */
	dw_srv(w, SRV_NAME, 60, 1, 1, 9000, "t000.rlb.test");
	rlb_membership_init(&ms, c);
	assert_true(refresh(&ms, c, 0));
	assert_int_equal(ms.now.n, 600);
	assert_int_equal(rlb_members_add(c, &ms), 0);
	assert_int_equal(c->nreplicas, 600);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_clone_keeps_config_replicas_only(void **state)
{
	struct rlb_config *cfg = parse(
		"clusters = ({ name = \"s.cluster\"; srv = "
		"\"_ch._tcp.rlb.test\"; "
		"replicas = ( \"x.rlb.test:1\", { host = \"y\"; address = "
		"\"10.0.0.1\"; } ); }, { name = \"other\"; replicas = ( "
		"\"z\" ); });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	struct rlb_config *copy;

	rlb_membership_init(&ms, c);
	three_targets(60);
	refresh(&ms, c, 0);
	assert_int_equal(rlb_members_add(c, &ms), 0);
	assert_int_equal(c->nreplicas, 5);
	copy = rlb_config_clone(cfg, true);
	assert_non_null(copy);
	assert_int_equal(copy->nclusters, 2);
	assert_int_equal(copy->clusters[0].nreplicas, 2);
	assert_string_equal(copy->clusters[0].replicas[1].pinned[0],
			    "10.0.0.1");
	assert_string_equal(copy->clusters[0].srv, SRV_NAME);
	assert_ptr_equal(rlb_config_find(copy, "OTHER."), &copy->clusters[1]);
	rlb_config_free(copy);
	copy = rlb_config_clone(cfg, false);
	assert_int_equal(copy->clusters[0].nreplicas, 5);
	rlb_config_free(copy);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

static void test_members_srv_weights_order_ties(void **state)
{
	char dir[] = "/tmp/rlb-test-members-XXXXXX", text[400], cmd[100];
	struct rlb_config *cfg;
	struct rlb_snapshot *snap;
	struct rlb_cluster *c;
	struct rlb_membership ms;
	struct rlb_selection *sel;
	unsigned first[4] = {0};
	struct dw *w;

	assert_non_null(mkdtemp(dir));
	snprintf(text, sizeof(text),
		 "state_dir = \"%s\"; clusters = ({ name = \"w.cluster\"; "
		 "srv = \"_ch._tcp.rlb.test\"; });",
		 dir);
	cfg = parse(text);
	c = &cfg->clusters[0];
	w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);
	dw_srv(w, SRV_NAME, 60, 10, 90, 9000, "heavy.rlb.test");
	dw_srv(w, SRV_NAME, 60, 10, 10, 9000, "light.rlb.test");
	dw_srv(w, SRV_NAME, 60, 10, 0, 9000, "zero.rlb.test");
	/* A better SRV priority beats any weight. */
	dw_srv(w, SRV_NAME, 60, 5, 1, 9000, "best.rlb.test");
	rlb_membership_init(&ms, c);
	refresh(&ms, c, 0);
	assert_int_equal(rlb_members_add(c, &ms), 0);
	rlb_membership_clear(&ms);
	snap = rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT, false);
	assert_non_null(snap);
	c = &snap->cfg->clusters[0];
	assert_true(c->weighted);
	assert_string_equal(c->replicas[0].host, "best.rlb.test");
	assert_string_equal(c->replicas[1].host, "heavy.rlb.test");
	sel = rlb_selection_new(c->nreplicas);
	for (int i = 0; i < 2000; i++) {
		rlb_select(c, true, 1, sel);
		assert_int_equal(sel->order[0], 0);
		/* Weight 0 after every weighted one. */
		assert_int_equal(sel->order[3], 3);
		first[sel->order[1]]++;
	}
	/* heavy (90) takes the place after best 9 times in 10: 1800 of
	 * 2000, sigma 13.4; 1700 and 1900 are 7 sigma away. */
	assert_in_range(first[1], 1700, 1900);
	assert_int_equal(first[1] + first[2], 2000);
	free(sel);
	rlb_snapshot_put(snap);
	rlb_health_remove_state(&(struct rlb_config){.state_dir = dir}, true,
				NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_members_config_keys_validated(void **state)
{
	static const char *const bad[] = {
		"clusters = ({ name = \"a\"; srv = \"bad name.test\"; });",
		"clusters = ({ name = \"a\"; dns = \"a..b\"; });",
		"clusters = ({ name = \"a\"; dns = 5; });",
		"clusters = ({ name = \"a\"; srv = \"x.test\"; "
		"dns_refresh_floor_ms = 5; });",
		"clusters = ({ name = \"a\"; });",
		"srv = \"x.test\"; clusters = ();",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct rlb_diag diag = {0};
		struct rlb_config *cfg = NULL;

		assert_int_equal(
			rlb_config_parse_string(bad[i], "t.conf", &cfg, &diag),
			-EINVAL);
		assert_true(diag.n >= 1);
		assert_non_null(strstr(diag.msgs[0], "t.conf:1: "));
		rlb_diag_free(&diag);
	}
}

/* ------------------------------------------------------------------ */
/* The second round: SRV targets' addresses; the back-off */

/* A server that knows the addresses of t1 and t2 (and is down for
 * them when `targets_down`), and counts each ask's questions. */
static struct {
	bool targets_down;
	size_t batches, sizes[4];
	int64_t deadlines[4];
} two;

static ssize_t target_ask(const char *name, uint16_t type, uint8_t *buf,
			  size_t len)
{
	struct dw w;

	if (type == RLB_DNS_T_SRV)
		return script_ask(name, type, buf, len);
	if (two.targets_down) {
		errno = ETIMEDOUT;
		return -1;
	}
	dw_start(&w, name, type, 0);
	if (type == RLB_DNS_T_A && strcmp(name, "t1.rlb.test") == 0)
		dw_addr(&w, name, 5, "10.0.0.1");
	if (type == RLB_DNS_T_A && strcmp(name, "t2.rlb.test") == 0)
		dw_addr(&w, name, 9, "10.0.0.2");
	if (type == RLB_DNS_T_AAAA && strcmp(name, "t2.rlb.test") == 0)
		dw_addr(&w, name, 9, "2001:db8::2");
	memcpy(buf, w.buf, w.len);
	return (ssize_t)w.len;
}

static void target_ask_all(struct rlb_dns_question *q, size_t n,
			   int64_t deadline_ms)
{
	if (two.batches < 4) {
		two.sizes[two.batches] = n;
		two.deadlines[two.batches] = deadline_ms;
	}
	two.batches++;
	dw_ask_each(q, n, target_ask);
}

static const struct rlb_dns_client targets_client = {.ask = target_ask_all};

static void two_targets(void)
{
	struct dw *w = answer(RLB_DNS_T_SRV, SRV_NAME, 0);

	dw_srv(w, SRV_NAME, 60, 10, 0, 9001, "t1.rlb.test");
	dw_srv(w, SRV_NAME, 60, 10, 0, 9002, "t2.rlb.test");
}

static bool refresh_targets(struct rlb_membership *ms, struct rlb_cluster *c,
			    int64_t deadline, int64_t now_ms)
{
	struct rlb_members_answer a;

	memset(&two.batches, 0, sizeof(two) - offsetof(typeof(two), batches));
	assert_int_equal(rlb_members_ask(c, &targets_client, deadline, &a), 0);
	return rlb_membership_apply(ms, c, &a, now_ms);
}

/*
 * Targets sent without addresses are asked A and AAAA in one second
 * round (issue 20): the members carry the addresses, so that a
 * program's lookup never waits for a target; their TTLs count.
 */
static void test_members_srv_targets_resolved_together(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; "
				       "dns_refresh_floor_ms = 100; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	int64_t deadline = rlb_monotonic_ms() + 60000;

	rlb_membership_init(&ms, c);
	two_targets();
	assert_true(refresh_targets(&ms, c, deadline, 1000));
	/* The SRV question, then all four of the targets at once. */
	assert_int_equal(two.batches, 2);
	assert_int_equal(two.sizes[0], 1);
	assert_int_equal(two.deadlines[0], INT64_MAX);
	assert_int_equal(two.sizes[1], 4);
	assert_int_equal(two.deadlines[1], deadline);
	assert_int_equal(ms.now.n, 2);
	assert_string_equal(ms.now.m[0].host, "t1.rlb.test");
	assert_int_equal(ms.now.m[0].nglue, 1);
	assert_int_equal(ms.now.m[0].glue[0].bytes[3], 1);
	assert_int_equal(ms.now.m[1].nglue, 2);
	assert_int_equal(ms.now.m[1].glue[1].family, AF_INET6);
	/* The smallest TTL of all: t1's 5 s. */
	assert_int_equal(ms.now.ttl, 5);
	assert_int_equal(ms.due_ms, 1000 + 5000);

	/* DNS down for the targets only: the members keep their
	 * addresses, and nothing changed. */
	two.targets_down = true;
	assert_false(refresh_targets(&ms, c, INT64_MAX, 7000));
	assert_int_equal(ms.now.m[0].nglue, 1);
	assert_int_equal(ms.now.m[1].nglue, 2);
	assert_int_equal(ms.now.m[1].glue[0].bytes[3], 2);
	two.targets_down = false;

	/* Out of time (a first answer's budget spent): no target asked;
	 * they keep what they had. */
	assert_false(refresh_targets(&ms, c, 0, 8000));
	assert_int_equal(two.batches, 1);
	assert_int_equal(ms.now.m[0].nglue, 1);
	rlb_membership_clear(&ms);

	/* ... and a membership that had none resolves them later. */
	rlb_membership_init(&ms, c);
	assert_true(refresh_targets(&ms, c, 0, 9000));
	assert_int_equal(ms.now.m[0].nglue, 0);
	assert_true(ms.now.m[0].glue_failed);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

/* Failed refreshes in a row wait the floor, doubled each time, at most
 * max(floor, dns_cache_ttl); an answer resets it. */
static void test_members_failures_back_off(void **state)
{
	static const int64_t waits[] = {250, 500, 1000, 2000, 3000, 3000};
	struct rlb_config *cfg = parse(
		"clusters = ({ name = \"s.cluster\"; "
		"srv = \"_ch._tcp.rlb.test\"; dns_refresh_floor_ms = 250; "
		"dns_cache_ttl = 3; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_membership ms;
	int64_t now = 0;

	rlb_membership_init(&ms, c);
	script_fail(RLB_DNS_T_SRV);
	for (size_t i = 0; i < sizeof(waits) / sizeof(*waits); i++) {
		refresh(&ms, c, now);
		assert_int_equal(ms.due_ms - now, waits[i]);
		now = ms.due_ms;
	}
	three_targets(60);
	refresh(&ms, c, now);
	assert_int_equal(ms.failures, 0);
	script_fail(RLB_DNS_T_SRV);
	refresh(&ms, c, now);
	assert_int_equal(ms.due_ms - now, 250);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

/* ------------------------------------------------------------------ */
/* The host's shared answer (design.md §15.6) */

/* An answer in force as the shared file holds it, and back. */
static void test_members_shared_answer_round_trip(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; "
				       "dns_cache_ttl = 60; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	struct rlb_members_answer a;
	struct rlb_membership ms, back;
	int64_t wall = 1700000000000, at;
	bool nx = true;
	char *buf = NULL;
	size_t len = 0;

	rlb_membership_init(&ms, c);
	two_targets();
	assert_true(refresh_targets(&ms, c, rlb_monotonic_ms() + 60000, 1000));
	assert_int_equal(
		rlb_members_encode(&ms.now, false, 77, wall, &buf, &len), 0);
	assert_int_equal(rlb_members_decode(buf, len, 77, wall, &a, &nx, &at),
			 0);
	assert_false(nx);
	assert_int_equal(at, wall);
	assert_int_equal(a.n, 2);
	assert_int_equal(a.ttl, ms.now.ttl);
	rlb_membership_init(&back, c);
	/* 2 s old with a 5 s TTL: due 3 s from now. */
	rlb_membership_adopt(&back, c, &a, 50000, 2000);
	assert_true(back.answered);
	assert_true(back.shared);
	assert_int_equal(back.due_ms, 50000 + 3000);
	assert_int_equal(back.now.n, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(back.now.m[i].host, ms.now.m[i].host);
		assert_int_equal(back.now.m[i].port, ms.now.m[i].port);
		assert_int_equal(back.now.m[i].nglue, ms.now.m[i].nglue);
		assert_memory_equal(back.now.m[i].glue, ms.now.m[i].glue,
				    ms.now.m[i].nglue *
					    sizeof(struct rlb_addr));
	}
	/* Another cluster's, or one from the future: not ours to take. */
	assert_int_equal(rlb_members_decode(buf, len, 78, wall, &a, &nx, &at),
			 -EINVAL);
	assert_int_equal(
		rlb_members_decode(buf, len, 77, wall - 120000, &a, &nx, &at),
		-EINVAL);
	free(buf);
	rlb_membership_clear(&back);
	rlb_membership_clear(&ms);
	rlb_config_free(cfg);
}

/*
 * The one rule of what a process does with the shared answer (every
 * product's: the session's refresh, replicalbctl's first members).
 */
static void test_members_shared_answer_use(void **state)
{
	struct rlb_config *cfg = parse("clusters = ({ name = \"s.cluster\"; "
				       "srv = \"_ch._tcp.rlb.test\"; "
				       "dns_cache_ttl = 60; });");
	struct rlb_cluster *c = &cfg->clusters[0];
	/* A 10 s TTL under a 60 s dns_cache_ttl: fresh for 10 s. */
	struct rlb_shared_answer sh = {
		.ok = true, .wall_ms = 5000, .age_ms = 9999, .a.ttl = 10};

	(void)state;
	assert_int_equal(rlb_membership_fresh_ms(c, 10), 10000);
	/* A new process: fresh, taken, no DNS. */
	assert_int_equal(rlb_shared_answer_use(&sh, c, 0, false),
			 RLB_SHARED_FRESH);
	/* Fresh, but the one we took already: DNS. */
	assert_int_equal(rlb_shared_answer_use(&sh, c, 5000, true),
			 RLB_SHARED_NONE);
	/* Fresh and newer than ours: taken, whatever we have. */
	assert_int_equal(rlb_shared_answer_use(&sh, c, 4999, true),
			 RLB_SHARED_FRESH);
	/* Stale: now while we have nothing, else DNS. */
	sh.age_ms = 10000;
	assert_int_equal(rlb_shared_answer_use(&sh, c, 0, false),
			 RLB_SHARED_STALE);
	assert_int_equal(rlb_shared_answer_use(&sh, c, 0, true),
			 RLB_SHARED_NONE);
	/* Too old to ride on at all. */
	sh.age_ms = RLB_SHARED_MAX_AGE_MS;
	assert_int_equal(rlb_shared_answer_use(&sh, c, 0, false),
			 RLB_SHARED_NONE);
	/* None read. */
	sh.ok = false;
	sh.age_ms = 0;
	assert_int_equal(rlb_shared_answer_use(&sh, c, 0, false),
			 RLB_SHARED_NONE);
	rlb_config_free(cfg);
}

/* Every field is checked: a damaged or forged file is refused whole. */
static void test_members_shared_answer_refuses_damage(void **state)
{
	static const char *const bad[] = {
		/* the body changed under its hash */
		"m s 9001 0 0 0 - - t2.rlb.test\n",
		/* a second copy of a member */
		"m s 9001 0 0 0 - - t1.rlb.test\nm s 9001 0 0 0 - - "
		"t1.rlb.test\n",
		/* a dns member without its address, a bad address, port 0 */
		"m d 9001 0 0 0 - - t1.rlb.test\n",
		"m d 9001 0 0 0 300.1.1.1 - 300.1.1.1\n",
		"m s 0 0 0 0 - - t1.rlb.test\n",
		/* a name that is no name; a view out of range; no newline */
		"m s 9001 0 0 0 - - t1..test\n",
		"m s 9001 0 0 7 - - t1.rlb.test\n",
		"m s 9001 0 0 0 - - t1.rlb.test",
		/* glue on a dns member, junk after the last field */
		"m d 9001 0 0 0 10.0.0.1 10.0.0.2 10.0.0.1\n",
		"m s 9001 0 0 0 - 10.0.0.1 t1.rlb.test x\n",
	};
	char buf[600];
	struct rlb_members_answer a;
	bool nx;
	int64_t at;

	/* The control: the same header over a good body is taken. */
	static const char good[] =
		"m s 9001 0 0 0 - 10.0.0.1,::1 t1.rlb.test\n";
	int gn = snprintf(buf, sizeof(buf),
			  "replicalb-members 1 %016llx %lld %u records 1 "
			  "%016llx\n%s",
			  77ULL, 1700000000000LL, 60u,
			  (unsigned long long)rlb_hash64(good, strlen(good), 0),
			  good);

	assert_int_equal(rlb_members_decode(buf, (size_t)gn, 77,
					    1700000000000LL, &a, &nx, &at),
			 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.m[0].nglue, 2);
	rlb_members_answer_free(&a);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		/* A header whose hash is the body's (but the first case,
		 * whose hash is another body's). */
		const char *body = bad[i];
		uint64_t h = rlb_hash64(i ? body
					  : "m s 9001 0 0 0 - - "
					    "t1.rlb.test\n",
					i ? strlen(body) : 30, 0);
		int n = snprintf(buf, sizeof(buf),
				 "replicalb-members 1 %016llx %lld %u records "
				 "%zu %016llx\n%s",
				 77ULL, 1700000000000LL, 60u,
				 (size_t)(i == 1 ? 2 : 1),
				 (unsigned long long)h, body);

		assert_int_equal(rlb_members_decode(buf, (size_t)n, 77,
						    1700000000000LL, &a, &nx,
						    &at),
				 -EINVAL);
	}
	assert_int_equal(rlb_members_decode("replicalb-members 2\n", 20, 77,
					    1700000000000LL, &a, &nx, &at),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(
			test_members_srv_targets_ports_priorities, setup),
		cmocka_unit_test_setup(
			test_members_same_records_rotated_is_no_change, setup),
		cmocka_unit_test_setup(test_members_ttl_zero_takes_the_floor,
				       setup),
		cmocka_unit_test_setup(test_members_failure_keeps_the_last_good,
				       setup),
		cmocka_unit_test_setup(test_members_nxdomain_held_then_emptied,
				       setup),
		cmocka_unit_test_setup(
			test_members_nxdomain_due_when_the_hold_ends, setup),
		cmocka_unit_test_setup(test_members_dns_addresses, setup),
		cmocka_unit_test_setup(
			test_members_dns_reverse_names_for_hostname_policies,
			setup),
		cmocka_unit_test_setup(
			test_members_failed_question_keeps_its_members, setup),
		cmocka_unit_test_setup(test_members_srv_and_dns_combined,
				       setup),
		cmocka_unit_test_setup(
			test_members_srv_target_root_is_no_service, setup),
		cmocka_unit_test_setup(test_members_many_targets, setup),
		cmocka_unit_test_setup(
			test_members_clone_keeps_config_replicas_only, setup),
		cmocka_unit_test_setup(test_members_srv_weights_order_ties,
				       setup),
		cmocka_unit_test_setup(test_members_config_keys_validated,
				       setup),
		cmocka_unit_test_setup(
			test_members_srv_targets_resolved_together, setup),
		cmocka_unit_test_setup(test_members_failures_back_off, setup),
		cmocka_unit_test_setup(test_members_shared_answer_use, setup),
		cmocka_unit_test_setup(test_members_shared_answer_round_trip,
				       setup),
		cmocka_unit_test_setup(
			test_members_shared_answer_refuses_damage, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
