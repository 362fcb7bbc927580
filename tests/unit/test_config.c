/* test_config.c - unit tests of config.c: parsing, validation, overlays. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/config_internal.h"
#include "engine/engine.h"

#define MINIMAL "clusters = ( { name = \"c\"; replicas = ( \"a\" ); } );\n"

static void dump_diag(const struct rlb_diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		print_message("diag: %s\n", d->msgs[i]);
}

static struct rlb_config *parse_ok(const char *text)
{
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	int rc;

	rc = rlb_config_parse_string(text, "t.conf", &cfg, &d);
	dump_diag(&d);
	assert_int_equal(rc, 0);
	assert_int_equal(d.n, 0);
	assert_non_null(cfg);
	rlb_diag_free(&d);
	return cfg;
}

/* Assert that d holds exactly the NULL-terminated messages, in order. */
static void check_diag_va(const struct rlb_diag *d, va_list ap)
{
	const char *want;
	size_t n = 0;

	while ((want = va_arg(ap, const char *))) {
		if (n >= d->n) {
			dump_diag(d);
			fail_msg("missing message: %s", want);
		}
		if (strcmp(d->msgs[n], want) != 0) {
			dump_diag(d);
			fail_msg("message %zu:\n got: %s\nwant: %s", n,
				 d->msgs[n], want);
		}
		n++;
	}
	if (n != d->n) {
		dump_diag(d);
		fail_msg("%zu messages, expected %zu", d->n, n);
	}
}

/* Parse text as "t.conf", expecting -EINVAL and exactly these messages. */
static void expect_errors(const char *text, ...)
{
	struct rlb_config *cfg = (struct rlb_config *)&cfg;
	struct rlb_config *const untouched = cfg;
	struct rlb_diag d = {0};
	va_list ap;

	assert_int_equal(rlb_config_parse_string(text, "t.conf", &cfg, &d),
			 -EINVAL);
	assert_ptr_equal(cfg, untouched);
	va_start(ap, text);
	check_diag_va(&d, ap);
	va_end(ap);
	rlb_diag_free(&d);
}

static void expect_diag(const struct rlb_diag *d, ...)
{
	va_list ap;

	va_start(ap, d);
	check_diag_va(d, ap);
	va_end(ap);
}

/* A config with one cluster "c" whose replicas list is `replicas`. */
static char *one_cluster(const char *extra, const char *replicas)
{
	char *s;

	assert_true(asprintf(&s,
			     "clusters = (\n"
			     "  { name = \"c\";\n"
			     "%s"
			     "    replicas = (\n"
			     "%s"
			     "    );\n"
			     "  }\n"
			     ");\n",
			     extra, replicas) > 0);
	return s;
}

static uint64_t identity_of(const char *key)
{
	return rlb_hash64(key, strlen(key), 0);
}

/* Temporary directory with files; removed by tmp_cleanup(). */
struct tmp {
	char dir[64];
};

static void tmp_make(struct tmp *t)
{
	strcpy(t->dir, "/tmp/rlb-test-config-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
}

static char *tmp_path(const struct tmp *t, const char *rel)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", t->dir, rel) > 0);
	return p;
}

static void tmp_write(const struct tmp *t, const char *rel, const char *text)
{
	char *p = tmp_path(t, rel);
	FILE *f;

	if (strchr(rel, '/')) {
		char *d = tmp_path(t, "apps.d");

		mkdir(d, 0700);
		free(d);
	}
	f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	free(p);
}

static void tmp_remove(const struct tmp *t, const char *rel)
{
	char *p = tmp_path(t, rel);

	unlink(p);
	free(p);
}

