/* test_format.c - engine/format.c: the collector and observed sinks, a
 * hostent in the caller's buffer (every alignment, the exact size, one
 * byte short), and the gaih_addrtuple list of gethostbyname4_r (a tuple
 * the caller preallocated, the exact size, one byte short). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <nss.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"

static struct rlb_dns_addr v4(const char *text, uint16_t port)
{
	struct rlb_dns_addr a = {.family = AF_INET,
				 .socktype = SOCK_STREAM,
				 .addrlen = sizeof(struct sockaddr_in)};
	struct sockaddr_in *sin = (struct sockaddr_in *)&a.addr;

	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, text, &sin->sin_addr), 1);
	return a;
}

static struct rlb_dns_addr v6(const char *text, uint32_t scope)
{
	struct rlb_dns_addr a = {.family = AF_INET6,
				 .socktype = SOCK_STREAM,
				 .addrlen = sizeof(struct sockaddr_in6)};
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&a.addr;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_scope_id = scope;
	assert_int_equal(inet_pton(AF_INET6, text, &sin6->sin6_addr), 1);
	return a;
}

/* The collector takes what it is given, in order, as an answer would. */
static void collect(struct rlb_addr_list *l, const struct rlb_dns_addr *a,
		    size_t n)
{
	struct rlb_answer_sink s = rlb_collect_sink(l);

	for (size_t i = 0; i < n; i++)
		assert_int_equal(s.address(s.ctx, NULL, i, &a[i]),
				 RLB_ANSWER_MORE);
}

/* An answer of 10.0.0.1 (twice, two ports), ::1, 10.0.0.2, fe80::1%3. */
static void mixed(struct rlb_addr_list *l)
{
	struct rlb_dns_addr a[] = {v4("10.0.0.1", 9000), v6("::1", 0),
				   v4("10.0.0.1", 9440), v4("10.0.0.2", 9000),
				   v6("fe80::1", 3)};

	collect(l, a, sizeof(a) / sizeof(a[0]));
	assert_int_equal(l->n, 5);
}

static void test_unique_keeps_first_of_each(void **state)
{
	struct rlb_addr_list l = {0};

	(void)state;
	mixed(&l);
	assert_int_equal(rlb_addr_list_unique(&l, AF_INET), 2);
	assert_int_equal(
		ntohs(((struct sockaddr_in *)&l.addrs[0].addr)->sin_port),
		9000);
	assert_int_equal(
		((struct sockaddr_in *)&l.addrs[1].addr)->sin_addr.s_addr,
		inet_addr("10.0.0.2"));
	rlb_addr_list_free(&l);
	mixed(&l);
	assert_int_equal(rlb_addr_list_unique(&l, AF_UNSPEC), 4);
	assert_int_equal(l.addrs[1].family, AF_INET6);
	assert_int_equal(rlb_addr_list_unique(&l, AF_INET6), 2);
	rlb_addr_list_free(&l);
	assert_null(l.addrs);
}

/* A list in the caller's storage: no allocation while it fits, then on
 * the heap with what it held, in order; free leaves the storage alone. */
static void test_list_in_callers_storage_grows_to_heap(void **state)
{
	struct rlb_dns_addr room[2], a[5];
	struct rlb_addr_list l = RLB_ADDR_LIST_IN(room);
	char text[16];

	(void)state;
	for (size_t i = 0; i < 5; i++) {
		snprintf(text, sizeof(text), "10.0.0.%zu", i + 1);
		a[i] = v4(text, 9000);
	}
	collect(&l, a, 2);
	assert_ptr_equal(l.addrs, room);
	assert_false(l.on_heap);
	collect(&l, a + 2, 3);
	assert_ptr_not_equal(l.addrs, room);
	assert_true(l.on_heap);
	assert_int_equal(l.n, 5);
	for (size_t i = 0; i < 5; i++)
		assert_memory_equal(&l.addrs[i], &a[i], sizeof(a[i]));
	rlb_addr_list_free(&l);
	assert_null(l.addrs);
	/* Freed while still in the storage: nothing to free (ASan and
	 * valgrind would see a bad free). */
	l = RLB_ADDR_LIST_IN(room);
	collect(&l, a, 1);
	rlb_addr_list_free(&l);
	assert_int_equal(l.n, 0);
}

struct seen {
	size_t n;
	size_t idx[8];
};

static void observe(void *ctx, struct rlb_cluster *c, size_t idx,
		    const struct rlb_dns_addr *a)
{
	struct seen *s = ctx;

	(void)c;
	(void)a;
	s->idx[s->n++] = idx;
}

static bool skip_odd(void *ctx, const struct rlb_cluster *c, size_t idx)
{
	(void)ctx;
	(void)c;
	return idx % 2;
}

