/* fixture.c - unit-test clusters built through the real config parser,
 * scripted random draws for deterministic selections, and config files
 * replaced as editors replace them. */
#include "config.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

/* This process's state directory, made on first use; "" until then. */
static char scratch[512];
static unsigned cluster_seq;

static const char *scratch_dir(void)
{
	const char *tmp = getenv("TMPDIR");

	if (scratch[0])
		return scratch;
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	snprintf(scratch, sizeof(scratch), "%s/rlb-fx-XXXXXX", tmp);
	if (!mkdtemp(scratch)) {
		scratch[0] = '\0';
		fail_msg("fixture: cannot make a scratch directory under %s",
			 tmp);
	}
	return scratch;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	return remove(path);
}

int fx_group_teardown(void **state)
{
	int rc = 0;

	/* Segments outlive the directory that names them. */
	if (scratch[0])
		rlb_health_remove_state(
			&(struct rlb_config){.state_dir = scratch}, true, NULL);
	if (scratch[0])
		rc = nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	scratch[0] = '\0';
	return rc;
}

/* A string the fixture writes between double quotes: no escapes needed. */
static const char *quotable(const char *s, const char *what)
{
	if (strpbrk(s, "\"\\\n"))
		fail_msg("fixture: %s \"%s\" needs escaping", what, s);
	return s;
}

char *fx_text(const struct fx_spec *spec)
{
	char *text = NULL, name[32];
	size_t len = 0;
	FILE *f;

	assert_in_range(spec->n, 1, RLB_MAX_REPLICAS);
	if (!spec->name)
		snprintf(name, sizeof(name), "fx%u.test", cluster_seq++);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	fprintf(f, "state_dir = \"%s\";\n", quotable(scratch_dir(), "dir"));
	fprintf(f, "clusters = (\n  {\n    name = \"%s\";\n",
		quotable(spec->name ? spec->name : name, "name"));
	if (spec->policy)
		fprintf(f, "    load_balancing = \"%s\";\n",
			quotable(spec->policy, "policy"));
	if (spec->settings)
		fprintf(f, "    %s\n", spec->settings);
	fprintf(f, "    replicas = (\n");
	for (size_t i = 0; i < spec->n; i++) {
		char host[64];

		if (spec->hosts)
			quotable(spec->hosts[i], "host");
		else
			snprintf(host, sizeof(host), "r%zu.example", i);
		if (spec->priority)
			fprintf(f, "      { host = \"%s\"; priority = %lldL; }",
				spec->hosts ? spec->hosts[i] : host,
				(long long)spec->priority[i]);
		else
			fprintf(f, "      \"%s\"",
				spec->hosts ? spec->hosts[i] : host);
		fprintf(f, "%s\n", i + 1 < spec->n ? "," : "");
	}
	fprintf(f, "    );\n  }\n);\n");
	assert_int_equal(fclose(f), 0);
	return text;
}

struct rlb_config *fx_parse(const struct fx_spec *spec)
{
	char *text = fx_text(spec);
	struct rlb_diag diag = {0};
	struct rlb_config *cfg = NULL;
	int rc = rlb_config_parse_string(text, "fixture", &cfg, &diag);

	if (rc < 0) {
		for (size_t i = 0; i < diag.n; i++)
			print_error("%s\n", diag.msgs[i]);
		print_error("in:\n%s", text);
		rlb_diag_free(&diag);
		free(text);
		fail_msg("fixture: the config does not parse (%d)", rc);
	}
	rlb_diag_free(&diag);
	free(text);
	assert_int_equal(cfg->nclusters, 1);
	return cfg;
}

struct fx *fx_new(const struct fx_spec *spec)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->snap =
		rlb_snapshot_new(fx_parse(spec), NULL, RLB_STATE_COUNT, false);
	assert_non_null(f->snap);
	f->c = &f->snap->cfg->clusters[0];
	assert_int_equal(f->c->nreplicas, spec->n);
	/* Tests that share state between fixtures need the file. */
	assert_non_null(f->c->health);
	assert_string_not_equal(rlb_health_path(f->c->health), "(private)");
	f->sel = rlb_selection_new(f->c->nreplicas);
	assert_non_null(f->sel);
	return f;
}

struct fx *fx_cluster(const char *policy, size_t n, const char *const *hosts,
		      const char *settings)
{
	struct fx_spec spec = {
		.policy = policy,
		.n = n,
		.hosts = hosts,
		.settings = settings,
	};

	return fx_new(&spec);
}

struct fx *fx_cluster_local(const char *policy, size_t n,
			    const char *const *hosts, const char *local)
{
	char setting[RLB_MAX_HOST + 32] = "";

	if (local[0])
		snprintf(setting, sizeof(setting), "local_hostname = \"%s\";",
			 quotable(local, "local_hostname"));
	return fx_cluster(policy, n, hosts, setting[0] ? setting : NULL);
}

void fx_free(struct fx *f)
{
	if (!f)
		return;
	rlb_snapshot_put(f->snap);
	free(f->sel);
	free(f);
}

void fx_add_errors(struct rlb_cluster *c, size_t i, uint64_t n)
{
	rlb_health_add_errors(c, i, n, rlb_health_decay_time(c));
}

/* ---- scripted draws ---- */

static uint32_t script[RLB_MAX_REPLICAS];
static size_t script_n, script_next;

static uint32_t script_draw(void *arg)
{
	if (script_next >= script_n) {
		/* Later tests must not inherit a broken script. */
		rlb_random_set_source(NULL, NULL);
		fail_msg("fixture: random draw %zu, but the script has %zu",
			 script_next + 1, script_n);
	}
	return script[script_next++];
}

void fx_draws(const uint32_t *v, size_t n)
{
	assert_true(n <= RLB_MAX_REPLICAS);
	memcpy(script, v, n * sizeof(*v));
	script_n = n;
	script_next = 0;
	rlb_random_set_source(script_draw, NULL);
}

void fx_draws_end(void)
{
	rlb_random_set_source(NULL, NULL);
	if (script_next != script_n)
		fail_msg("fixture: %zu of %zu scripted draws taken",
			 script_next, script_n);
}

/* ---- config files ---- */

void fx_write_file(const char *path, const char *fmt, ...)
{
	char tmp[PATH_MAX];
	va_list ap;
	FILE *f;
	int n;

	n = snprintf(tmp, sizeof(tmp), "%s.new", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		fail_msg("fixture: path too long: %s", path);
	f = fopen(tmp, "w");
	if (!f)
		fail_msg("fixture: cannot create %s: %s", tmp, strerror(errno));
	va_start(ap, fmt);
	n = vfprintf(f, fmt, ap);
	va_end(ap);
	if (fclose(f) != 0 || n < 0)
		fail_msg("fixture: cannot write %s: %s", tmp, strerror(errno));
	if (rename(tmp, path) != 0)
		fail_msg("fixture: cannot rename %s to %s: %s", tmp, path,
			 strerror(errno));
}