static void tmp_cleanup(const struct tmp *t)
{
	char *p = tmp_path(t, "apps.d");
	char cmd[128];

	rmdir(p);
	free(p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	assert_int_equal(system(cmd), 0);
}

/* The whole of a file as a NUL-terminated string (free()). */
static char *file_text(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/*
 * The fixtures (the .conf files of tests/data, the sample replicalb.conf and
 * etc/apps.d) as the trust rule wants them: copies of mode 0644 in a
 * private directory, whatever modes the checkout has (git archive and the
 * tarballs made from it write group-writable ones).
 */
static struct tmp data;

static const char *const data_files[] = {
	"cfg_errors.conf",	     "cfg_full.conf",
	"cfg_include.conf",	     "cfg_include_bad.conf",
	"cfg_include_bad_part.conf", "cfg_include_part.conf",
	"cfg_syntax.conf",
};
static const char *const etc_files[] = {
	"replicalb.conf",
	"apps.d/clickhouse-client.conf",
	"apps.d/curl.conf",
};

static void data_copy(const char *from, const char *rel)
{
	size_t len;
	char *text = file_text(from, &len);
	char *p = tmp_path(&data, rel);

	tmp_write(&data, rel, text);
	assert_int_equal(chmod(p, 0644), 0);
	free(p);
	free(text);
}

static int data_setup(void **state)
{
	char *from, *dir;

	tmp_make(&data);
	for (size_t i = 0; i < sizeof(data_files) / sizeof(*data_files); i++) {
		assert_true(asprintf(&from, "%s/%s", TEST_DATA_DIR,
				     data_files[i]) > 0);
		data_copy(from, data_files[i]);
		free(from);
	}
	dir = tmp_path(&data, "etc");
	assert_int_equal(mkdir(dir, 0755), 0);
	free(dir);
	dir = tmp_path(&data, "etc/apps.d");
	assert_int_equal(mkdir(dir, 0755), 0);
	free(dir);
	for (size_t i = 0; i < sizeof(etc_files) / sizeof(*etc_files); i++) {
		char *rel;

		assert_true(asprintf(&from, "%s/../../etc/%s", TEST_DATA_DIR,
				     etc_files[i]) > 0);
		assert_true(asprintf(&rel, "etc/%s", etc_files[i]) > 0);
		data_copy(from, rel);
		free(from);
		free(rel);
	}
	return 0;
}

static int data_teardown(void **state)
{
	tmp_cleanup(&data);
	return 0;
}

/*
 * D("/cfg_full.conf"): the copy's directory followed by rest, for paths
 * and for messages that start with one. The result stays valid for the
 * next 23 calls.
 */
static const char *D(const char *rest)
{
	static char ring[24][320];
	static unsigned next;
	char *s = ring[next++ % 24];

	assert_true((size_t)snprintf(s, sizeof(ring[0]), "%s%s", data.dir,
				     rest) < sizeof(ring[0]));
	return s;
}

/* ---------------------------------------------------------------- */

static void test_config_defaults(void **state)
{
	struct rlb_config *cfg = parse_ok(MINIMAL);
	struct rlb_cluster *c;

	assert_int_equal(cfg->defaults.load_balancing, RLB_POLICY_RANDOM);
	assert_int_equal(cfg->defaults.first_offset, 0);
	assert_int_equal(cfg->defaults.least_request_choices, 2);
	assert_true(cfg->defaults.least_request_bias == 1.0);
	assert_int_equal(cfg->defaults.half_life, 60);
	assert_int_equal(cfg->defaults.error_cap, 1000);
	assert_int_equal(cfg->defaults.max_ignored_errors, 0);
	assert_int_equal(cfg->defaults.dns_cache_ttl, 15);
	assert_int_equal(cfg->defaults.connect_timeout_ms, 1000);
	assert_false(cfg->defaults.connect_failover);
	assert_null(cfg->local_hostname);
	assert_null(cfg->state_dir);
	assert_int_equal(cfg->log_level, RLB_LOG_WARNING);
	assert_int_equal(cfg->log_target, RLB_LOG_STDERR);
	assert_int_equal(cfg->files.n, 0);
	assert_int_equal(cfg->nclusters, 1);
	c = &cfg->clusters[0];
	assert_string_equal(c->name, "c");
	assert_memory_equal(&c->s, &cfg->defaults, sizeof(c->s));
	assert_null(c->local_hostname);
	assert_int_equal(c->port, 0);
	assert_null(c->view);
	assert_null(c->health);
	assert_string_equal(c->file, "t.conf");
	assert_int_equal(c->line, 1);
	assert_int_equal(c->nreplicas, 1);
	assert_string_equal(c->replicas[0].host, "a");
	assert_int_equal(c->replicas[0].port, 0);
	assert_int_equal(c->replicas[0].priority, 1);
	assert_int_equal(c->replicas[0].npinned, 0);
	assert_null(c->replicas[0].pinned);
	assert_int_equal(c->replicas[0].identity, identity_of("a:0"));
	rlb_config_free(cfg);
}

static void test_config_full_fixture(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_full.conf"),
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct rlb_cluster *c;
	struct rlb_replica *r;

	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	dump_diag(&d);
	assert_int_equal(d.n, 0);
	assert_int_equal(cfg->defaults.load_balancing, RLB_POLICY_IN_ORDER);
	assert_int_equal(cfg->defaults.first_offset, 2);
	assert_int_equal(cfg->defaults.half_life, 30);
	assert_int_equal(cfg->defaults.error_cap, 500);
	assert_int_equal(cfg->defaults.max_ignored_errors, 1);
	assert_int_equal(cfg->defaults.dns_cache_ttl, 5);
	assert_int_equal(cfg->defaults.connect_timeout_ms, 250);
	assert_string_equal(cfg->local_hostname, "ch-01-1.dc1.example.net");
	assert_string_equal(cfg->state_dir, "/run/replicalb-test");
	assert_int_equal(cfg->log_level, RLB_LOG_DEBUG);
	assert_int_equal(cfg->log_target, RLB_LOG_SYSLOG);
	assert_int_equal(cfg->files.n, 1);
	assert_string_equal(cfg->files.stamps[0].path, D("/cfg_full.conf"));
	assert_true(cfg->files.stamps[0].exists);
	assert_int_equal(cfg->nclusters, 2);

	/* Every setting overridden by the cluster. */
	c = &cfg->clusters[0];
	assert_string_equal(c->name, "analytics.cluster");
	assert_int_equal(c->name_hash, identity_of("analytics.cluster"));
	assert_string_equal(c->file, D("/cfg_full.conf"));
	assert_int_equal(c->line, 15);
	assert_int_equal(c->s.load_balancing, RLB_POLICY_NEAREST_HOSTNAME);
	assert_int_equal(c->s.first_offset, 1);
	assert_int_equal(c->s.half_life, 0);
	assert_int_equal(c->s.error_cap, 10);
	assert_int_equal(c->s.max_ignored_errors, 3);
	assert_int_equal(c->s.dns_cache_ttl, 0);
	assert_int_equal(c->s.connect_timeout_ms, 100);
	assert_string_equal(c->local_hostname, "ch-02-1.dc2.example.net");
	assert_int_equal(c->port, 9000);
	assert_int_equal(c->nreplicas, 7);

	r = c->replicas;
	assert_string_equal(r[0].host, "ch-01-1.dc1.example.net");
	assert_int_equal(r[0].port, 9000); /* the cluster's */
	assert_int_equal(r[0].line, 27);
	assert_string_equal(r[1].host, "ch-01-2.dc2.example.net");
	assert_int_equal(r[1].port, 9440);
	assert_string_equal(r[2].host, "2001:db8::7");
	assert_int_equal(r[2].port, 9001);
	assert_string_equal(r[3].host, "2001:db8::8");
	assert_int_equal(r[3].port, 9000);
	assert_string_equal(r[4].host, "2001:db8::9");
	assert_int_equal(r[4].port, 9000);
	assert_string_equal(r[5].host, "ch-01-3.dc3.example.net");
	assert_int_equal(r[5].port, 9002);
	assert_int_equal(r[5].priority, 2);
	assert_int_equal(r[5].npinned, 2);
	assert_string_equal(r[5].pinned[0], "10.1.2.3");
	assert_string_equal(r[5].pinned[1], "::1");
	assert_int_equal(r[5].line, 32);
	/* Host kept as written; identity is case-insensitive. */
	assert_string_equal(r[6].host, "CH-01-4.dc4.example.net");
	assert_int_equal(r[6].priority, 0);
	assert_int_equal(r[6].npinned, 1);
	assert_string_equal(r[6].pinned[0], "192.0.2.4");
	assert_int_equal(r[6].identity,
			 identity_of("ch-01-4.dc4.example.net:9000"));
	assert_int_equal(r[1].identity,
			 identity_of("ch-01-2.dc2.example.net:9440"));
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(r[i].priority, 1);

	/* Nothing overridden: the top level's settings. */
	c = &cfg->clusters[1];
	assert_string_equal(c->name, "web.cluster");
	assert_memory_equal(&c->s, &cfg->defaults, sizeof(c->s));
	assert_null(c->local_hostname);
	assert_int_equal(c->port, 0);
	assert_int_equal(c->nreplicas, 2);
	assert_string_equal(c->replicas[0].host, "web1");
	assert_int_equal(c->replicas[0].port, 0);
	assert_string_equal(c->replicas[1].host, "web2");
	assert_int_equal(c->replicas[1].port, 8080);
	rlb_config_free(cfg);
	rlb_diag_free(&d);
}

static void test_config_int64_values(void **state)
{
	struct rlb_config *cfg = parse_ok(
		"distributed_replica_error_half_life = 60L;\n"
		"distributed_replica_error_cap = 5000000000L;\n"
		"clusters = ( { name = \"c\"; port = 9000L;\n"
		"  replicas = ( { host = \"a\"; port = 1L; priority = 7L; } );"
		" } );\n");

	assert_int_equal(cfg->defaults.half_life, 60);
	assert_int_equal(cfg->defaults.error_cap, 5000000000LL);
	assert_int_equal(cfg->clusters[0].port, 9000);
	assert_int_equal(cfg->clusters[0].replicas[0].port, 1);
	assert_int_equal(cfg->clusters[0].replicas[0].priority, 7);
	rlb_config_free(cfg);
}

static void test_config_replica_forms(void **state)
{
	char *text = one_cluster("", "      \"db1\",\n"
				     "      \"db2:1\",\n"
				     "      \"db3:65535\",\n"
				     "      \"[::1]:9000\",\n"
				     "      \"[fe80::1]\",\n"
				     "      \"::2\",\n"
				     "      \"10.0.0.1:80\",\n"
				     "      { host = \"::3\"; port = 5; }\n");
	struct rlb_config *cfg = parse_ok(text);
	struct rlb_replica *r = cfg->clusters[0].replicas;
	static const struct {
		const char *host;
		int port;
		const char *id;
	} want[] = {
		{"db1", 0, "db1:0"},
		{"db2", 1, "db2:1"},
		{"db3", 65535, "db3:65535"},
		{"::1", 9000, "::1:9000"},
		{"fe80::1", 0, "fe80::1:0"},
		{"::2", 0, "::2:0"},
		{"10.0.0.1", 80, "10.0.0.1:80"},
		{"::3", 5, "::3:5"},
	};

	assert_int_equal(cfg->clusters[0].nreplicas, 8);
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
		assert_string_equal(r[i].host, want[i].host);
		assert_int_equal(r[i].port, want[i].port);
		assert_int_equal(r[i].identity, identity_of(want[i].id));
		assert_int_equal(r[i].line, 4 + (int)i);
	}
	rlb_config_free(cfg);
	free(text);
}

static void test_config_replica_array(void **state)
{
	struct rlb_config *cfg =
		parse_ok("clusters = ( { name = \"c\"; port = 8123;\n"
			 "  replicas = [ \"a\", \"b:1\" ]; } );\n");

	assert_int_equal(cfg->clusters[0].nreplicas, 2);
	assert_int_equal(cfg->clusters[0].replicas[0].port, 8123);
	assert_int_equal(cfg->clusters[0].replicas[1].port, 1);
	rlb_config_free(cfg);
}

static void test_config_string_element_lines(void **state)
{
	struct rlb_config *cfg = parse_ok("clusters = (\n"
					  "  { name = \"c\"; replicas = (\n"
					  "      \"a\",\n"
					  "      \"b\"\n"
					  "\n"
					  "      # the last one\n"
					  "    );\n"
					  "  }\n"
					  ");\n");

	assert_int_equal(cfg->clusters[0].replicas[0].line, 3);
	/* libconfig says 7, the line of the ")". */
	assert_int_equal(cfg->clusters[0].replicas[1].line, 4);
	rlb_config_free(cfg);
	expect_errors("clusters = ( { name = \"c\"; replicas = [\n"
		      "  \"a:1\",\n"
		      "  \"a:x\"\n"
		      "]; } );\n",
		      "t.conf:3: invalid port \"x\" in replica \"a:x\"", NULL);
}

static void test_config_cluster_name_normalized(void **state)
{
	struct rlb_config *cfg =
		parse_ok("clusters = ( { name = \"Analytics.CLUSTER.\"; "
			 "replicas = ( \"a\" ); } );\n");

	assert_string_equal(cfg->clusters[0].name, "analytics.cluster");
	assert_int_equal(cfg->clusters[0].name_hash,
			 rlb_hash64("analytics.cluster", 17, 0));
	rlb_config_free(cfg);
}

static void test_config_find(void **state)
{
	struct rlb_config *cfg = parse_ok(
		"clusters = (\n"
		"  { name = \"analytics.cluster\"; replicas = ( \"a\" ); },\n"
		"  { name = \"Web.\"; replicas = ( \"b\" ); }\n"
		");\n");
	struct rlb_cluster *a = &cfg->clusters[0], *w = &cfg->clusters[1];

	assert_ptr_equal(rlb_config_find(cfg, "analytics.cluster"), a);
	assert_ptr_equal(rlb_config_find(cfg, "ANALYTICS.Cluster"), a);
	assert_ptr_equal(rlb_config_find(cfg, "analytics.cluster."), a);
	assert_null(rlb_config_find(cfg, "analytics.cluster.."));
	assert_null(rlb_config_find(cfg, "analytics.cluste"));
	assert_null(rlb_config_find(cfg, "analytics.clusterx"));
	assert_null(rlb_config_find(cfg, "analytics"));
	assert_ptr_equal(rlb_config_find(cfg, "web"), w);
	assert_ptr_equal(rlb_config_find(cfg, "WEB."), w);
	assert_null(rlb_config_find(cfg, "we"));
	assert_null(rlb_config_find(cfg, ""));
	assert_null(rlb_config_find(cfg, "."));
	assert_null(rlb_config_find(cfg, NULL));
	assert_null(rlb_config_find(NULL, "web"));
	rlb_config_free(cfg);
}

/*
 * Many clusters: every name is found through the index (any case, one
 * trailing dot), no other is, and the index is the scan's equal.
 */
static void test_config_find_many(void **state)
{
	size_t cap = 600 * 64, off;
	char *text = malloc(cap), name[32], *longname;
	struct rlb_config *cfg;
	uint32_t *index = NULL;

	assert_non_null(text);
	off = (size_t)snprintf(text, cap, "clusters = (\n");
	for (int i = 0; i < 600; i++)
		off += (size_t)snprintf(text + off, cap - off,
					"{ name = \"c%d.cluster\"; replicas = "
					"( \"h\" ); }%s\n",
					i, i < 599 ? "," : "");
	snprintf(text + off, cap - off, ");\n");
	cfg = parse_ok(text);
	assert_non_null(cfg->index);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 600; i++) {
			snprintf(name, sizeof(name), "C%d.Cluster%s", i,
				 i % 2 ? "." : "");
			assert_ptr_equal(rlb_config_find(cfg, name),
					 &cfg->clusters[i]);
		}
		assert_null(rlb_config_find(cfg, "c600.cluster"));
		assert_null(rlb_config_find(cfg, "c1.cluster.."));
		/* Then the same answers without the index. */
		if (pass == 0) {
			index = cfg->index;
			cfg->index = NULL;
		} else {
			cfg->index = index;
		}
	}
	longname = malloc(1000);
	assert_non_null(longname);
	memset(longname, 'a', 999);
	longname[999] = '\0';
	assert_null(rlb_config_find(cfg, longname));
	free(longname);
	rlb_config_free(cfg);
	free(text);
}

static void test_config_unknown_policy_suggests(void **state)
{
	expect_errors("log_level = \"info\";\n" MINIMAL
		      "load_balancing = \"nearest\";\n",
		      "t.conf:3: unknown load_balancing \"nearest\"; did you "
		      "mean \"nearest_hostname\"?",
		      NULL);
}

static void test_config_unknown_policy_lists_valid(void **state)
{
	expect_errors(MINIMAL "load_balancing = \"zzzzzzzzzz\";\n",
		      "t.conf:2: unknown load_balancing \"zzzzzzzzzz\"; "
		      "valid: random, nearest_hostname, "
		      "hostname_levenshtein_distance, "
		      "hostname_longest_common_prefix, "
		      "hostname_longest_common_suffix, in_order, "
		      "first_or_random, round_robin, least_request",
		      NULL);
}

static void test_config_policy_names(void **state)
{
	for (int p = 0; p < RLB_POLICY_COUNT; p++) {
		char text[256];
		struct rlb_config *cfg;

		snprintf(text, sizeof(text),
			 "load_balancing = \"%s\";\n" MINIMAL,
			 rlb_policy_name((enum rlb_policy)p));
		cfg = parse_ok(text);
		assert_int_equal(cfg->defaults.load_balancing, p);
		assert_int_equal(cfg->clusters[0].s.load_balancing, p);
		rlb_config_free(cfg);
	}
}

static void test_config_unknown_keys(void **state)
{
	char *text = one_cluster("    load_balancer = \"random\";\n"
				 "    colour = 1;\n",
				 "      { host = \"h\"; prio = 2; },\n"
				 "      { host = \"i\"; zone = \"x\"; }\n");
	char *all;

	assert_true(asprintf(&all, "%slog_levle = \"info\";\nfoo = 1;\n",
			     text) > 0);
	expect_errors(all,
		      "t.conf:3: unknown cluster setting \"load_balancer\"; "
		      "did you mean \"load_balancing\"?",
		      "t.conf:4: unknown cluster setting \"colour\"",
		      "t.conf:6: unknown replica setting \"prio\"; did you "
		      "mean \"priority\"?",
		      "t.conf:7: unknown replica setting \"zone\"",
		      "t.conf:11: unknown setting \"log_levle\"; did you mean "
		      "\"log_level\"?",
		      "t.conf:12: unknown setting \"foo\"", NULL);
	free(all);
	free(text);
}