static void test_observed_sink_sees_what_is_taken(void **state)
{
	struct rlb_addr_list l = {0};
	struct rlb_answer_sink inner = rlb_collect_sink(&l), s;
	struct seen seen = {0};
	struct rlb_observed o = {&inner, observe, &seen};
	struct rlb_dns_addr a = v4("10.0.0.7", 1);

	(void)state;
	s = rlb_observed_sink(&o);
	assert_null(s.skip); /* the collector skips nothing */
	assert_null(s.literals);
	assert_int_equal(s.address(s.ctx, NULL, 4, &a), RLB_ANSWER_MORE);
	assert_int_equal(s.address(s.ctx, NULL, 2, &a), RLB_ANSWER_MORE);
	assert_int_equal(l.n, 2);
	assert_int_equal(seen.n, 2);
	assert_int_equal(seen.idx[0], 4);
	assert_int_equal(seen.idx[1], 2);
	/* The inner sink's skip is the wrapped one's. */
	inner.skip = skip_odd;
	s = rlb_observed_sink(&o);
	assert_true((*s.skip)(s.ctx, NULL, 3));
	assert_false((*s.skip)(s.ctx, NULL, 2));
	rlb_addr_list_free(&l);
}

static void test_hostent_every_alignment_exact_size(void **state)
{
	static const char hname[] = "ch-1.example", alias[] = "analytics";
	struct rlb_addr_list l = {0};
	char mem[512];

	(void)state;
	mixed(&l);
	rlb_addr_list_unique(&l, AF_INET);
	for (size_t off = 0; off < 8; off++) {
		char *buf = mem + off;
		size_t need = rlb_hostent_size(l.n, AF_INET, hname, alias, buf);
		struct hostent h;

		assert_true(need < sizeof(mem) - 16);
		memset(mem, 0x5a, sizeof(mem));
		assert_int_equal(rlb_format_hostent(&l, AF_INET, hname, alias,
						    &h, buf, need - 1),
				 ERANGE);
		assert_int_equal(rlb_format_hostent(&l, AF_INET, hname, alias,
						    &h, buf, need),
				 0);
		/* Nothing written past the size it said. */
		assert_int_equal((unsigned char)buf[need], 0x5a);
		assert_int_equal((uintptr_t)h.h_addr_list % sizeof(char *), 0);
		assert_true((char *)h.h_addr_list >= buf &&
			    (char *)h.h_addr_list < buf + sizeof(char *));
		assert_string_equal(h.h_name, hname);
		assert_string_equal(h.h_aliases[0], alias);
		assert_null(h.h_aliases[1]);
		assert_int_equal(h.h_addrtype, AF_INET);
		assert_int_equal(h.h_length, 4);
		assert_int_equal(*(uint32_t *)(void *)h.h_addr_list[0],
				 inet_addr("10.0.0.1"));
		assert_int_equal(*(uint32_t *)(void *)h.h_addr_list[1],
				 inet_addr("10.0.0.2"));
		assert_null(h.h_addr_list[2]);
	}
	rlb_addr_list_free(&l);
}

static void test_gaih_list_preallocated_first(void **state)
{
	static const char name[] = "analytics.cluster";
	struct rlb_addr_list l = {0};
	struct gaih_addrtuple pre, *pat;
	char mem[1024];

	(void)state;
	pat = NULL;
	assert_int_equal(rlb_format_gaih(&l, name, &pat, mem, sizeof(mem)),
			 ENOENT);
	mixed(&l);
	rlb_addr_list_unique(&l, AF_UNSPEC);
	for (int k = 0; k < 2; k++) {
		char *buf = mem + 3;
		size_t need = rlb_gaih_size(l.n, name, k == 1, buf);
		struct gaih_addrtuple *t;

		memset(mem, 0x5a, sizeof(mem));
		pat = k ? &pre : NULL;
		assert_int_equal(rlb_format_gaih(&l, name, &pat, buf, need - 1),
				 ERANGE);
		pat = k ? &pre : NULL;
		assert_int_equal(rlb_format_gaih(&l, name, &pat, buf, need), 0);
		assert_int_equal((unsigned char)buf[need], 0x5a);
		/* The caller's tuple is the head when it gave one. */
		assert_true(k ? pat == &pre : (char *)pat >= buf);
		t = pat;
		assert_int_equal(t->family, AF_INET);
		assert_int_equal(t->addr[0], inet_addr("10.0.0.1"));
		assert_string_equal(t->name, name);
		t = t->next;
		assert_int_equal(t->family, AF_INET6);
		assert_int_equal(((unsigned char *)t->addr)[15], 1);
		t = t->next;
		assert_int_equal(t->addr[0], inet_addr("10.0.0.2"));
		t = t->next;
		assert_int_equal(t->family, AF_INET6);
		assert_int_equal(t->scopeid, 3);
		assert_ptr_equal(t->name, pat->name); /* one name for all */
		assert_null(t->next);
	}
	rlb_addr_list_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unique_keeps_first_of_each),
		cmocka_unit_test(test_list_in_callers_storage_grows_to_heap),
		cmocka_unit_test(test_observed_sink_sees_what_is_taken),
		cmocka_unit_test(test_hostent_every_alignment_exact_size),
		cmocka_unit_test(test_gaih_list_preallocated_first),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
