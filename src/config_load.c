/* config_load.c - finding and reading config files, the apps.d overlay,
 * environment overrides, and file stamps for hot reload. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#define RLB_SYSTEM_CONFIG    SYSCONFDIR "/replicalb/replicalb.conf"
#define RLB_MAX_CONFIG_BYTES (16 << 20) /* a bigger file is a mistake */

/* The whole of f as a string, or NULL (errno set). */
static char *read_text(FILE *f)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *grown;
	size_t n;

	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len > 1)
			continue;
		if (cap >= RLB_MAX_CONFIG_BYTES) {
			free(buf);
			errno = EFBIG;
			return NULL;
		}
		grown = realloc(buf, cap * 2);
		if (!grown)
			free(buf);
		buf = grown;
		cap *= 2;
	}
	if (!buf)
		return NULL;
	if (ferror(f)) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/*
 * Read and parse one file into l, stamping it. Returns 0 (errors, if
 * any, counted in p) or -ENOENT when the file does not exist.
 */
static int read_file(struct rlb_cfg_parser *p, const char *path,
		     struct rlb_cfg_layer *l, struct rlb_file_stamp *stamp)
{
	const char *slash = strrchr(path, '/');
	char *dir = NULL, *text;
	char ebuf[128];
	struct stat st;
	FILE *f;

	stamp->path = rlb_cfg_strdup(p, path);
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return -ENOENT;
		rlb_cfg_report_at(p, path, 0, "cannot open: %s",
				  strerror_r(errno, ebuf, sizeof(ebuf)));
		return 0;
	}
	if (fstat(fileno(f), &st) == 0) {
		stamp->exists = true;
		stamp->dev = st.st_dev;
		stamp->ino = st.st_ino;
		stamp->size = st.st_size;
		stamp->mtime = st.st_mtim;
		if (S_ISDIR(st.st_mode)) {
			rlb_cfg_report_at(p, path, 0, "is a directory");
			goto out_close;
		}
	}
	text = read_text(f);
	if (!text) {
		if (errno == ENOMEM)
			p->nomem = true;
		else
			rlb_cfg_report_at(
				p, path, 0, "cannot read: %s",
				strerror_r(errno, ebuf, sizeof(ebuf)));
		goto out_close;
	}
	/* @include "x" is relative to the including file's directory. */
	if (slash)
		dir = slash == path ? strdup("/")
				    : strndup(path, (size_t)(slash - path));
	p->file = path;
	rlb_cfg_parse_text(p, text, dir, l);
	free(dir);
	free(text);
out_close:
	fclose(f);
	return 0;
}

/* A per-app name usable as a file name in apps.d. */
static bool app_name_ok(const char *app)
{
	return app && *app && !strchr(app, '/') && strcmp(app, ".") != 0 &&
	       strcmp(app, "..") != 0;
}

/* Move cluster pc, with the settings it inherits, to the end of cfg's. */
static void take_cluster(struct rlb_config *cfg, struct rlb_cfg_cluster *pc)
{
	rlb_cfg_inherit(pc, &cfg->defaults);
	cfg->clusters[cfg->nclusters++] = pc->c;
	memset(&pc->c, 0, sizeof(pc->c));
}

/* Merge the built-in values, the main file m and the app file a into
 * cfg: clusters move out of the layers into cfg. */
static void merge(struct rlb_cfg_parser *p, struct rlb_cfg_layer *m,
		  struct rlb_cfg_layer *a, struct rlb_config *cfg)
{
	size_t cap = m->nclusters + a->nclusters;
	bool *taken = NULL;

	rlb_cfg_defaults(cfg);
	rlb_cfg_overlay(cfg, m);
	rlb_cfg_overlay(cfg, a);
	if (cap == 0)
		return;
	cfg->clusters = calloc(cap, sizeof(*cfg->clusters));
	taken = calloc(a->nclusters + 1, sizeof(*taken));
	if (!cfg->clusters || !taken) {
		p->nomem = true;
		goto out_free;
	}
	/* An app cluster replaces the same-named one where it stood. */
	for (size_t i = 0; i < m->nclusters; i++) {
		struct rlb_cfg_cluster *pc = &m->clusters[i];

		for (size_t j = 0; j < a->nclusters; j++) {
			if (!taken[j] &&
			    strcmp(a->clusters[j].c.name, pc->c.name) == 0) {
				taken[j] = true;
				pc = &a->clusters[j];
				break;
			}
		}
		take_cluster(cfg, pc);
	}
	for (size_t j = 0; j < a->nclusters; j++) {
		if (!taken[j])
			take_cluster(cfg, &a->clusters[j]);
	}
out_free:
	free(taken);
}