static void test_config_scope_errors(void **state)
{
	expect_errors("name = \"x\";\n"
		      "port = 9000;\n"
		      "replicas = ( \"a\" );\n"
		      "clusters = ( { name = \"c\"; replicas = ( \"a\" );\n"
		      "  state_dir = \"/x\";\n"
		      "  log_level = \"debug\";\n"
		      "  log_target = \"syslog\"; } );\n",
		      "t.conf:1: name is only valid inside a cluster",
		      "t.conf:2: port is only valid inside a cluster",
		      "t.conf:3: replicas is only valid inside a cluster",
		      "t.conf:5: state_dir is only valid at the top level",
		      "t.conf:6: log_level is only valid at the top level",
		      "t.conf:7: log_target is only valid at the top level",
		      NULL);
}

/* A bool: top-level default, inherited by clusters, overridden per cluster
 * and by the app file. */
static void test_config_connect_failover(void **state)
{
	struct rlb_config_source src = {.app = "cf"};
	struct rlb_config *cfg;
	struct rlb_diag d = {0};
	struct tmp t;

	cfg = parse_ok("connect_failover = true;\n"
		       "clusters = (\n"
		       "  { name = \"a\"; replicas = ( \"a1\" ); },\n"
		       "  { name = \"b\"; connect_failover = false;\n"
		       "    replicas = ( \"b1\" ); }\n"
		       ");\n");
	assert_true(cfg->defaults.connect_failover);
	assert_true(rlb_config_find(cfg, "a")->s.connect_failover);
	assert_false(rlb_config_find(cfg, "b")->s.connect_failover);
	rlb_config_free(cfg);

	cfg = parse_ok("clusters = (\n"
		       "  { name = \"a\"; replicas = ( \"a1\" ); },\n"
		       "  { name = \"b\"; connect_failover = true;\n"
		       "    replicas = ( \"b1\" ); }\n"
		       ");\n");
	assert_false(cfg->defaults.connect_failover);
	assert_false(rlb_config_find(cfg, "a")->s.connect_failover);
	assert_true(rlb_config_find(cfg, "b")->s.connect_failover);
	rlb_config_free(cfg);

	expect_errors("connect_failover = 1;\n"
		      "clusters = ( { name = \"c\"; replicas = ( \"a\" );\n"
		      "  connect_failover = \"yes\"; } );\n"
		      "connect_failvoer = true;\n",
		      "t.conf:1: connect_failover must be true or false",
		      "t.conf:3: connect_failover must be true or false",
		      "t.conf:4: unknown setting \"connect_failvoer\"; did you "
		      "mean \"connect_failover\"?",
		      NULL);

	/* The app file's top level beats the main file's. */
	tmp_make(&t);
	tmp_write(&t, "m.conf", "connect_failover = true;\n" MINIMAL);
	tmp_write(&t, "apps.d/cf.conf", "connect_failover = false;\n");
	src.path = tmp_path(&t, "m.conf");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(d.n, 0);
	assert_false(cfg->defaults.connect_failover);
	assert_false(cfg->clusters[0].s.connect_failover);
	rlb_config_free(cfg);
	free((char *)src.path);
	tmp_cleanup(&t);
}

static void test_config_wrong_types(void **state)
{
	expect_errors("load_balancing = 1;\n"
		      "dns_cache_ttl = \"15\";\n"
		      "connect_timeout_ms = 1.5;\n"
		      "distributed_replica_error_cap = true;\n"
		      "local_hostname = [ \"a\" ];\n"
		      "state_dir = 1;\n"
		      "log_level = 3;\n"
		      "log_target = false;\n"
		      "clusters = (\n"
		      "  { name = 5; replicas = \"a\"; },\n"
		      "  { name = \"d\"; port = \"80\"; replicas = ( 1,\n"
		      "    { host = 5; },\n"
		      "    { host = \"h\"; port = 1.0; priority = \"1\";\n"
		      "      address = 10; },\n"
		      "    { host = \"i\"; address = ( \"10.0.0.1\", 7 ); }\n"
		      "  ); },\n"
		      "  \"e\"\n"
		      ");\n",
		      "t.conf:1: load_balancing must be a string",
		      "t.conf:2: dns_cache_ttl must be an integer",
		      "t.conf:3: connect_timeout_ms must be an integer",
		      "t.conf:4: distributed_replica_error_cap must be an "
		      "integer",
		      "t.conf:5: local_hostname must be a string",
		      "t.conf:6: state_dir must be a string",
		      "t.conf:7: log_level must be a string",
		      "t.conf:8: log_target must be a string",
		      "t.conf:10: name must be a string",
		      "t.conf:10: replicas must be a list",
		      "t.conf:11: port must be an integer",
		      "t.conf:11: replica must be a string or a group "
		      "{ host = ...; }",
		      "t.conf:12: host must be a string",
		      "t.conf:13: port must be an integer",
		      "t.conf:13: priority must be an integer",
		      "t.conf:14: address must be a string or a list of "
		      "strings",
		      "t.conf:15: address must be a string or a list of "
		      "strings",
		      "t.conf:17: cluster must be a group { name = ...; "
		      "replicas = ...; }",
		      NULL);
	expect_errors("clusters = { a = 1; };\n",
		      "t.conf:1: clusters must be a list ( { ... }, ... )",
		      NULL);
}

static void test_config_negative_numbers(void **state)
{
	expect_errors(
		"load_balancing_first_offset = -1;\n"
		"distributed_replica_error_half_life = -60;\n"
		"distributed_replica_error_cap = -1000L;\n"
		"distributed_replica_max_ignored_errors = -2;\n"
		"dns_cache_ttl = -15;\n"
		"connect_timeout_ms = -1;\n"
		"clusters = ( { name = \"c\";\n"
		"  distributed_replica_error_cap = -3;\n"
		"  port = -9000;\n"
		"  replicas = ( { host = \"a\"; priority = -1; } ); } );\n",
		"t.conf:1: load_balancing_first_offset must not be "
		"negative (-1)",
		"t.conf:2: distributed_replica_error_half_life must not "
		"be negative (-60)",
		"t.conf:3: distributed_replica_error_cap must not be "
		"negative (-1000)",
		"t.conf:4: distributed_replica_max_ignored_errors must "
		"not be negative (-2)",
		"t.conf:5: dns_cache_ttl must not be negative (-15)",
		"t.conf:6: connect_timeout_ms must not be negative (-1)",
		"t.conf:8: distributed_replica_error_cap must not be "
		"negative (-3)",
		"t.conf:9: port -9000 out of range 1..65535",
		"t.conf:10: priority must not be negative (-1)", NULL);
}

/*
 * least_request's two keys (design.md §3.4): defaults 2 and 1.0, given at
 * the top level and overridden per cluster; the bias as a float or a
 * whole number.
 */
static void test_config_least_request_keys(void **state)
{
	struct rlb_config *cfg = parse_ok(
		"load_balancing = \"least_request\";\n"
		"load_balancing_least_request_choice_count = 3;\n"
		"load_balancing_least_request_active_request_bias = 0.5;\n"
		"clusters = (\n"
		"  { name = \"a\"; replicas = ( \"x\" ); },\n"
		"  { name = \"b\"; replicas = ( \"x\" );\n"
		"    load_balancing_least_request_choice_count = 1;\n"
		"    load_balancing_least_request_active_request_bias = 2; },\n"
		"  { name = \"c\"; replicas = ( \"x\" );\n"
		"    load_balancing_least_request_active_request_bias = 0.0; }"
		"\n);\n");
	const struct rlb_cluster *a = rlb_config_find(cfg, "a");
	const struct rlb_cluster *b = rlb_config_find(cfg, "b");
	const struct rlb_cluster *c = rlb_config_find(cfg, "c");

	assert_int_equal(cfg->defaults.load_balancing,
			 RLB_POLICY_LEAST_REQUEST);
	assert_int_equal(a->s.least_request_choices, 3);
	assert_true(a->s.least_request_bias == 0.5);
	assert_int_equal(b->s.least_request_choices, 1);
	assert_true(b->s.least_request_bias == 2.0);
	assert_int_equal(c->s.least_request_choices, 3);
	assert_true(c->s.least_request_bias == 0.0);
	rlb_config_free(cfg);
}

/* A choice count below 1 or a negative bias is an error at its line. */
static void test_config_least_request_bad_values(void **state)
{
	expect_errors(
		"load_balancing_least_request_choice_count = 0;\n"
		"load_balancing_least_request_active_request_bias = -0.5;\n"
		"clusters = ( { name = \"c\"; replicas = ( \"a\" );\n"
		"  load_balancing_least_request_choice_count = -2;\n"
		"  load_balancing_least_request_active_request_bias = -1;\n"
		"  load_balancing = \"least_request\"; },\n"
		"  { name = \"d\"; replicas = ( \"a\" );\n"
		"  load_balancing_least_request_active_request_bias = \"1\";\n"
		"  load_balancing_least_request_choice_count = 1.5; } );\n",
		"t.conf:1: load_balancing_least_request_choice_count 0 below "
		"the minimum 1",
		"t.conf:2: load_balancing_least_request_active_request_bias "
		"must not be negative (-0.5)",
		"t.conf:4: load_balancing_least_request_choice_count must not "
		"be negative (-2)",
		"t.conf:5: load_balancing_least_request_active_request_bias "
		"must not be negative (-1)",
		"t.conf:8: load_balancing_least_request_active_request_bias "
		"must be a number",
		"t.conf:9: load_balancing_least_request_choice_count must be "
		"an integer",
		NULL);
}

/*
 * Hedged connects' keys (design.md §5.10): defaults true and 50 ms, at
 * the top level and per cluster; a hedge time below 1 ms, or a value of
 * the wrong type, is an error at its line.
 */
static void test_config_hedge_keys(void **state)
{
	struct rlb_config *cfg =
		parse_ok("clusters = (\n"
			 "  { name = \"a\"; replicas = ( \"x\" ); },\n"
			 "  { name = \"b\"; replicas = ( \"x\" );\n"
			 "    use_hedged_requests = false;\n"
			 "    hedged_connection_timeout_ms = 120; } );\n");
	const struct rlb_cluster *a = rlb_config_find(cfg, "a");
	const struct rlb_cluster *b = rlb_config_find(cfg, "b");

	assert_true(cfg->defaults.use_hedged_requests);
	assert_int_equal(cfg->defaults.hedged_connection_timeout_ms, 50);
	assert_true(a->s.use_hedged_requests);
	assert_int_equal(a->s.hedged_connection_timeout_ms, 50);
	assert_false(b->s.use_hedged_requests);
	assert_int_equal(b->s.hedged_connection_timeout_ms, 120);
	rlb_config_free(cfg);

	cfg = parse_ok("use_hedged_requests = false;\n"
		       "hedged_connection_timeout_ms = 7;\n"
		       "clusters = ( { name = \"a\"; replicas = ( \"x\" ); } "
		       ");\n");
	a = rlb_config_find(cfg, "a");
	assert_false(a->s.use_hedged_requests);
	assert_int_equal(a->s.hedged_connection_timeout_ms, 7);
	rlb_config_free(cfg);

	expect_errors("hedged_connection_timeout_ms = 0;\n"
		      "clusters = ( { name = \"c\"; replicas = ( \"a\" );\n"
		      "  use_hedged_requests = 1; } );\n",
		      "t.conf:1: hedged_connection_timeout_ms 0 below the "
		      "minimum 1",
		      "t.conf:3: use_hedged_requests must be true or false",
		      NULL);
	(void)state;
}

