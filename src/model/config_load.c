/* config_load.c - finding, checking and reading config files (the trust
 * rule, @include, the apps.d overlay), environment overrides, and file
 * stamps for hot reload. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/config_internal.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#define RLB_SYSTEM_CONFIG     SYSCONFDIR "/replicalb/replicalb.conf"
#define RLB_MAX_CONFIG_BYTES  (16 << 20) /* a bigger file is a mistake */
#define RLB_MAX_INCLUDE_DEPTH 10	 /* libconfig's */
#define RLB_MAX_INCLUDES      256	 /* @includes read by one load */
#define RLB_WHY_MAX	      (PATH_MAX + 128)

/* ------------------------------------------------------------------ */
/* The trust rule (design.md §2.7) */

/* What st is, for a refusal of something that is no regular file. */
static const char *kind(const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return "a directory";
	if (S_ISFIFO(st->st_mode))
		return "a FIFO";
	if (S_ISSOCK(st->st_mode))
		return "a socket";
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		return "a device";
	return "not a regular file";
}

/*
 * Whether st, a config file or a directory above one, is owned by
 * someone other than root and the effective user, or writable by someone
 * else; if so, why (why, len). The effective user: in a setuid program
 * the real user is the one who must not steer it.
 */
static bool distrusted(const struct stat *st, bool dir, char *why, size_t len)
{
	mode_t w = st->st_mode & (S_IWGRP | S_IWOTH);

	if (st->st_uid != 0 && st->st_uid != rlb_libc()->geteuid()) {
		snprintf(why, len, "owned by uid %lu",
			 (unsigned long)st->st_uid);
		return true;
	}
	/* A sticky directory (/tmp) lets others add names, but not rename
	 * or remove ours: the entry below it is checked to be ours. */
	if (dir && (st->st_mode & S_ISVTX))
		w = 0;
	if (w) {
		snprintf(why, len, "writable by %s",
			 w == S_IWGRP	? "group"
			 : w == S_IWOTH ? "others"
					: "group and others");
		return true;
	}
	return false;
}

/*
 * Whether every directory above path, once its symlinks are resolved,
 * passes distrusted() (ssh's StrictModes, up to /); else why. Checked on
 * names: only someone these directories trust could change what they
 * resolve to in between.
 */
static bool dirs_trusted(const char *path, char *why, size_t len)
{
	char *real = rlb_libc()->realpath(path, NULL);
	char reason[64], ebuf[128];
	bool ok = true;
	struct stat st;

	if (!real) {
		snprintf(why, len, "cannot resolve its path: %s",
			 strerror_r(errno, ebuf, sizeof(ebuf)));
		return false;
	}
	for (;;) {
		char *slash = strrchr(real, '/');

		if (!slash || (slash == real && !real[1]))
			break;
		slash[slash == real] = '\0';
		if (rlb_libc()->stat(real, &st) != 0) {
			snprintf(why, len, "cannot check directory %s: %s",
				 real, strerror_r(errno, ebuf, sizeof(ebuf)));
			ok = false;
			break;
		}
		if (distrusted(&st, true, reason, sizeof(reason))) {
			snprintf(why, len, "directory %s is %s", real, reason);
			ok = false;
			break;
		}
	}
	free(real);
	return ok;
}

static void stamp_set(struct rlb_file_stamp *stamp, const struct stat *st)
{
	if (!stamp)
		return;
	stamp->exists = true;
	stamp->dev = st->st_dev;
	stamp->ino = st->st_ino;
	stamp->size = st->st_size;
	stamp->mtime = st->st_mtim;
	stamp->ctime = st->st_ctim;
}

/* The whole of regular file fd, NUL-terminated, in *text (*len bytes);
 * 0 or a negative errno (-EFBIG past the limit). */
