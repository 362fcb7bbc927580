/* fuzz_config.c - libFuzzer target: config text -> load -> snapshot ->
 * selection.
 *
 * The input is up to four sections separated by form feeds ('\f'):
 *
 *   main text \f apps.d/fuzz.conf \f part.conf \f environment
 *
 * The main text becomes DIR/replicalb.conf, the second section the
 * overlay of app "fuzz" (absent when the input has no '\f'), the third
 * DIR/part.conf and DIR/apps.d/part.conf for @include, and the fourth
 * holds lines VAR=value for REPLICALB_LOAD_BALANCING, REPLICALB_HOSTNAME
 * and REPLICALB_LOG_LEVEL. The whole input is also parsed as one string,
 * which must give what loading it from the file gives when it has only
 * the one section.
 * A config that loads is made a snapshot with a private state directory
 * and every cluster runs a few selections, errors and slowdowns.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "engine/engine.h"

#define SECTIONS 4

static char dir[PATH_MAX];	 /* scratch: the config files */
static char state_dir[PATH_MAX]; /* scratch/state: the state files */
static char main_path[PATH_MAX], app_path[PATH_MAX];
static char part_path[PATH_MAX], app_part_path[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *top = fuzz_scratch_dir("config");
	char apps[PATH_MAX];

	fuzz_log_setup();
	snprintf(dir, sizeof(dir), "%s/conf", top);
	fuzz_path(state_dir, sizeof(state_dir), top, "state");
	fuzz_path(apps, sizeof(apps), dir, "apps.d");
	fuzz_path(main_path, sizeof(main_path), dir, "replicalb.conf");
	fuzz_path(app_path, sizeof(app_path), apps, "fuzz.conf");
	fuzz_path(part_path, sizeof(part_path), dir, "part.conf");
	fuzz_path(app_part_path, sizeof(app_part_path), apps, "part.conf");
	if (mkdir(dir, 0700) != 0 || mkdir(apps, 0700) != 0 ||
	    mkdir(state_dir, 0700) != 0) {
		perror("fuzz_config: mkdir");
		exit(1);
	}
	return 0;
}

/*
 * Whether every @include of text stays in the scratch directory: its
 * file name holds no '/' (nor a '\\' that could escape one), so the
 * fuzzer never reads files of the machine it runs on.
 */
static int includes_confined(const char *text)
{
	for (const char *s = strstr(text, "@include"); s;
	     s = strstr(s + 1, "@include")) {
		const char *open = strchr(s, '"');
		const char *close = open ? strchr(open + 1, '"') : NULL;
		size_t end = close ? (size_t)(close - s) : strlen(s);

		if (memchr(s, '/', end) || memchr(s, '\\', end))
			return 0;
	}
	return 1;
}

/* Write section text to path, or remove path when there is none. */
static void put_file(const char *path, const char *text)
{
	if (!text) {
		unlink(path);
		return;
	}
	fuzz_check(fuzz_write_file(path, text, strlen(text)) == 0,
		   "write a config file");
}

/*
 * The environment overrides of src from env, lines "VAR=value" (cut
 * into lines in place; a later line wins; env may be NULL).
 */
static void read_env(char *env, struct rlb_config_source *src)
{
	static const char *const vars[] = {
		"REPLICALB_LOAD_BALANCING=", "REPLICALB_HOSTNAME=",
		"REPLICALB_LOG_LEVEL="};
	const char **dst[] = {&src->env_policy, &src->env_hostname,
			      &src->env_log_level};

	for (char *line = env, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++) {
			size_t len = strlen(vars[i]);

			/* Empty is unset, as rlb_env() reads it. */
			if (strncmp(line, vars[i], len) == 0 && line[len])
				*dst[i] = line + len;
		}
	}
}

/* now + d, saturated: the harness itself must not overflow. */
static int64_t later(int64_t now, int64_t d)
{
	int64_t t;

	return __builtin_add_overflow(now, d, &t) ? INT64_MAX : t;
}

/* The selection's order is a permutation of the replicas. */
static void check_order(const struct rlb_selection *sel)
{
	uint8_t *seen = calloc(sel->n ? sel->n : 1, 1);

	if (!seen)
		return;
	for (size_t k = 0; k < sel->n; k++) {
		fuzz_check(sel->order[k] < sel->n, "selection index in range");
		fuzz_check(!seen[sel->order[k]], "selection without repeats");
		seen[sel->order[k]] = 1;
	}
	free(seen);
}