static void test_config_zero_values_allowed(void **state)
{
	struct rlb_config *cfg = parse_ok(
		"distributed_replica_error_half_life = 0;\n"
		"distributed_replica_error_cap = 0;\n"
		"dns_cache_ttl = 0;\n"
		"connect_timeout_ms = 0;\n"
		"clusters = ( { name = \"c\";\n"
		"  replicas = ( { host = \"a\"; priority = 0; } ); } );\n");

	assert_int_equal(cfg->defaults.half_life, 0);
	assert_int_equal(cfg->defaults.error_cap, 0);
	assert_int_equal(cfg->clusters[0].replicas[0].priority, 0);
	rlb_config_free(cfg);
}

static void test_config_port_range(void **state)
{
	char *text = one_cluster("    port = 0;\n",
				 "      \"a:0\",\n"
				 "      \"b:65536\",\n"
				 "      \"c:99999999999999999999\",\n"
				 "      \"d:http\",\n"
				 "      \"e:\",\n"
				 "      \"[::1]:-1\",\n"
				 "      \"[::1]x\",\n"
				 "      \"[::1\",\n"
				 "      { host = \"f\"; port = 65536; },\n"
				 "      { host = \"g\"; port = 0; },\n"
				 "      { host = \"h:80\"; }\n");

	expect_errors(text, "t.conf:3: port 0 out of range 1..65535",
		      "t.conf:5: port 0 out of range 1..65535",
		      "t.conf:6: port 65536 out of range 1..65535",
		      "t.conf:7: port 99999999999999999999 out of range "
		      "1..65535",
		      "t.conf:8: invalid port \"http\" in replica \"d:http\"",
		      "t.conf:9: invalid port \"\" in replica \"e:\"",
		      "t.conf:10: invalid port \"-1\" in replica \"[::1]:-1\"",
		      "t.conf:11: invalid replica \"[::1]x\"; expected "
		      "\"[address]\" or \"[address]:port\"",
		      "t.conf:12: invalid replica \"[::1\"; expected "
		      "\"[address]\" or \"[address]:port\"",
		      "t.conf:13: port 65536 out of range 1..65535",
		      "t.conf:14: port 0 out of range 1..65535",
		      "t.conf:15: host \"h:80\" must not include a port; use "
		      "port = N",
		      NULL);
	free(text);
}

static void test_config_colons_must_be_ipv6(void **state)
{
	char *text = one_cluster("", "      \"a:1:2\",\n"
				     "      \"fd00::5\",\n"
				     "      \"::ffff:10.0.0.1\"\n");

	expect_errors(text,
		      "t.conf:4: invalid replica \"a:1:2\"; expected "
		      "\"host\", \"host:port\", \"[address]:port\" or an "
		      "IPv6 address",
		      NULL);
	free(text);
}

static void test_config_host_strings(void **state)
{
	char long_host[RLB_MAX_HOST + 2];
	char *replicas, *text;
	struct rlb_config *cfg;

	memset(long_host, 'h', sizeof(long_host) - 1);
	long_host[RLB_MAX_HOST + 1] = '\0';
	assert_true(asprintf(&replicas,
			     "      \"\",\n"
			     "      \"%s\",\n"
			     "      \"a b\",\n"
			     "      \"[]:80\",\n"
			     "      { host = \"\"; },\n"
			     "      { host = \"[::1]\"; },\n"
			     "      { port = 80; }\n",
			     long_host) > 0);
	text = one_cluster("", replicas);
	expect_errors(text, "t.conf:4: empty host",
		      "t.conf:5: host longer than 255 bytes",
		      "t.conf:6: invalid character in host \"a b\"",
		      "t.conf:7: empty host", "t.conf:8: empty host",
		      "t.conf:9: invalid character in host \"[::1]\"",
		      "t.conf:10: replica has no host", NULL);
	free(text);
	free(replicas);

	/* Exactly RLB_MAX_HOST bytes is fine. */
	long_host[RLB_MAX_HOST] = '\0';
	assert_true(asprintf(&replicas, "      \"%s:1\"\n", long_host) > 0);
	text = one_cluster("", replicas);
	cfg = parse_ok(text);
	assert_int_equal(strlen(cfg->clusters[0].replicas[0].host),
			 RLB_MAX_HOST);
	rlb_config_free(cfg);
	free(text);
	free(replicas);
}

static void test_config_cluster_name_errors(void **state)
{
	expect_errors("clusters = (\n"
		      "  { name = \"\"; replicas = ( \"a\" ); },\n"
		      "  { name = \".\"; replicas = ( \"a\" ); },\n"
		      "  { name = \"a b\"; replicas = ( \"a\" ); },\n"
		      "  { replicas = ( \"a\" ); },\n"
		      "  { name = \"n\"; }\n"
		      ");\n",
		      "t.conf:2: empty cluster name",
		      "t.conf:3: empty cluster name",
		      "t.conf:4: invalid character in cluster name \"a b\"",
		      "t.conf:5: cluster has no name",
		      "t.conf:6: cluster \"n\" has no replicas and no srv or "
		      "dns source",
		      NULL);
}

static void test_config_empty_replicas(void **state)
{
	expect_errors("clusters = (\n"
		      "  { name = \"a\";\n"
		      "    replicas = ( ); },\n"
		      "  { name = \"b\"; replicas = [ ]; }\n"
		      ");\n",
		      "t.conf:3: empty replicas list",
		      "t.conf:4: empty replicas list", NULL);
}

static void test_config_missing_clusters(void **state)
{
	struct rlb_config *cfg;

	expect_errors("load_balancing = \"random\";\n",
		      "t.conf:1: missing \"clusters\" list", NULL);
	expect_errors("", "t.conf:1: missing \"clusters\" list", NULL);
	/* An empty list is a valid config that matches nothing. */
	cfg = parse_ok("clusters = ( );\n");
	assert_int_equal(cfg->nclusters, 0);
	assert_null(rlb_config_find(cfg, "a"));
	rlb_config_free(cfg);
}

static void test_config_duplicate_clusters(void **state)
{
	expect_errors(
		"clusters = (\n"
		"  { name = \"Analytics.cluster\"; replicas = ( \"a\" ); },\n"
		"  { name = \"b\"; replicas = ( \"a\" ); },\n"
		"  {\n"
		"    name = \"analytics.CLUSTER.\"; replicas = ( \"a\" ); }\n"
		");\n",
		"t.conf:5: duplicate cluster \"analytics.cluster\" "
		"(first at line 2)",
		NULL);
}

static void test_config_duplicate_replicas(void **state)
{
	char *text = one_cluster("    port = 9000;\n",
				 "      \"db1\",\n"
				 "      \"DB1:9000\",\n"
				 "      \"db1:9001\",\n"
				 "      { host = \"db1\"; port = 9001; },\n"
				 "      \"[::1]:9000\",\n"
				 "      \"::1\",\n"
				 "      \"db2\"\n");

	expect_errors(text,
		      "t.conf:6: duplicate replica \"DB1:9000\" (first at "
		      "line 5)",
		      "t.conf:8: duplicate replica \"db1:9001\" (first at "
		      "line 7)",
		      "t.conf:10: duplicate replica \"[::1]:9000\" (first at "
		      "line 9)",
		      NULL);
	free(text);
}

static void test_config_replica_limit(void **state)
{
	size_t n = RLB_MAX_REPLICAS + 1, len = 64 + n * 16;
	char *text = malloc(len);
	struct rlb_config *cfg;
	size_t off;

	assert_non_null(text);
	off = (size_t)snprintf(text, len,
			       "clusters = ( { name = \"c\";\n"
			       "  replicas = (");
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(text + off, len - off, "%s\"h%zu\"",
					i ? ", " : " ", i);
	snprintf(text + off, len - off, " ); } );\n");
	expect_errors(text, "t.conf:2: more than 4096 replicas", NULL);

	/* Drop the last one: exactly the limit is fine. */
	strcpy(strrchr(text, ','), " ); } );\n");
	cfg = parse_ok(text);
	assert_int_equal(cfg->clusters[0].nreplicas, RLB_MAX_REPLICAS);
	rlb_config_free(cfg);
	free(text);
}

static void test_config_pinned_addresses(void **state)
{
	char *text = one_cluster(
		"",
		"      { host = \"a\"; address = [ ]; },\n"
		"      { host = \"b\"; address = [ \"1.1.1.1\", \"1.1.1.2\",\n"
		"        \"1.1.1.3\", \"1.1.1.4\", \"1.1.1.5\", \"1.1.1.6\",\n"
		"        \"1.1.1.7\", \"1.1.1.8\", \"1.1.1.9\", \"1.1.1.10\",\n"
		"        \"1.1.1.11\", \"1.1.1.12\", \"1.1.1.13\", "
		"\"1.1.1.14\",\n"
		"        \"1.1.1.15\", \"1.1.1.16\", \"1.1.1.17\" ]; },\n"
		"      { host = \"c\"; address = \"c.example.net\"; },\n"
		"      { host = \"d\"; address = ( \"::1\",\n"
		"                                \"[::1]\" ); }\n");

	expect_errors(text, "t.conf:4: empty address list",
		      "t.conf:5: more than 16 addresses",
		      "t.conf:10: invalid address \"c.example.net\"; expected "
		      "an IPv4 or IPv6 literal",
		      "t.conf:12: invalid address \"[::1]\"; expected an IPv4 "
		      "or IPv6 literal",
		      NULL);
	free(text);
}

static void test_config_log_settings(void **state)
{
	struct rlb_config *cfg;

	cfg = parse_ok(
		"log_level = \"none\";\nlog_target = \"syslog\";\n" MINIMAL);
	assert_int_equal(cfg->log_level, RLB_LOG_NONE);
	assert_int_equal(cfg->log_target, RLB_LOG_SYSLOG);
	rlb_config_free(cfg);
	expect_errors(
		"log_level = \"verbose\";\nlog_target = \"file\";\n" MINIMAL,
		"t.conf:1: unknown log_level \"verbose\"; valid: none, "
		"error, warning, info, debug",
		"t.conf:2: unknown log_target \"file\"; valid: stderr, "
		"syslog",
		NULL);
}

static void test_config_state_dir_absolute(void **state)
{
	expect_errors("state_dir = \"run/x\";\n" MINIMAL,
		      "t.conf:1: state_dir must be an absolute path", NULL);
	expect_errors("local_hostname = \"\";\n" MINIMAL,
		      "t.conf:1: empty local_hostname", NULL);
}

static void test_config_errors_collected(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_errors.conf"),
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
#define F(msg) D("/cfg_errors.conf:" msg)

	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	assert_null(cfg);
	expect_diag(&d,
		    F("2: unknown load_balancing \"nearest\"; did you mean "
		      "\"nearest_hostname\"?"),
		    F("3: unknown log_level \"loud\"; valid: none, error, "
		      "warning, info, debug"),
		    F("4: dns_cache_ttl must not be negative (-1)"),
		    F("5: connect_timeout_ms must be an integer"),
		    F("6: unknown setting \"replica_count\""),
		    F("10: unknown load_balancing \"round-robin\"; did you "
		      "mean \"round_robin\"?"),
		    F("11: state_dir is only valid at the top level"),
		    F("12: port 70000 out of range 1..65535"),
		    F("14: port 0 out of range 1..65535"),
		    F("15: priority must not be negative (-1)"),
		    F("15: unknown replica setting \"weight\""),
		    F("16: replica has no host"),
		    F("19: invalid address \"10.0.0.256\"; expected an IPv4 "
		      "or IPv6 literal"),
		    F("18: duplicate replica \"H3\" (first at line 17)"),
		    F("22: empty replicas list"),
		    F("22: duplicate cluster \"a.cluster\" (first at line 9)"),
		    F("23: cluster has no name"),
		    F("24: cluster \"b.cluster\" has no replicas and no srv or "
		      "dns source"),
		    NULL);
#undef F
	rlb_diag_free(&d);
}