/* Check the environment overrides; reports bad values. */
static void check_env(struct rlb_cfg_parser *p,
		      const struct rlb_config_source *src,
		      enum rlb_policy *policy, enum rlb_log_level *level)
{
	if (src->env_policy && rlb_policy_parse(src->env_policy, policy) < 0)
		rlb_cfg_bad_env_policy(p, "REPLICALB_LOAD_BALANCING",
				       src->env_policy);
	/* A bad REPLICALB_LOG_LEVEL is ignored (runtime.c warns): it
	 * must not turn the whole library off. */
	if (src->env_log_level)
		rlb_log_level_parse(src->env_log_level, level);
}

static void apply_env(struct rlb_cfg_parser *p,
		      const struct rlb_config_source *src,
		      enum rlb_policy policy, enum rlb_log_level level,
		      struct rlb_config *cfg)
{
	if (src->env_policy) {
		cfg->defaults.load_balancing = policy;
		for (size_t i = 0; i < cfg->nclusters; i++)
			cfg->clusters[i].s.load_balancing = policy;
	}
	/* REPLICALB_CONNECT_FAILOVER=1 (the wrapper's --failover): every
	 * cluster fails over; "0" leaves the config's choice. */
	if (src->env_failover && strcmp(src->env_failover, "0") != 0) {
		cfg->defaults.connect_failover = true;
		for (size_t i = 0; i < cfg->nclusters; i++)
			cfg->clusters[i].s.connect_failover = true;
	}
	if (src->env_hostname) {
		free(cfg->local_hostname);
		cfg->local_hostname = rlb_cfg_strdup(p, src->env_hostname);
		for (size_t i = 0; i < cfg->nclusters; i++) {
			free(cfg->clusters[i].local_hostname);
			cfg->clusters[i].local_hostname = NULL;
		}
	}
	if (src->env_state_dir) {
		free(cfg->state_dir);
		cfg->state_dir = rlb_cfg_strdup(p, src->env_state_dir);
	}
	if (src->env_log_level &&
	    rlb_log_level_parse(src->env_log_level, &level) == 0)
		cfg->log_level = level;
}

/*
 * Build *out from the layers and the environment, or report why not.
 * Frees the layers and files, except that files move into *out, or into
 * *broken when the config is broken.
 */
static int finish(struct rlb_cfg_parser *p, struct rlb_cfg_layer *m,
		  struct rlb_cfg_layer *a, const struct rlb_config_source *src,
		  struct rlb_config_files *files, struct rlb_config **out,
		  struct rlb_config_files *broken)
{
	static const struct rlb_config_source no_env;
	enum rlb_policy policy = RLB_POLICY_RANDOM;
	enum rlb_log_level level = RLB_LOG_WARNING;
	struct rlb_config *cfg = NULL;
	int rc = -EINVAL;

	if (!src)
		src = &no_env;
	check_env(p, src, &policy, &level);
	if (p->errors || p->nomem)
		goto out_free;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		p->nomem = true;
		goto out_free;
	}
	merge(p, m, a, cfg);
	apply_env(p, src, policy, level, cfg);
	cfg->files = *files;
	memset(files, 0, sizeof(*files));
	if (p->nomem)
		goto out_free;
	*out = cfg;
	cfg = NULL;
	rc = 0;
out_free:
	if (p->nomem)
		rc = -ENOMEM;
	rlb_config_free(cfg);
	if (rc == -EINVAL && broken) {
		*broken = *files;
		memset(files, 0, sizeof(*files));
	}
	rlb_config_files_free(files);
	rlb_cfg_layer_free(m);
	rlb_cfg_layer_free(a);
	return rc;
}