/* A few selections of c over time, with failures counted in between. */
static void exercise_cluster(struct rlb_config *cfg, struct rlb_cluster *c)
{
	struct rlb_selection *sel = rlb_selection_new(c->nreplicas);
	int64_t hl = c->s.half_life, now = 1000000;
	char upper[RLB_MAX_HOST + 2];
	size_t len;

	fuzz_check(c->nreplicas >= 1 && c->nreplicas <= RLB_MAX_REPLICAS,
		   "replica count in 1..RLB_MAX_REPLICAS");
	/*
	 * Names are stored lowercase with one trailing dot dropped, and a
	 * query drops one too: the stored name plus a dot, in any case,
	 * finds the cluster (a stored name may still end in a dot).
	 */
	len = strlen(c->name);
	fuzz_check(len >= 1 && len <= RLB_MAX_HOST, "name length");
	for (size_t i = 0; i <= len; i++)
		upper[i] = c->name[i] >= 'a' && c->name[i] <= 'z'
				   ? (char)(c->name[i] - 'a' + 'A')
				   : c->name[i];
	strcat(upper, ".");
	fuzz_check(rlb_config_find(cfg, upper) == c,
		   "find by upper-case name with a dot");
	if (c->name[len - 1] != '.')
		fuzz_check(rlb_config_find(cfg, c->name) == c,
			   "find by stored name");
	if (!sel)
		return;
	for (int round = 0; round < 4; round++) {
		size_t first;

		rlb_select(c, false, now, sel);
		check_order(sel);
		first = sel->order[0];
		rlb_health_add_errors(c, first, 1 + (uint64_t)round, now);
		rlb_health_add_slowdowns(c, sel->order[sel->n - 1], 1, now);
		rlb_select(c, true, now, sel);
		check_order(sel);
		(void)rlb_health_recovery_seconds(c, first, now);
		now = later(now, round == 2 ? INT64_MAX : hl);
	}
	rlb_health_reset(c, SIZE_MAX);
	free(sel);
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* What parsing a text gave: its result, config and messages. */
struct outcome {
	int rc;
	struct rlb_config *cfg; /* on success */
	struct rlb_diag diag;
};

/*
 * Reading a file and parsing its text as a string must agree: the same
 * result, the same messages, the same model (state_dir aside: the load
 * takes it from the environment).
 */
static void compare_outcomes(const struct outcome *f, const struct outcome *s)
{
	const struct rlb_config *a = f->cfg, *b = s->cfg;

	fuzz_check(f->rc == s->rc, "file and string parse alike");
	fuzz_check(f->diag.n == s->diag.n, "as many messages");
	for (size_t i = 0; i < f->diag.n; i++)
		fuzz_check(strcmp(f->diag.msgs[i], s->diag.msgs[i]) == 0,
			   "the same messages");
	if (f->rc != 0)
		return;
	fuzz_check(a->nclusters == b->nclusters &&
			   same_str(a->local_hostname, b->local_hostname) &&
			   a->log_level == b->log_level &&
			   a->log_target == b->log_target,
		   "the same top level");
	for (size_t i = 0; i < a->nclusters; i++) {
		const struct rlb_cluster *x = &a->clusters[i],
					 *y = &b->clusters[i];

		fuzz_check(same_str(x->name, y->name) &&
				   x->name_hash == y->name_hash &&
				   x->port == y->port &&
				   x->nreplicas == y->nreplicas &&
				   same_str(x->local_hostname,
					    y->local_hostname) &&
				   x->s.load_balancing == y->s.load_balancing &&
				   x->s.first_offset == y->s.first_offset &&
				   x->s.half_life == y->s.half_life &&
				   x->s.error_cap == y->s.error_cap &&
				   x->s.max_ignored_errors ==
					   y->s.max_ignored_errors &&
				   x->s.dns_cache_ttl == y->s.dns_cache_ttl &&
				   x->s.connect_timeout_ms ==
					   y->s.connect_timeout_ms &&
				   x->s.connect_failover ==
					   y->s.connect_failover,
			   "the same cluster");
		for (size_t j = 0; j < x->nreplicas; j++) {
			const struct rlb_replica *r = &x->replicas[j],
						 *q = &y->replicas[j];

			fuzz_check(same_str(r->host, q->host) &&
					   r->port == q->port &&
					   r->priority == q->priority &&
					   r->npinned == q->npinned &&
					   r->nliteral == q->nliteral &&
					   r->identity == q->identity,
				   "the same replica");
		}
	}
}

/*
 * Load the files as the library would, then use what loaded. str, if
 * not NULL, is what parsing the main file's text as a string gave.
 */
static void load_and_select(char *env, const struct outcome *str)
{
	struct rlb_config_source src = {
		.path = main_path,
		.app = "fuzz",
		.env_state_dir = state_dir,
	};
	struct rlb_config *cfg = NULL;
	struct rlb_diag diag = {0};
	struct rlb_snapshot *snap;
	int rc;

	read_env(env, &src);
	rc = rlb_config_load(&src, &cfg, &diag);
	if (str) {
		struct outcome file = {rc, cfg, diag};

		compare_outcomes(&file, str);
	}
	rlb_diag_free(&diag);
	if (rc != 0) {
		fuzz_check(cfg == NULL, "no config from a failed load");
		return;
	}
	fuzz_check(rlb_config_changed(cfg) == false, "unchanged files");
	snap = rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT, false);
	if (!snap)
		return;
	for (size_t i = 0; i < cfg->nclusters; i++)
		exercise_cluster(cfg, &cfg->clusters[i]);
	rlb_snapshot_put(snap);
	fuzz_remove_own_segments();
	fuzz_empty_dir(state_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *sec[SECTIONS] = {0};
	struct outcome str = {0};
	bool alike;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (!includes_confined(text)) {
		free(text);
		return -1; /* keep out of the corpus */
	}

	/*
	 * The whole input as one string (no @include: it would be read
	 * from the working directory). Without sections it is all the
	 * main file, which must then load alike.
	 */
	alike = !strstr(text, "@include");
	if (alike)
		str.rc = rlb_config_parse_string(text, main_path, &str.cfg,
						 &str.diag);
	alike = alike && !strchr(text, '\f');

	sec[0] = text;
	for (int i = 1; i < SECTIONS && sec[i - 1]; i++) {
		sec[i] = strchr(sec[i - 1], '\f');
		if (sec[i])
			*sec[i]++ = '\0';
	}
	put_file(main_path, sec[0]);
	put_file(app_path, sec[1]);
	put_file(part_path, sec[2]);
	put_file(app_part_path, sec[2]);
	load_and_select(sec[3], alike ? &str : NULL);
	rlb_config_free(str.cfg);
	rlb_diag_free(&str.diag);
	free(text);
	return 0;
}