static void test_config_syntax_error(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_syntax.conf"),
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};

	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	assert_null(cfg);
	expect_diag(&d, D("/cfg_syntax.conf:4: syntax error"), NULL);
	rlb_diag_free(&d);
	expect_errors("a = 1;\nb = ;\n", "t.conf:2: syntax error", NULL);
	expect_errors("a = 1;\na = 2;\n", "t.conf:2: duplicate setting name",
		      NULL);
}

static void test_config_include(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_include.conf"),
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	char *old_cwd = getcwd(NULL, 0);

	/* Relative to the file, not to the working directory. */
	assert_int_equal(chdir("/"), 0);
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(chdir(old_cwd), 0);
	free(old_cwd);
	assert_int_equal(d.n, 0);
	assert_int_equal(cfg->defaults.load_balancing, RLB_POLICY_ROUND_ROBIN);
	assert_non_null(rlb_config_find(cfg, "inc.cluster"));
	rlb_config_free(cfg);

	/* Errors name the included file by its path. */
	src.path = D("/cfg_include_bad.conf");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	expect_diag(&d,
		    D("/cfg_include_bad_part.conf:3: dns_cache_ttl "
		      "must not be negative (-1)"),
		    NULL);
	rlb_diag_free(&d);
}

static void test_config_missing_file(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_does_not_exist.conf"),
		.app = "curl",
	};
	struct rlb_config *cfg = (struct rlb_config *)&src;
	struct rlb_diag d = {0};

	errno = EDOM;
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -ENOENT);
	assert_int_equal(errno, EDOM);
	assert_ptr_equal(cfg, (struct rlb_config *)&src);
	assert_int_equal(d.n, 0);
	src.path = D("/cfg_full.conf/x");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -ENOENT);
	assert_int_equal(d.n, 0);
}

static void test_config_unreadable_file(void **state)
{
	struct rlb_config_source src = {.path = data.dir};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};

	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	assert_null(cfg);
	expect_diag(&d, D(": not used: a directory, not a regular file"), NULL);
	rlb_diag_free(&d);
}

static void test_config_diag_optional(void **state)
{
	struct rlb_config *cfg = NULL;

	assert_int_equal(rlb_config_parse_string("x = 1;\n", "t", &cfg, NULL),
			 -EINVAL);
	assert_null(cfg);
	assert_int_equal(rlb_config_parse_string(MINIMAL, NULL, &cfg, NULL), 0);
	assert_string_equal(cfg->clusters[0].file, "(string)");
	rlb_config_free(cfg);
	rlb_config_free(NULL);
}

static const char app_main[] =
	"load_balancing = \"in_order\";\n"
	"dns_cache_ttl = 30;\n"
	"connect_timeout_ms = 2000;\n"
	"local_hostname = \"main.example.net\";\n"
	"log_level = \"info\";\n"
	"clusters = (\n"
	"  { name = \"a\"; dns_cache_ttl = 7; replicas = ( \"a1\" ); },\n"
	"  { name = \"b\"; replicas = ( \"b1\" ); },\n"
	"  { name = \"c\"; replicas = ( \"c1\" ); }\n"
	");\n";

static const char app_file[] =
	"load_balancing = \"round_robin\";\n"
	"dns_cache_ttl = 45;\n"
	"log_target = \"syslog\";\n"
	"clusters = (\n"
	"  { name = \"d\"; replicas = ( \"d1\" ); },\n"
	"  { name = \"B.\"; load_balancing = \"random\";\n"
	"    replicas = ( \"b2\", \"b3\" ); }\n"
	");\n";

static void test_config_app_overlay(void **state)
{
	struct rlb_config_source src = {.app = "myapp"};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct rlb_cluster *c;
	struct tmp t;
	char *main_path, *app_path;

	tmp_make(&t);
	tmp_write(&t, "main.conf", app_main);
	tmp_write(&t, "apps.d/myapp.conf", app_file);
	tmp_write(&t, "apps.d/other.conf", "load_balancing = \"bogus\";\n");
	main_path = tmp_path(&t, "main.conf");
	app_path = tmp_path(&t, "apps.d/myapp.conf");
	src.path = main_path;
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	dump_diag(&d);
	assert_int_equal(d.n, 0);

	/* Top level: app > main > built-in. */
	assert_int_equal(cfg->defaults.load_balancing, RLB_POLICY_ROUND_ROBIN);
	assert_int_equal(cfg->defaults.dns_cache_ttl, 45);
	assert_int_equal(cfg->defaults.connect_timeout_ms, 2000);
	assert_int_equal(cfg->defaults.half_life, 60);
	assert_string_equal(cfg->local_hostname, "main.example.net");
	assert_int_equal(cfg->log_level, RLB_LOG_INFO);
	assert_int_equal(cfg->log_target, RLB_LOG_SYSLOG);

	/* a: main's cluster; its own setting beats the app's top level. */
	assert_int_equal(cfg->nclusters, 4);
	c = rlb_config_find(cfg, "a");
	assert_ptr_equal(c, &cfg->clusters[0]);
	assert_int_equal(c->s.dns_cache_ttl, 7);
	assert_int_equal(c->s.load_balancing, RLB_POLICY_ROUND_ROBIN);
	assert_int_equal(c->s.connect_timeout_ms, 2000);
	assert_string_equal(c->file, main_path);
	/* b: replaced by the app's, in place. */
	c = rlb_config_find(cfg, "b");
	assert_ptr_equal(c, &cfg->clusters[1]);
	assert_int_equal(c->nreplicas, 2);
	assert_string_equal(c->replicas[0].host, "b2");
	assert_int_equal(c->s.load_balancing, RLB_POLICY_RANDOM);
	assert_int_equal(c->s.dns_cache_ttl, 45);
	assert_string_equal(c->file, app_path);
	assert_int_equal(c->line, 6);
	/* c: main's, inheriting; d: added by the app. */
	c = rlb_config_find(cfg, "c");
	assert_ptr_equal(c, &cfg->clusters[2]);
	assert_memory_equal(&c->s, &cfg->defaults, sizeof(c->s));
	c = rlb_config_find(cfg, "d");
	assert_ptr_equal(c, &cfg->clusters[3]);
	assert_string_equal(c->replicas[0].host, "d1");

	assert_int_equal(cfg->files.n, 2);
	assert_string_equal(cfg->files.stamps[0].path, main_path);
	assert_true(cfg->files.stamps[0].exists);
	assert_string_equal(cfg->files.stamps[1].path, app_path);
	assert_true(cfg->files.stamps[1].exists);
	assert_false(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	/* Without an app name, only the main file counts. */
	src.app = NULL;
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(cfg->files.n, 1);
	assert_int_equal(cfg->defaults.load_balancing, RLB_POLICY_IN_ORDER);
	assert_int_equal(cfg->nclusters, 3);
	rlb_config_free(cfg);

	tmp_cleanup(&t);
	free(main_path);
	free(app_path);
}

static void test_config_app_without_clusters(void **state)
{
	struct rlb_config_source src = {.app = "x"};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "r.conf", MINIMAL);
	tmp_write(&t, "apps.d/x.conf", "local_hostname = \"app.host\";\n");
	src.path = tmp_path(&t, "r.conf");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(d.n, 0);
	assert_string_equal(cfg->local_hostname, "app.host");
	assert_int_equal(cfg->nclusters, 1);
	rlb_config_free(cfg);
	free((char *)src.path);
	tmp_cleanup(&t);
}

static void test_config_app_errors(void **state)
{
	struct rlb_config_source src = {.app = "bad"};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	char *main_msg, *app_msg;
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "m.conf", "dns_cache_ttl = -1;\n" MINIMAL);
	tmp_write(&t, "apps.d/bad.conf",
		  "\nclusters = ( { name = \"c\"; replicas = ( ); } );\n");
	src.path = tmp_path(&t, "m.conf");
	assert_true(asprintf(&main_msg,
			     "%s:1: dns_cache_ttl must not be negative (-1)",
			     src.path) > 0);
	assert_true(asprintf(&app_msg,
			     "%s/apps.d/bad.conf:2: empty replicas "
			     "list",
			     t.dir) > 0);
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	assert_null(cfg);
	expect_diag(&d, main_msg, app_msg, NULL);
	rlb_diag_free(&d);
	free(main_msg);
	free(app_msg);
	free((char *)src.path);
	tmp_cleanup(&t);
}

static void test_config_app_name_unsafe(void **state)
{
	static const char *const bad[] = {"", ".", "..", "../m", "a/b"};
	struct rlb_config_source src = {0};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "m.conf", MINIMAL);
	/* "../m" would name m.conf itself as apps.d/../m.conf. */
	tmp_write(&t, "apps.d/..conf", "load_balancing = \"in_order\";\n");
	src.path = tmp_path(&t, "m.conf");
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		src.app = bad[i];
		assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
		assert_int_equal(d.n, 0);
		assert_int_equal(cfg->files.n, 1);
		assert_int_equal(cfg->defaults.load_balancing,
				 RLB_POLICY_RANDOM);
		rlb_config_free(cfg);
	}
	tmp_remove(&t, "apps.d/..conf");
	free((char *)src.path);
	tmp_cleanup(&t);
}

static void test_config_relative_path(void **state)
{
	struct rlb_config_source src = {.path = "rel.conf", .app = "x"};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	char *old_cwd = getcwd(NULL, 0);
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "rel.conf", MINIMAL);
	tmp_write(&t, "apps.d/x.conf", "dns_cache_ttl = 1;\n");
	assert_int_equal(chdir(t.dir), 0);
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(chdir(old_cwd), 0);
	free(old_cwd);
	assert_int_equal(cfg->defaults.dns_cache_ttl, 1);
	assert_string_equal(cfg->files.stamps[0].path, "rel.conf");
	assert_string_equal(cfg->files.stamps[1].path, "apps.d/x.conf");
	rlb_config_free(cfg);
	tmp_cleanup(&t);
}

static void test_config_env_overrides(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_full.conf"),
		.env_policy = "first_or_random",
		.env_hostname = "env.example.net",
		.env_state_dir = "/tmp/rlb-env-state",
		.env_log_level = "error",
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};

	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(cfg->defaults.load_balancing,
			 RLB_POLICY_FIRST_OR_RANDOM);
	for (size_t i = 0; i < cfg->nclusters; i++) {
		assert_int_equal(cfg->clusters[i].s.load_balancing,
				 RLB_POLICY_FIRST_OR_RANDOM);
		assert_null(cfg->clusters[i].local_hostname);
	}
	/* Other cluster overrides stay. */
	assert_int_equal(cfg->clusters[0].s.error_cap, 10);
	assert_string_equal(cfg->local_hostname, "env.example.net");
	assert_string_equal(cfg->state_dir, "/tmp/rlb-env-state");
	assert_int_equal(cfg->log_level, RLB_LOG_ERROR);
	assert_int_equal(cfg->log_target, RLB_LOG_SYSLOG);
	rlb_config_free(cfg);
}