static int read_fd(int fd, char **text, size_t *len)
{
	size_t n = 0, cap = 4096;
	char *buf = malloc(cap), *grown;
	ssize_t got;

	for (;;) {
		if (!buf)
			return -ENOMEM;
		if (cap - n < 2) {
			if (cap >= RLB_MAX_CONFIG_BYTES) {
				free(buf);
				return -EFBIG;
			}
			grown = realloc(buf, cap * 2);
			if (!grown)
				free(buf);
			buf = grown;
			cap *= 2;
			continue;
		}
		got = rlb_libc()->read(fd, buf + n, cap - n - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;

			free(buf);
			return -err;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

enum read_result {
	READ_OK,      /* *text holds the file */
	READ_MISSING, /* no such file */
	READ_REFUSED, /* not trusted: why */
	READ_FAILED,  /* could not open or read: why; or out of memory */
};

/*
 * Check path by the trust rule and read it whole into *text (malloc'd,
 * NUL-terminated, *len bytes), never blocking: whatever is not a regular
 * file is refused before it is opened (opening a device may do
 * something), the open is non-blocking in case the name is swapped for
 * a FIFO in between, and the verdict is on the open descriptor. stamp,
 * if not NULL, gets what identifies the file, refused ones too. Sets
 * *nomem when out of memory.
 */
static enum read_result read_checked(const char *path, char **text, size_t *len,
				     struct rlb_file_stamp *stamp, char *why,
				     size_t whylen, bool *nomem)
{
	enum read_result res = READ_REFUSED;
	struct stat st;
	char ebuf[128];
	int fd, rc;

	if (rlb_libc()->stat(path, &st) != 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return READ_MISSING;
		snprintf(why, whylen, "cannot open: %s",
			 strerror_r(errno, ebuf, sizeof(ebuf)));
		return READ_FAILED;
	}
	if (!S_ISREG(st.st_mode)) {
		stamp_set(stamp, &st);
		snprintf(why, whylen, "%s, not a regular file", kind(&st));
		return READ_REFUSED;
	}
	fd = rlb_libc()->open(path,
			      O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	if (fd < 0 || rlb_libc()->fstat(fd, &st) != 0) {
		if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
			return READ_MISSING;
		snprintf(why, whylen, "cannot open: %s",
			 strerror_r(errno, ebuf, sizeof(ebuf)));
		res = READ_FAILED;
		goto out_close;
	}
	stamp_set(stamp, &st);
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "%s, not a regular file", kind(&st));
		goto out_close;
	}
	if (distrusted(&st, false, why, whylen) ||
	    !dirs_trusted(path, why, whylen))
		goto out_close;
	res = READ_FAILED;
	rc = read_fd(fd, text, len);
	if (rc == -ENOMEM)
		*nomem = true;
	else if (rc == -EFBIG)
		snprintf(why, whylen, "larger than %d MiB",
			 RLB_MAX_CONFIG_BYTES >> 20);
	else if (rc < 0)
		snprintf(why, whylen, "cannot read: %s",
			 strerror_r(-rc, ebuf, sizeof(ebuf)));
	else
		res = READ_OK;
out_close:
	/* Not close(): that is the library's own hook. */
	if (fd >= 0)
		rlb_libc()->close(fd);
	return res;
}

/* ------------------------------------------------------------------ */
/* @include */

/*
 * libconfig would open an @include'd file with a blocking fopen() and no
 * checks, so it never sees one: the text it parses is the file with each
 * file it @includes put in its place, read here by the rule above, and a
 * map of where each line came from. The scan below follows libconfig's
 * lexer (scanner.l) in what makes an @include: `^[ \t]*@include[ \t]+"`
 * at the start of a line, outside comments and strings.
 */

enum lex_state {
	LEX_CODE,
	LEX_COMMENT, /* inside a C comment */
	LEX_STRING,
};

struct expansion {
	struct rlb_cfg_parser *p;
	char *text; /* what libconfig parses */
	size_t len, cap;
	struct rlb_cfg_span *spans;
	size_t nspans, spans_cap;
	char **names; /* included files' paths, which spans point to */
	size_t nnames;
	enum lex_state state;
	bool line_start;    /* the next byte of text starts a line */
	int text_line;	    /* line of text that the next byte is on */
	unsigned nincludes; /* files read for @includes so far */
	char *why;	    /* room for a reason (RLB_WHY_MAX) */
};

/* buf (cap elements of size) with room for want, or NULL: buf is kept. */
static void *grow(void *buf, size_t *cap, size_t want, size_t size)
{
	size_t n = *cap ? *cap : 16;

	if (want <= *cap)
		return buf;
	while (n < want)
		n *= 2;
	buf = realloc(buf, n * size);
	if (buf)
		*cap = n;
	return buf;
}

/* Append k bytes of file `name`, the first on its line `line`. */
static bool emit(struct expansion *e, const char *s, size_t k, const char *name,
		 int line)
{
	void *grown;

	if (e->len + k >= RLB_MAX_CONFIG_BYTES) {
		rlb_cfg_report_at(e->p, name, line,
				  "with what it @includes, larger than %d MiB",
				  RLB_MAX_CONFIG_BYTES >> 20);
		return false;
	}
	grown = grow(e->text, &e->cap, e->len + k + 1, 1);
	if (!grown) {
		e->p->nomem = true;
		return false;
	}
	e->text = grown;
	for (size_t i = 0; i < k; i++) {
		if (e->line_start) {
			const struct rlb_cfg_span *last =
				e->nspans ? &e->spans[e->nspans - 1] : NULL;

			/* A new span where the lines stop following on. */
			if (!last || last->file != name ||
			    last->line + (e->text_line - last->first) != line) {
				grown = grow(e->spans, &e->spans_cap,
					     e->nspans + 1, sizeof(*e->spans));
				if (!grown) {
					e->p->nomem = true;
					return false;
				}
				e->spans = grown;
				e->spans[e->nspans++] = (struct rlb_cfg_span){
					.first = e->text_line,
					.file = name,
					.line = line,
				};
			}
			e->line_start = false;
		}
		e->text[e->len++] = s[i];
		if (s[i] == '\n') {
			line++;
			e->text_line++;
			e->line_start = true;
		}
	}
	e->text[e->len] = '\0';
	return true;
}

/* Length of `[ \t]*@include[ \t]+"` at s (n bytes), or 0. */
static size_t include_open(const char *s, size_t n)
{
	size_t i = 0, j;

	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (n - i < 8 || memcmp(s + i, "@include", 8) != 0)
		return 0;
	j = i += 8;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i > j && i < n && s[i] == '"' ? i + 1 : 0;
}

static bool expand(struct expansion *e, const char *text, size_t n,
		   const char *name, int depth);

/* The directory of path, or NULL for none (relative to the working
 * directory); malloc'd. */
static char *dir_of(const char *path, bool *nomem)
{
	const char *slash = strrchr(path, '/');
	char *dir;

	if (!slash)
		return NULL;
	dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	if (!dir)
		*nomem = true;
	return dir;
}

/*
 * Put the file named `file` (as written in the @include on line `line`
 * of `from`) in place: a relative name is relative to the directory of
 * `from`, the file that holds the @include.
 */
static bool include(struct expansion *e, const char *file, const char *from,
		    int line, int depth)
{
	struct rlb_cfg_parser *p = e->p;
	char *dir = file[0] == '/' ? NULL : dir_of(from, &p->nomem);
	char *path = NULL, *text = NULL, **names;
	size_t len;
	bool ok = false;

	if (p->nomem)
		return false;
	if (asprintf(&path, "%s%s%s", dir ? dir : "",
		     dir && strcmp(dir, "/") != 0 ? "/" : "", file) < 0) {
		p->nomem = true;
		path = NULL;
		goto out_free;
	}
	if (depth >= RLB_MAX_INCLUDE_DEPTH) {
		rlb_cfg_report_at(p, from, line,
				  "@include nested more than %d deep",
				  RLB_MAX_INCLUDE_DEPTH);
		goto out_free;
	}
	/* A bound on the files read, which nesting multiplies. */
	if (++e->nincludes > RLB_MAX_INCLUDES) {
		rlb_cfg_report_at(p, from, line, "more than %d @includes",
				  RLB_MAX_INCLUDES);
		goto out_free;
	}
	switch (read_checked(path, &text, &len, NULL, e->why, RLB_WHY_MAX,
			     &p->nomem)) {
	case READ_OK:
		break;
	case READ_MISSING:
		rlb_cfg_report_at(p, from, line, "%s: no such file", path);
		goto out_free;
	case READ_REFUSED:
		rlb_cfg_report_at(p, from, line, "%s: not used: %s", path,
				  e->why);
		goto out_free;
	case READ_FAILED:
		if (!p->nomem)
			rlb_cfg_report_at(p, from, line, "%s: %s", path,
					  e->why);
		goto out_free;
	}
	names = realloc(e->names, (e->nnames + 1) * sizeof(*names));
	if (!names) {
		p->nomem = true;
		goto out_free;
	}
	e->names = names;
	e->names[e->nnames++] = path;
	ok = expand(e, text, len, path, depth + 1);
	/* libconfig would go on in the including file's text; no
	 * config needs that. */
	if (ok && e->state != LEX_CODE) {
		rlb_cfg_report_at(p, path, 0, "ends inside a %s",
				  e->state == LEX_COMMENT ? "comment"
							  : "string");
		ok = false;
	}
	path = NULL;
out_free:
	free(text);
	free(path);
	free(dir);
	return ok;
}

/*
 * The @include whose `[ \t]*@include[ \t]+"` (k bytes) starts at *at of
 * text (n bytes, of file `name`, on its line `line`): read the file name
 * up to the closing quote as libconfig does (\\ and \" escaped), put the
 * file in its place and leave *at after the quote.
 */
static bool include_here(struct expansion *e, const char *text, size_t n,
			 size_t *at, size_t k, const char *name, int line,
			 int depth)
{
	size_t i = *at + k, len = 0;
	char *file = malloc(n - i + 1);
	bool ok;

	if (!file) {
		e->p->nomem = true;
		return false;
	}
	for (; i < n && text[i] != '"'; i++) {
		char c = text[i];

		if (c == '\\' && i + 1 < n &&
		    (text[i + 1] == '\\' || text[i + 1] == '"'))
			c = text[++i];
		else if (c == '\\' || c == '\n')
			break;
		file[len++] = c;
	}
	file[len] = '\0';
	if (i >= n || text[i] != '"') {
		rlb_cfg_report_at(e->p, name, line,
				  "@include: bad or unterminated file name");
		free(file);
		return false;
	}
	*at = i + 1;
	ok = include(e, file, name, line, depth);
	free(file);
	/*
	 * libconfig ends the included file's last token at its end, then
	 * goes on after the closing quote, which is not the start of a
	 * line: a newline, then an empty comment.
	 */
	return ok && (e->line_start || emit(e, "\n", 1, name, line)) &&
	       emit(e, "/**/", 4, name, line);
}

/*
 * Append text (n bytes) of the file `name` to e, with each file it
 * @includes in place. false when that failed (reported) or out of memory.
 */
static bool expand(struct expansion *e, const char *text, size_t n,
		   const char *name, int depth)
{
	size_t i = 0, from = 0;
	int line = 1, from_line = 1;

	if (memchr(text, '\0', n)) {
		rlb_cfg_report_at(e->p, name, 0, "holds a NUL byte");
		return false;
	}
	while (i < n) {
		char c = text[i], next = i + 1 < n ? text[i + 1] : '\0';
		size_t k;

		switch (e->state) {
		case LEX_COMMENT:
			if (c == '*' && next == '/') {
				e->state = LEX_CODE;
				i += 2;
				continue;
			}
			break;
		case LEX_STRING:
			if (c == '\\' && (next == '"' || next == '\\')) {
				i += 2;
				continue;
			}
			if (c == '"')
				e->state = LEX_CODE;
			break;
		case LEX_CODE:
			if ((i == 0 || text[i - 1] == '\n') &&
			    (k = include_open(text + i, n - i))) {
				if (!emit(e, text + from, i - from, name,
					  from_line) ||
				    !include_here(e, text, n, &i, k, name, line,
						  depth))
					return false;
				from = i;
				from_line = line;
				continue;
			}
			if (c == '"') {
				e->state = LEX_STRING;
			} else if (c == '/' && next == '*') {
				e->state = LEX_COMMENT;
				i += 2;
				continue;
			} else if (c == '#' || (c == '/' && next == '/')) {
				/* (#|//).*$ needs the newline: without one
				 * the lexer takes "#" as a character. */
				const char *nl = memchr(text + i, '\n', n - i);

				if (nl) {
					i = (size_t)(nl - text);
					continue;
				}
			}
			break;
		}
		if (c == '\n')
			line++;
		i++;
	}
	return emit(e, text + from, i - from, name, from_line);
}

static void expansion_free(struct expansion *e)
{
	for (size_t i = 0; i < e->nnames; i++)
		free(e->names[i]);
	free(e->names);
	free(e->spans);
	free(e->text);
}

/*
 * Parse text (n bytes) of the file `name`, with what it @includes, into
 * l. why: room for a reason (RLB_WHY_MAX).
 */
static void parse_file_text(struct rlb_cfg_parser *p, const char *text,
			    size_t n, const char *name, struct rlb_cfg_layer *l,
			    char *why)
{
	struct expansion e = {
		.p = p,
		.line_start = true,
		.text_line = 1,
		.why = why,
	};

	if (expand(&e, text, n, name, 0) && !p->nomem) {
		p->file = name;
		p->spans = e.spans;
		p->nspans = e.nspans;
		rlb_cfg_parse_text(p, e.text ? e.text : "", l);
		p->spans = NULL;
		p->nspans = 0;
	}
	expansion_free(&e);
}

/*
 * Check, read and parse one file into l, stamping it. Returns 0 (errors,
 * if any, counted in p) or -ENOENT when the file does not exist. A file
 * refused by the trust rule is an error, unless `refused` is not NULL:
 * then it gets the message (malloc'd) and l stays empty.
 */
static int read_file(struct rlb_cfg_parser *p, const char *path,
		     struct rlb_cfg_layer *l, struct rlb_file_stamp *stamp,
		     char **refused)
{
	char *why = malloc(RLB_WHY_MAX), *text = NULL;
	size_t len;

	stamp->path = rlb_cfg_strdup(p, path);
	if (!why) {
		p->nomem = true;
		return 0;
	}
	switch (read_checked(path, &text, &len, stamp, why, RLB_WHY_MAX,
			     &p->nomem)) {
	case READ_OK:
		parse_file_text(p, text, len, path, l, why);
		break;
	case READ_MISSING:
		free(why);
		return -ENOENT;
	case READ_REFUSED:
		if (!refused) {
			rlb_cfg_report_at(p, path, 0, "not used: %s", why);
		} else if (asprintf(refused, "%s: not used: %s", path, why) <
			   0) {
			*refused = NULL;
			p->nomem = true;
		}
		break;
	case READ_FAILED:
		if (!p->nomem)
			rlb_cfg_report_at(p, path, 0, "%s", why);
		break;
	}
	free(text);
	free(why);
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
		rlb_cfg_bad_env_policy(
			p, rlb_env_vars[RLB_ENV_LOAD_BALANCING].name,
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
	rlb_config_index(cfg);
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
	const char *env = rlb_env(RLB_ENV_CONFIG);

	/* design.md §2.1: the first of the two that exists. */
	if (env && rlb_libc()->access(env, F_OK) != 0 &&
	    rlb_libc()->access(RLB_SYSTEM_CONFIG, F_OK) == 0)
		return RLB_SYSTEM_CONFIG;
	return env ? env : RLB_SYSTEM_CONFIG;
}

const char *rlb_config_app_name(void)
{
	const char *app = rlb_env(RLB_ENV_APP);

	return app ? app : program_invocation_short_name;
}

void rlb_config_source_from_env(struct rlb_config_source *src)
{
	memset(src, 0, sizeof(*src));
	src->path = rlb_config_path();
	src->app = rlb_config_app_name();
	src->env_policy = rlb_env(RLB_ENV_LOAD_BALANCING);
	src->env_hostname = rlb_env(RLB_ENV_HOSTNAME);
	src->env_failover = rlb_env(RLB_ENV_CONNECT_FAILOVER);
	src->env_state_dir = rlb_env(RLB_ENV_STATE_DIR);
	src->env_log_level = rlb_env(RLB_ENV_LOG_LEVEL);
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
	char *app_path = NULL, *refused = NULL;
	int saved = errno;
	int rc;

	rc = read_file(&p, path, &m, &files.stamps[0], NULL);
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
			read_file(&p, app_path, &a, &files.stamps[1], &refused);
		}
	}
	rc = finish(&p, &m, &a, src, &files, out, broken);
	/*
	 * A refused app file is skipped, not an error: whoever can put a
	 * file in apps.d must not be able to switch the main config off
	 * either. It is said once per load, and a load happens once per
	 * change of the files.
	 */
	if (refused && rc == 0)
		rlb_log(RLB_LOG_ERROR, "%s", refused);
	else if (refused && diag)
		rlb_diag_add(diag, "%s", refused);
	free(refused);
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
	char *why = malloc(RLB_WHY_MAX);

	if (why) {
		text = text ? text : "";
		parse_file_text(&p, text, strlen(text), p.file, &m, why);
		free(why);
	} else {
		p.nomem = true;
	}
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
		bool exists = rlb_libc()->stat(s->path, &st) == 0;

		if (exists != s->exists)
			changed = true;
		else if (exists)
			changed = st.st_dev != s->dev || st.st_ino != s->ino ||
				  st.st_size != s->size ||
				  st.st_mtim.tv_sec != s->mtime.tv_sec ||
				  st.st_mtim.tv_nsec != s->mtime.tv_nsec ||
				  st.st_ctim.tv_sec != s->ctime.tv_sec ||
				  st.st_ctim.tv_nsec != s->ctime.tv_nsec;
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