const char *rlb_config_path(void)
{
	const char *env = rlb_env("REPLICALB_CONFIG");

	/* SPEC 2: the first of the two that exists. */
	if (env && access(env, F_OK) != 0 &&
	    access(RLB_SYSTEM_CONFIG, F_OK) == 0)
		return RLB_SYSTEM_CONFIG;
	return env ? env : RLB_SYSTEM_CONFIG;
}

const char *rlb_config_app_name(void)
{
	const char *app = rlb_env("REPLICALB_APP");

	return app ? app : program_invocation_short_name;
}

void rlb_config_source_from_env(struct rlb_config_source *src)
{
	memset(src, 0, sizeof(*src));
	src->path = rlb_config_path();
	src->app = rlb_config_app_name();
	src->env_policy = rlb_env("REPLICALB_LOAD_BALANCING");
	src->env_hostname = rlb_env("REPLICALB_HOSTNAME");
	src->env_failover = rlb_env("REPLICALB_CONNECT_FAILOVER");
	src->env_state_dir = rlb_env("REPLICALB_STATE_DIR");
	src->env_log_level = rlb_env("REPLICALB_LOG_LEVEL");
}

int rlb_config_load(const struct rlb_config_source *src,
		    struct rlb_config **out, struct rlb_diag *diag)
{
	return rlb_config_load_ex(src, out, diag, NULL);
}

int rlb_config_load_ex(const struct rlb_config_source *src,
		       struct rlb_config **out, struct rlb_diag *diag,
		       struct rlb_config_files *broken)
{
	struct rlb_config_files files = {.n = 1};
	struct rlb_cfg_parser p = {.diag = diag};
	struct rlb_cfg_layer m = {0}, a = {0};
	const char *path = src && src->path ? src->path : rlb_config_path();
	const char *app = src ? src->app : NULL;
	char *app_path = NULL;
	int saved = errno;
	int rc;

	rc = read_file(&p, path, &m, &files.stamps[0]);
	if (rc == -ENOENT) {
		rlb_config_files_free(&files);
		errno = saved;
		return -ENOENT;
	}
	if (m.parsed && !m.has_clusters)
		rlb_cfg_report_at(&p, path, 1, "missing \"clusters\" list");
	if (app_name_ok(app)) {
		const char *slash = strrchr(path, '/');
		int dirlen = slash ? (int)(slash - path + 1) : 0;

		if (asprintf(&app_path, "%.*sapps.d/%s.conf", dirlen, path,
			     app) < 0) {
			app_path = NULL;
			p.nomem = true;
		} else {
			files.n = 2;
			/* A missing app file is stamped as missing, so
			 * that creating it later counts as a change. */
			read_file(&p, app_path, &a, &files.stamps[1]);
		}
	}
	rc = finish(&p, &m, &a, src, &files, out, broken);
	free(app_path);
	errno = saved;
	return rc;
}

int rlb_config_parse_string(const char *text, const char *name,
			    struct rlb_config **out, struct rlb_diag *diag)
{
	struct rlb_cfg_parser p = {
		.diag = diag,
		.file = name ? name : "(string)",
	};
	struct rlb_config_files none = {0};
	struct rlb_cfg_layer m = {0}, a = {0};

	rlb_cfg_parse_text(&p, text ? text : "", NULL, &m);
	if (m.parsed && !m.has_clusters)
		rlb_cfg_report_at(&p, p.file, 1, "missing \"clusters\" list");
	return finish(&p, &m, &a, NULL, &none, out, NULL);
}

bool rlb_config_files_changed(const struct rlb_config_files *files)
{
	int saved = errno;
	bool changed = false;

	for (size_t i = 0; files && i < files->n && !changed; i++) {
		const struct rlb_file_stamp *s = &files->stamps[i];
		struct stat st;
		bool exists = stat(s->path, &st) == 0;

		if (exists != s->exists)
			changed = true;
		else if (exists)
			changed = st.st_dev != s->dev || st.st_ino != s->ino ||
				  st.st_size != s->size ||
				  st.st_mtim.tv_sec != s->mtime.tv_sec ||
				  st.st_mtim.tv_nsec != s->mtime.tv_nsec;
	}
	errno = saved;
	return changed;
}

void rlb_config_files_free(struct rlb_config_files *files)
{
	if (!files)
		return;
	for (size_t i = 0; i < files->n; i++)
		free(files->stamps[i].path);
	memset(files, 0, sizeof(*files));
}