static void test_config_env_invalid(void **state)
{
	struct rlb_config_source src = {
		.path = D("/cfg_full.conf"),
		.env_policy = "nearest",
		.env_log_level = "chatty",
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};

	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	assert_null(cfg);
	expect_diag(&d,
		    "REPLICALB_LOAD_BALANCING: unknown load_balancing "
		    "\"nearest\"; did you mean \"nearest_hostname\"?",
		    NULL);
	rlb_diag_free(&d);

	/* A bad log level alone is ignored: it must not turn the library
	 * off (the runtime warns about it). */
	src.env_policy = NULL;
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(cfg->log_level, RLB_LOG_DEBUG);
	rlb_config_free(cfg);
	cfg = NULL;
	src.env_policy = "nearest";

	/* Collected together with the file's errors. */
	src.path = D("/cfg_syntax.conf");
	src.env_log_level = NULL;
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	expect_diag(&d, D("/cfg_syntax.conf:4: syntax error"),
		    "REPLICALB_LOAD_BALANCING: unknown load_balancing "
		    "\"nearest\"; did you mean \"nearest_hostname\"?",
		    NULL);
	rlb_diag_free(&d);
}

/* A broken load still tells which files it read, so the runtime parses a
 * broken version once, not on every check. */
static void test_config_broken_files(void **state)
{
	struct rlb_config_source src = {.app = "tool"};
	struct rlb_config_files broken = {0};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct tmp t;
	char *path, *app_path;

	tmp_make(&t);
	tmp_write(&t, "m.conf", MINIMAL);
	tmp_write(&t, "apps.d/tool.conf", "load_balancing = \"nearest\";\n");
	path = tmp_path(&t, "m.conf");
	app_path = tmp_path(&t, "apps.d/tool.conf");
	src.path = path;
	assert_int_equal(rlb_config_load_ex(&src, &cfg, &d, &broken), -EINVAL);
	assert_null(cfg);
	assert_int_equal(broken.n, 2);
	assert_string_equal(broken.stamps[0].path, path);
	assert_true(broken.stamps[0].exists);
	assert_string_equal(broken.stamps[1].path, app_path);
	assert_false(rlb_config_files_changed(&broken));
	/* Fixing the app file is a change. */
	tmp_write(&t, "apps.d/tool.conf", "load_balancing = \"in_order\";\n");
	assert_true(rlb_config_files_changed(&broken));
	rlb_config_files_free(&broken);
	assert_int_equal(broken.n, 0);
	assert_false(rlb_config_files_changed(&broken));
	rlb_diag_free(&d);
	assert_int_equal(rlb_config_load_ex(&src, &cfg, &d, &broken), 0);
	assert_int_equal(broken.n, 0);
	assert_int_equal(cfg->clusters[0].s.load_balancing,
			 RLB_POLICY_IN_ORDER);
	rlb_config_free(cfg);
	cfg = NULL;

	/* Neither a missing file nor a good one leaves anything behind. */
	tmp_remove(&t, "m.conf");
	assert_int_equal(rlb_config_load_ex(&src, &cfg, &d, &broken), -ENOENT);
	assert_int_equal(broken.n, 0);
	rlb_config_files_free(NULL);
	assert_false(rlb_config_files_changed(NULL));
	free(app_path);
	free(path);
	tmp_cleanup(&t);
}

static void test_config_changed(void **state)
{
	struct rlb_config_source src = {.app = "late"};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 6789}};
	struct tmp t;
	char *path;

	tmp_make(&t);
	tmp_write(&t, "m.conf", MINIMAL);
	path = tmp_path(&t, "m.conf");
	src.path = path;

	/* Rewritten with other content. */
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(cfg->files.n, 2);
	assert_false(cfg->files.stamps[1].exists);
	assert_false(rlb_config_changed(cfg));
	assert_false(rlb_config_changed(cfg));
	tmp_write(&t, "m.conf", "dns_cache_ttl = 1;\n" MINIMAL);
	assert_true(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	/* Same size, only the mtime differs. */
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_false(rlb_config_changed(cfg));
	assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
	assert_true(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	/* A chmod, which may make the file trusted or not. */
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_false(rlb_config_changed(cfg));
	assert_int_equal(chmod(path, 0600), 0);
	assert_true(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	/* The app file appears later. */
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_false(rlb_config_changed(cfg));
	tmp_write(&t, "apps.d/late.conf", "dns_cache_ttl = 2;\n");
	assert_true(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	/* ... and goes away again. */
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_int_equal(cfg->defaults.dns_cache_ttl, 2);
	assert_false(rlb_config_changed(cfg));
	tmp_remove(&t, "apps.d/late.conf");
	assert_true(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	/* The main file is removed. */
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	tmp_remove(&t, "m.conf");
	errno = EDOM;
	assert_true(rlb_config_changed(cfg));
	assert_int_equal(errno, EDOM);
	rlb_config_free(cfg);
	assert_int_equal(d.n, 0);

	/* A parsed string has nothing to watch. */
	cfg = parse_ok(MINIMAL);
	assert_false(rlb_config_changed(cfg));
	rlb_config_free(cfg);

	free(path);
	tmp_cleanup(&t);
}

/* Every setting of a and b the same. */
static void expect_same_settings(const struct rlb_settings *a,
				 const struct rlb_settings *b)
{
	assert_int_equal(a->load_balancing, b->load_balancing);
	assert_int_equal(a->first_offset, b->first_offset);
	assert_int_equal(a->half_life, b->half_life);
	assert_int_equal(a->error_cap, b->error_cap);
	assert_int_equal(a->max_ignored_errors, b->max_ignored_errors);
	assert_int_equal(a->dns_cache_ttl, b->dns_cache_ttl);
	assert_int_equal(a->connect_timeout_ms, b->connect_timeout_ms);
	assert_int_equal(a->connect_failover, b->connect_failover);
	assert_int_equal(a->least_request_choices, b->least_request_choices);
	assert_true(a->least_request_bias == b->least_request_bias);
}

/*
 * The sample with its examples turned on: the leading '#' removed from
 * every line that is a commented-out setting ("#key = ...", "#  {"), not
 * an explanation ("# text"). Written beside the sample, so that the same
 * apps.d applies; returns its path (free()).
 */
static char *sample_uncommented(void)
{
	size_t len;
	char *text = file_text(D("/etc/replicalb.conf"), &len);
	char *out = malloc(len + 1), *o = out;
	char *p;

	assert_non_null(out);
	for (const char *l = text; *l;) {
		const char *end = strchr(l, '\n');
		size_t n = end ? (size_t)(end - l) + 1 : strlen(l);

		if (l[0] == '#' && n > 2 &&
		    ((l[1] != ' ' && l[1] != '#' && l[1] != '\n') ||
		     (l[1] == ' ' && l[2] == ' '))) {
			l++;
			n--;
		}
		memcpy(o, l, n);
		o += n;
		l += n;
	}
	*o = '\0';
	tmp_write(&data, "etc/uncommented.conf", out);
	p = tmp_path(&data, "etc/uncommented.conf");
	free(text);
	free(out);
	return p;
}

/*
 * The installed sample balances nothing: it is a valid config without
 * clusters, whose every setting is commented out at its default. Its
 * commented-out examples, turned on, are valid too, and so are the
 * per-application examples over them.
 */
static void test_config_sample_files(void **state)
{
	static const struct {
		const char *app;
		enum rlb_policy policy;
	} apps[] = {
		{NULL, RLB_POLICY_RANDOM},
		{"clickhouse-client", RLB_POLICY_IN_ORDER},
		{"curl", RLB_POLICY_ROUND_ROBIN},
	};
	struct rlb_config *plain = parse_ok("clusters = ( );\n");
	struct rlb_config_source src = {.path = D("/etc/replicalb.conf")};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	char *examples = sample_uncommented();

	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	dump_diag(&d);
	assert_int_equal(d.n, 0);
	assert_int_equal(cfg->nclusters, 0);
	expect_same_settings(&cfg->defaults, &plain->defaults);
	assert_int_equal(cfg->log_level, plain->log_level);
	assert_int_equal(cfg->log_target, plain->log_target);
	rlb_config_free(cfg);
	cfg = NULL;

	for (size_t i = 0; i < sizeof(apps) / sizeof(*apps); i++) {
		struct rlb_cluster *c;

		src.path = examples;
		src.app = apps[i].app;
		assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
		dump_diag(&d);
		assert_int_equal(d.n, 0);
		assert_int_equal(cfg->files.n, apps[i].app ? 2 : 1);
		if (apps[i].app)
			assert_true(cfg->files.stamps[1].exists);
		assert_int_equal(cfg->defaults.load_balancing, apps[i].policy);
		/* Each setting is shown at its default. */
		if (!apps[i].app)
			expect_same_settings(&cfg->defaults, &plain->defaults);
		assert_int_equal(cfg->nclusters, 3);
		c = rlb_config_find(cfg, "k8s.cluster");
		assert_non_null(c);
		assert_string_equal(c->srv, "_native._tcp.clickhouse.analytics."
					    "svc.cluster.local.");
		assert_int_equal(c->nreplicas, 0);
		c = rlb_config_find(cfg, "analytics.cluster");
		assert_non_null(c);
		assert_int_equal(c->s.load_balancing,
				 RLB_POLICY_NEAREST_HOSTNAME);
		assert_int_equal(c->nreplicas, 4);
		c = rlb_config_find(cfg, "analytics-http.cluster");
		assert_non_null(c);
		assert_int_equal(c->s.load_balancing, apps[i].policy);
		assert_int_equal(c->port, 8123);
		rlb_config_free(cfg);
		cfg = NULL;
	}
	rlb_config_free(plain);
	free(examples);
}

static void test_config_source_from_env(void **state)
{
	struct rlb_config_source src;

	setenv("REPLICALB_CONFIG", D("/cfg_full.conf"), 1);
	setenv("REPLICALB_APP", "someapp", 1);
	setenv("REPLICALB_LOAD_BALANCING", "in_order", 1);
	setenv("REPLICALB_HOSTNAME", "h.example", 1);
	setenv("REPLICALB_STATE_DIR", "/tmp/s", 1);
	setenv("REPLICALB_LOG_LEVEL", "debug", 1);
	rlb_config_source_from_env(&src);
	assert_string_equal(src.path, D("/cfg_full.conf"));
	assert_string_equal(rlb_config_path(), D("/cfg_full.conf"));
	assert_string_equal(src.app, "someapp");
	assert_string_equal(src.env_policy, "in_order");
	assert_string_equal(src.env_hostname, "h.example");
	assert_string_equal(src.env_state_dir, "/tmp/s");
	assert_string_equal(src.env_log_level, "debug");

	unsetenv("REPLICALB_CONFIG");
	unsetenv("REPLICALB_APP");
	unsetenv("REPLICALB_LOAD_BALANCING");
	setenv("REPLICALB_HOSTNAME", "", 1); /* empty counts as unset */
	unsetenv("REPLICALB_STATE_DIR");
	unsetenv("REPLICALB_LOG_LEVEL");
	rlb_config_source_from_env(&src);
	assert_string_equal(src.path, SYSCONFDIR "/replicalb/replicalb.conf");
	assert_string_equal(src.app, "test_config");
	assert_string_equal(rlb_config_app_name(), "test_config");
	assert_null(src.env_policy);
	assert_null(src.env_hostname);
	assert_null(src.env_state_dir);
	assert_null(src.env_log_level);
	unsetenv("REPLICALB_HOSTNAME");
}

/*
 * Mutations of the sample config (flipped, dropped, duplicated bytes,
 * truncation): whatever the parser gets, it answers with a config or
 * with messages, and never crashes or leaks (ASan and valgrind runs).
 */
static void test_config_mutations_never_crash(void **state)
{
	static const char alphabet[] = "{}()[];=,:\"'#/*\n -0123456789Lxa@\\";
	size_t len, ok = 0, bad = 0;
	char *path = sample_uncommented();
	char *orig = file_text(path, &len);
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	for (int round = 0; round < 400; round++) {
		char *text = malloc(2 * len + 1);
		struct rlb_config *cfg = NULL;
		struct rlb_diag d = {0};
		size_t n = len;

		assert_non_null(text);
		memcpy(text, orig, len);
		for (int m = 0; m < 1 + round % 8; m++) {
			size_t at;

			seed = seed * 6364136223846793005ULL +
			       1442695040888963407ULL;
			at = (size_t)(seed >> 33) % n;
			switch ((seed >> 20) % 4) {
			case 0: /* replace */
				text[at] = alphabet[(seed >> 8) %
						    (sizeof(alphabet) - 1)];
				break;
			case 1: /* drop */
				memmove(text + at, text + at + 1, n - at - 1);
				n--;
				break;
			case 2: /* duplicate a run */
				if (n + 16 < 2 * len) {
					memmove(text + at + 16, text + at,
						n - at);
					n += 16;
				}
				break;
			default: /* truncate */
				n = at + 1;
				break;
			}
		}
		text[n] = '\0';
		if (rlb_config_parse_string(text, "m.conf", &cfg, &d) == 0) {
			assert_non_null(cfg);
			assert_int_equal(d.n, 0);
			rlb_config_free(cfg);
			ok++;
		} else {
			assert_null(cfg);
			assert_true(d.n > 0);
			for (size_t k = 0; k < d.n; k++)
				assert_true(strncmp(d.msgs[k], "m.conf:", 7) ==
					    0);
			bad++;
		}
		rlb_diag_free(&d);
		free(text);
	}
	free(orig);
	free(path);
	/* The mutations reach both outcomes. */
	assert_true(ok > 0);
	assert_true(bad > 0);
}

/* ---------------------------------------------------------------- */
/* The trust rule (design.md §2.7) and @include */

/* A test that a hang would stall fails instead: SIGALRM kills it. */
#define NO_HANG() alarm(10)

/* The uid of "nobody": someone else, for tests that run as root. */
static uid_t nobody(void)
{
	struct passwd *pw = getpwnam("nobody");

	return pw ? pw->pw_uid : 65534;
}

static void tmp_chmod(const struct tmp *t, const char *rel, mode_t mode)
{
	char *p = tmp_path(t, rel);

	assert_int_equal(chmod(p, mode), 0);
	free(p);
}

static void tmp_chown_nobody(const struct tmp *t, const char *rel)
{
	char *p = tmp_path(t, rel);

	assert_int_equal(chown(p, nobody(), (gid_t)-1), 0);
	free(p);
}

static void tmp_mkfifo(const struct tmp *t, const char *rel)
{
	char *p = tmp_path(t, rel);

	assert_int_equal(mkfifo(p, 0600), 0);
	free(p);
}

/* Load t's file rel (app file of app, if not NULL) expecting rc and
 * the one message msg ("%s" for t's directory), or none if NULL. */
static void expect_load(const struct tmp *t, const char *rel, const char *app,
			int rc, const char *msg)
{
	struct rlb_config_source src = {.app = app};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	char *want = NULL;

	src.path = tmp_path(t, rel);
	if (msg)
		assert_true(asprintf(&want, msg, t->dir) > 0);
	assert_int_equal(rlb_config_load(&src, &cfg, &d), rc);
	expect_diag(&d, want, NULL);
	rlb_config_free(cfg);
	rlb_diag_free(&d);
	free(want);
	free((char *)src.path);
}

/* Capture what the library logs to stderr between the two calls. */
struct capture {
	int saved;
	FILE *f;
};

static void capture_start(struct capture *c)
{
	c->f = tmpfile();
	assert_non_null(c->f);
	c->saved = dup(2);
	assert_true(c->saved >= 0);
	assert_int_equal(dup2(fileno(c->f), 2), 2);
}

/* What was logged (free()). */
static char *capture_end(struct capture *c)
{
	char *out = calloc(1, 4096);

	assert_int_equal(dup2(c->saved, 2), 2);
	close(c->saved);
	assert_non_null(out);
	rewind(c->f);
	assert_true(fread(out, 1, 4095, c->f) < 4095);
	fclose(c->f);
	return out;
}

static void test_config_trust_mode(void **state)
{
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "m.conf", MINIMAL);
	tmp_chmod(&t, "m.conf", 0664);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/m.conf: not used: writable by group");
	tmp_chmod(&t, "m.conf", 0646);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/m.conf: not used: writable by others");
	tmp_chmod(&t, "m.conf", 0666);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/m.conf: not used: writable by group and others");
	/* Read-only for everyone, or readable by all: fine. */
	tmp_chmod(&t, "m.conf", 0444);
	expect_load(&t, "m.conf", NULL, 0, NULL);
	tmp_chmod(&t, "m.conf", 0644);
	expect_load(&t, "m.conf", NULL, 0, NULL);
	tmp_cleanup(&t);
}

static void test_config_trust_owner(void **state)
{
	struct tmp t;

	if (geteuid() != 0)
		skip(); /* only root can give a file away */
	tmp_make(&t);
	tmp_write(&t, "m.conf", MINIMAL);
	tmp_chown_nobody(&t, "m.conf");
	{
		char *msg;

		assert_true(asprintf(&msg,
				     "%%s/m.conf: not used: owned by "
				     "uid %lu",
				     (unsigned long)nobody()) > 0);
		expect_load(&t, "m.conf", NULL, -EINVAL, msg);
		free(msg);
	}
	/* Root's own file is trusted by everyone. */
	assert_int_equal(chown(t.dir, 0, 0), 0);
	tmp_write(&t, "r.conf", MINIMAL);
	expect_load(&t, "r.conf", NULL, 0, NULL);
	tmp_cleanup(&t);
}

/* Every directory up to /, as ssh's StrictModes: group or other write
 * only with the sticky bit, as /tmp has. */
static void test_config_trust_directories(void **state)
{
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "m.conf", MINIMAL);
	tmp_chmod(&t, ".", 0777);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%1$s/m.conf: not used: directory %1$s is writable by "
		    "group and others");
	tmp_chmod(&t, ".", 0770);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%1$s/m.conf: not used: directory %1$s is writable by "
		    "group");
	tmp_chmod(&t, ".", 01777);
	expect_load(&t, "m.conf", NULL, 0, NULL);
	tmp_chmod(&t, ".", 0700);

	/* Through a symlinked directory, what counts is where it leads. */
	{
		char *link = tmp_path(&t, "link"), *path;
		struct rlb_config_source src = {0};
		struct rlb_config *cfg = NULL;
		struct rlb_diag d = {0};

		assert_int_equal(mkdir(link, 0700), 0);
		assert_int_equal(rmdir(link), 0);
		assert_int_equal(symlink(t.dir, link), 0);
		path = tmp_path(&t, "link/m.conf");
		src.path = path;
		assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
		rlb_config_free(cfg);
		tmp_chmod(&t, ".", 0777);
		assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
		assert_int_equal(d.n, 1);
		assert_non_null(strstr(d.msgs[0], ": not used: directory "));
		rlb_diag_free(&d);
		tmp_chmod(&t, ".", 0700);
		unlink(link);
		free(link);
		free(path);
	}
	tmp_cleanup(&t);
}

/* A symlinked file is judged by the file it leads to. */
static void test_config_trust_symlink(void **state)
{
	char *target, *link;
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "real.conf", MINIMAL);
	target = tmp_path(&t, "real.conf");
	link = tmp_path(&t, "m.conf");
	assert_int_equal(symlink(target, link), 0);
	expect_load(&t, "m.conf", NULL, 0, NULL);
	tmp_chmod(&t, "real.conf", 0666);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/m.conf: not used: writable by group and others");
	free(target);
	free(link);
	tmp_cleanup(&t);
}

/* Neither a FIFO nor a socket nor a device is ever opened to block. */
static void test_config_trust_not_regular(void **state)
{
	struct tmp t;

	NO_HANG();
	tmp_make(&t);
	tmp_mkfifo(&t, "fifo.conf");
	expect_load(&t, "fifo.conf", NULL, -EINVAL,
		    "%s/fifo.conf: not used: a FIFO, not a regular file");
	tmp_write(&t, "m.conf", "@include \"fifo.conf\"\n" MINIMAL);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%1$s/m.conf:1: %1$s/fifo.conf: not used: a FIFO, not a "
		    "regular file");
	{
		struct rlb_config_source src = {.path = "/dev/zero"};
		struct rlb_config *cfg = NULL;
		struct rlb_diag d = {0};

		assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
		expect_diag(&d,
			    "/dev/zero: not used: a device, not a regular "
			    "file",
			    NULL);
		rlb_diag_free(&d);
	}
	tmp_cleanup(&t);
	alarm(0);
}

/*
 * The attack of issue 8: someone else's apps.d/APP.conf redirects a
 * cluster. It is not used, said once, and does not switch the main
 * config off either.
 */
static void test_config_trust_app_file(void **state)
{
	struct rlb_config_source src = {.app = "prog"};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct capture cap;
	char *logged, *want;
	struct tmp t;

	NO_HANG();
	tmp_make(&t);
	tmp_write(
		&t, "m.conf",
		"clusters = ( { name = \"c\"; replicas = ( \"good\" ); } );\n");
	tmp_write(
		&t, "apps.d/prog.conf",
		"clusters = ( { name = \"c\"; replicas = ( \"evil\" ); } );\n");
	src.path = tmp_path(&t, "m.conf");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	assert_string_equal(cfg->clusters[0].replicas[0].host, "evil");
	rlb_config_free(cfg);

	/* Each way of failing the rule: mode, directory, owner, type. */
	for (int how = 0; how < 4; how++) {
		const char *why[] = {
			"writable by group",
			"directory %s/apps.d is writable by group and others",
			"owned by uid %lu",
			"a FIFO, not a regular file",
		};
		char *reason;

		if (how == 0)
			tmp_chmod(&t, "apps.d/prog.conf", 0620);
		if (how == 1) {
			tmp_chmod(&t, "apps.d/prog.conf", 0600);
			tmp_chmod(&t, "apps.d", 0777);
		}
		if (how == 2) {
			tmp_chmod(&t, "apps.d", 0700);
			if (geteuid() != 0)
				continue;
			tmp_chown_nobody(&t, "apps.d/prog.conf");
		}
		if (how == 3) {
			tmp_remove(&t, "apps.d/prog.conf");
			tmp_mkfifo(&t, "apps.d/prog.conf");
		}
		if (how == 2)
			assert_true(asprintf(&reason, why[how],
					     (unsigned long)nobody()) > 0);
		else
			assert_true(asprintf(&reason, why[how], t.dir) > 0);
		assert_true(asprintf(&want,
				     "replicalb[%ld]: %s/apps.d/prog.conf: not "
				     "used: %s\n",
				     (long)getpid(), t.dir, reason) > 0);
		capture_start(&cap);
		assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
		logged = capture_end(&cap);
		assert_int_equal(d.n, 0);
		assert_string_equal(cfg->clusters[0].replicas[0].host, "good");
		/* Watched, so that mending it is noticed. */
		assert_int_equal(cfg->files.n, 2);
		assert_true(cfg->files.stamps[1].exists);
		assert_false(rlb_config_changed(cfg));
		assert_string_equal(logged, want);
		rlb_config_free(cfg);
		free(logged);
		free(want);
		free(reason);
	}

	/* With a broken main file, it is one more message of the load. */
	tmp_write(&t, "m.conf", "x = 1;\n" MINIMAL);
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	assert_int_equal(d.n, 2);
	assert_non_null(strstr(d.msgs[1], "/apps.d/prog.conf: not used: "));
	rlb_diag_free(&d);
	free((char *)src.path);
	tmp_cleanup(&t);
	alarm(0);
}

static void test_config_trust_include(void **state)
{
	struct tmp t;

	tmp_make(&t);
	tmp_write(&t, "m.conf", "# m.conf\n@include \"part.conf\"\n" MINIMAL);
	tmp_write(&t, "part.conf", "dns_cache_ttl = 3;\n");
	expect_load(&t, "m.conf", NULL, 0, NULL);
	tmp_chmod(&t, "part.conf", 0664);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%1$s/m.conf:2: %1$s/part.conf: not used: writable by "
		    "group");
	tmp_chmod(&t, "part.conf", 0644);
	if (geteuid() == 0) {
		char *msg;

		tmp_chown_nobody(&t, "part.conf");
		assert_true(
			asprintf(&msg,
				 "%%1$s/m.conf:2: %%1$s/part.conf: not used: "
				 "owned by uid %lu",
				 (unsigned long)nobody()) > 0);
		expect_load(&t, "m.conf", NULL, -EINVAL, msg);
		free(msg);
	}
	tmp_remove(&t, "part.conf");
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%1$s/m.conf:2: %1$s/part.conf: no such file");
	tmp_cleanup(&t);
}

/*
 * What is an @include is libconfig's lexer's call; lines after and
 * inside included files keep their own numbers; nested names are
 * relative to the file that holds them.
 */
static void test_config_include_expansion(void **state)
{
	struct rlb_config_source src = {0};
	struct rlb_config *cfg = NULL;
	struct rlb_diag d = {0};
	struct tmp t;
	char *sub;

	NO_HANG();
	tmp_make(&t);
	sub = tmp_path(&t, "sub");
	assert_int_equal(mkdir(sub, 0700), 0);
	tmp_mkfifo(&t, "fifo");
	tmp_write(&t, "m.conf",
		  "/* @include \"fifo\" */ # @include \"fifo\"\n"
		  "  @include \"sub/a.conf\" dns_cache_ttl = 4;\n"
		  "state_dir = \"/s\n"
		  "@include \\\"fifo\\\"\";\n"
		  "# @include \"fifo\"\n" MINIMAL);
	tmp_write(&t, "sub/a.conf",
		  "@include \"b.conf\"\nlog_level = \"info\";");
	tmp_write(&t, "sub/b.conf", "connect_timeout_ms = 5;\n");
	src.path = tmp_path(&t, "m.conf");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), 0);
	dump_diag(&d);
	assert_int_equal(cfg->defaults.dns_cache_ttl, 4);
	assert_int_equal(cfg->defaults.connect_timeout_ms, 5);
	assert_int_equal(cfg->log_level, RLB_LOG_INFO);
	assert_string_equal(cfg->state_dir, "/s\n@include \"fifo\"");
	assert_int_equal(cfg->clusters[0].line, 6);
	rlb_config_free(cfg);

	/* Errors name the file and line they are on. */
	tmp_write(&t, "sub/b.conf", "\nconnect_timeout_ms = -5;\n");
	tmp_write(&t, "m.conf",
		  "@include \"sub/a.conf\"\n"
		  "dns_cache_ttl = -4;\n" MINIMAL "x = 1;\n");
	assert_int_equal(rlb_config_load(&src, &cfg, &d), -EINVAL);
	{
		char *b, *m, *x;

		assert_true(asprintf(&b,
				     "%s/sub/b.conf:2: connect_timeout_ms "
				     "must not be negative (-5)",
				     t.dir) > 0);
		assert_true(asprintf(&m,
				     "%s/m.conf:2: dns_cache_ttl must not be "
				     "negative (-4)",
				     t.dir) > 0);
		assert_true(asprintf(&x, "%s/m.conf:4: unknown setting \"x\"",
				     t.dir) > 0);
		expect_diag(&d, b, m, x, NULL);
		free(b);
		free(m);
		free(x);
		rlb_diag_free(&d);
	}
	tmp_write(&t, "sub/a.conf", "log_level = ;\n");
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/sub/a.conf:1: syntax error");

	/* Only at the start of a line: as libconfig, "@" is then junk. */
	tmp_write(&t, "m.conf", "@include \"sub/b.conf\"@include \"fifo\"\n");
	expect_load(&t, "m.conf", NULL, -EINVAL, "%s/m.conf:1: syntax error");

	/* Files read for @includes are bounded, however they nest. */
	{
		char *many = calloc(300, 32);

		assert_non_null(many);
		for (int i = 0; i < 300; i++)
			strcat(many, "@include \"sub/b.conf\"\n");
		tmp_write(&t, "sub/b.conf", "");
		tmp_write(&t, "m.conf", many);
		expect_load(&t, "m.conf", NULL, -EINVAL,
			    "%s/m.conf:257: more than 256 @includes");
		free(many);
	}

	/* Including itself ends at libconfig's depth. */
	tmp_write(&t, "m.conf", "@include \"m.conf\"\n");
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/m.conf:1: @include nested more than 10 deep");
	tmp_write(&t, "m.conf", "@include \"sub/a.conf\n\"\n");
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/m.conf:1: @include: bad or unterminated file name");
	tmp_write(&t, "sub/a.conf", "/* open\n");
	tmp_write(&t, "m.conf", "@include \"sub/a.conf\" */\n" MINIMAL);
	expect_load(&t, "m.conf", NULL, -EINVAL,
		    "%s/sub/a.conf: ends inside a comment");
	{
		static const char nul[] = "a = 1;\n\0" MINIMAL;
		char *m = tmp_path(&t, "m.conf");
		FILE *f = fopen(m, "w");

		assert_non_null(f);
		assert_int_equal(fwrite(nul, 1, sizeof(nul) - 1, f),
				 sizeof(nul) - 1);
		assert_int_equal(fclose(f), 0);
		free(m);
		expect_load(&t, "m.conf", NULL, -EINVAL,
			    "%s/m.conf: holds a NUL byte");
	}
	free((char *)src.path);
	free(sub);
	tmp_cleanup(&t);
	alarm(0);
}

/* libconfig itself never opens a file, whatever text it gets. */
static void test_config_libconfig_opens_nothing(void **state)
{
	struct rlb_cfg_parser p = {.file = "t.conf"};
	struct rlb_cfg_layer l = {0};
	struct tmp t;
	char *text;

	NO_HANG();
	tmp_make(&t);
	tmp_mkfifo(&t, "fifo");
	assert_true(asprintf(&text, "@include \"%s/fifo\"\n", t.dir) > 0);
	rlb_cfg_parse_text(&p, text, &l);
	assert_int_equal(p.errors, 1);
	assert_false(l.parsed);
	rlb_cfg_layer_free(&l);
	free(text);
	tmp_cleanup(&t);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_mutations_never_crash),
		cmocka_unit_test(test_config_broken_files),
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_config_full_fixture),
		cmocka_unit_test(test_config_int64_values),
		cmocka_unit_test(test_config_replica_forms),
		cmocka_unit_test(test_config_replica_array),
		cmocka_unit_test(test_config_string_element_lines),
		cmocka_unit_test(test_config_cluster_name_normalized),
		cmocka_unit_test(test_config_find),
		cmocka_unit_test(test_config_find_many),
		cmocka_unit_test(test_config_unknown_policy_suggests),
		cmocka_unit_test(test_config_unknown_policy_lists_valid),
		cmocka_unit_test(test_config_policy_names),
		cmocka_unit_test(test_config_unknown_keys),
		cmocka_unit_test(test_config_scope_errors),
		cmocka_unit_test(test_config_connect_failover),
		cmocka_unit_test(test_config_wrong_types),
		cmocka_unit_test(test_config_negative_numbers),
		cmocka_unit_test(test_config_least_request_keys),
		cmocka_unit_test(test_config_least_request_bad_values),
		cmocka_unit_test(test_config_hedge_keys),
		cmocka_unit_test(test_config_zero_values_allowed),
		cmocka_unit_test(test_config_port_range),
		cmocka_unit_test(test_config_colons_must_be_ipv6),
		cmocka_unit_test(test_config_host_strings),
		cmocka_unit_test(test_config_cluster_name_errors),
		cmocka_unit_test(test_config_empty_replicas),
		cmocka_unit_test(test_config_missing_clusters),
		cmocka_unit_test(test_config_duplicate_clusters),
		cmocka_unit_test(test_config_duplicate_replicas),
		cmocka_unit_test(test_config_replica_limit),
		cmocka_unit_test(test_config_pinned_addresses),
		cmocka_unit_test(test_config_log_settings),
		cmocka_unit_test(test_config_state_dir_absolute),
		cmocka_unit_test(test_config_errors_collected),
		cmocka_unit_test(test_config_syntax_error),
		cmocka_unit_test(test_config_include),
		cmocka_unit_test(test_config_missing_file),
		cmocka_unit_test(test_config_unreadable_file),
		cmocka_unit_test(test_config_diag_optional),
		cmocka_unit_test(test_config_app_overlay),
		cmocka_unit_test(test_config_app_without_clusters),
		cmocka_unit_test(test_config_app_errors),
		cmocka_unit_test(test_config_app_name_unsafe),
		cmocka_unit_test(test_config_relative_path),
		cmocka_unit_test(test_config_env_overrides),
		cmocka_unit_test(test_config_env_invalid),
		cmocka_unit_test(test_config_changed),
		cmocka_unit_test(test_config_sample_files),
		cmocka_unit_test(test_config_source_from_env),
		cmocka_unit_test(test_config_trust_mode),
		cmocka_unit_test(test_config_trust_owner),
		cmocka_unit_test(test_config_trust_directories),
		cmocka_unit_test(test_config_trust_symlink),
		cmocka_unit_test(test_config_trust_not_regular),
		cmocka_unit_test(test_config_trust_app_file),
		cmocka_unit_test(test_config_trust_include),
		cmocka_unit_test(test_config_include_expansion),
		cmocka_unit_test(test_config_libconfig_opens_nothing),
	};

	/* Files the tests write must not be group-writable (§2.7). */
	umask(022);
	return cmocka_run_group_tests(tests, data_setup, data_teardown);
}
