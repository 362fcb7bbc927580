/* health_dir.c - the state directory and its trust checks, state files
 * (names, read, write, set aside) and remove-state (design.md §5.8,
 * §12.1, §12.10). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/health_internal.h"

/* Hashes of the messages rlb_dir_log_once() has logged (0: free entry). */
static _Atomic uint64_t logged[64];

void rlb_dir_log_once(enum rlb_log_level level, const char *fmt, ...)
{
	char msg[900];
	uint64_t hash;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hash = rlb_hash64(msg, strlen(msg), 0);
	for (size_t i = 0; i < sizeof(logged) / sizeof(logged[0]); i++) {
		uint64_t cur = atomic_load(&logged[i]);

		if (cur == 0 &&
		    atomic_compare_exchange_strong(&logged[i], &cur, hash))
			break;
		if (cur == hash) {
			level = RLB_LOG_DEBUG;
			break;
		}
	}
	rlb_log(level, "%s", msg);
}

const char *rlb_dir_owner_problem(const struct stat *st, char *why,
				  size_t whylen)
{
	uid_t me = rlb_libc()->geteuid();

	if (st->st_uid != me) {
		snprintf(why, whylen, "owned by uid %lu, not %lu",
			 (unsigned long)st->st_uid, (unsigned long)me);
		return why;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, whylen, "mode %04o is writable by others",
			 (unsigned)(st->st_mode & 07777));
		return why;
	}
	return NULL;
}

int rlb_dir_trusted(int fd, struct stat *st, char *why, size_t whylen)
{
	if (rlb_libc()->fstat(fd, st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	return rlb_dir_owner_problem(st, why, whylen) ? -1 : 0;
}

uint64_t rlb_dir_ns(const char *kind)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
	if (rlb_libc()->stat(path, &st) != 0)
		return 0;
	return (uint64_t)st.st_ino;
}

/* mkdir 0700; 1 if created, 0 if it existed, -1/errno otherwise. */
static int make_dir(const char *path)
{
	if (rlb_libc()->mkdir(path, 0700) == 0) {
		/* The umask may have taken bits we need. */
		rlb_libc()->chmod(path, 0700);
		return 1;
	}
	return errno == EEXIST ? 0 : -1;
}

/* mkdir -p with mode 0700; returns as make_dir() for the last one. */
static int make_dirs(const char *dir)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		/* Failures show up when the last one is made. */
		make_dir(path);
		*p = '/';
	}
	return make_dir(path);
}

bool rlb_dir_paths(const struct rlb_config *cfg, char *buf, size_t len,
		   char *fb, size_t fblen)
{
	const char *xdg = rlb_env(RLB_ENV_XDG_RUNTIME_DIR);
	const char *home = rlb_env(RLB_ENV_HOME);
	int n;

	fb[0] = '\0';
	if (cfg && cfg->state_dir && cfg->state_dir[0])
		n = snprintf(buf, len, "%s", cfg->state_dir);
	else if (xdg && xdg[0] == '/') /* XDG: relative paths are invalid */
		n = snprintf(buf, len, "%s/replicalb", xdg);
	else {
		n = snprintf(buf, len, "/tmp/replicalb-%lu",
			     (unsigned long)rlb_libc()->geteuid());
		if (home && home[0] == '/' &&
		    (size_t)snprintf(fb, fblen, "%s/.cache/replicalb", home) >=
			    fblen)
			fb[0] = '\0';
	}
	return n >= 0 && (size_t)n < len;
}

bool rlb_dir_usable(const char *dir)
{
	char why[160];
	struct stat st;

	if (rlb_libc()->lstat(dir, &st) != 0)
		return errno == ENOENT;
	return S_ISDIR(st.st_mode) &&
	       !rlb_dir_owner_problem(&st, why, sizeof(why));
}

const char *rlb_health_state_dir(const struct rlb_config *cfg, char *buf,
				 size_t len)
{
	char fb[PATH_MAX];
	int saved = errno;

	if (rlb_dir_paths(cfg, buf, len, fb, sizeof(fb)) && fb[0] &&
	    !rlb_dir_usable(buf))
		snprintf(buf, len, "%s", fb);
	errno = saved;
	return buf;
}

int rlb_dir_open(const char *dir, char *why, size_t whylen)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int created = 0;
	struct stat st;
	int fd;

	fd = rlb_libc()->open(dir, flags, 0);
	if (fd < 0 && errno == ENOENT) {
		created = make_dirs(dir);
		fd = rlb_libc()->open(dir, flags, 0);
	}
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			snprintf(why, whylen, "not a directory or a symlink");
		else
			snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	if (created == 1)
		rlb_libc()->fchmod(fd, 0700);
	if (rlb_libc()->fstat(fd, &st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		goto out_close;
	}
	if (rlb_dir_owner_problem(&st, why, whylen))
		goto out_close;
	return fd;

out_close:
	rlb_libc()->close(fd);
	return -1;
}

/*
 * The default directory dflt is not usable (why), typically because
 * another user made it first, and fb (open as dirfd) is used instead. Say
 * so once per squat, not at every program start: the first process to
 * see it leaves a note in fb, named after the squatting entry.
 */
static void fallback_notice(int dirfd, const char *dflt, const char *why,
			    const char *fb)
{
	enum rlb_log_level level = RLB_LOG_WARNING;
	struct stat st = {0};
	char note[64];
	int fd;

	rlb_libc()->lstat(dflt, &st);
	snprintf(note, sizeof(note), ".squatted-%llx-%llx",
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	fd = rlb_libc()->openat(
		dirfd, note,
		O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		rlb_libc()->close(fd);
	else if (errno == EEXIST)
		level = RLB_LOG_INFO;
	rlb_log(level, "state directory %s not used (%s): using %s instead",
		dflt, why, fb);
}

int rlb_dir_resolve(const struct health_dirs *d, char *dir, size_t len,
		    bool quiet)
{
	char why[160], why2[160];
	const char *fb = d->fb;
	int fd = -1;

	snprintf(dir, len, "%s", d->want);
	if (!d->ok)
		snprintf(why, sizeof(why), "path too long");
	else
		fd = rlb_dir_open(dir, why, sizeof(why));
	if (fd >= 0)
		return fd;
	if (fb[0])
		fd = rlb_dir_open(fb, why2, sizeof(why2));
	if (fd >= 0) {
		if (!quiet)
			fallback_notice(fd, dir, why, fb);
		snprintf(dir, len, "%s", fb);
		return fd;
	}
	if (quiet)
		return -1;
	if (fb[0])
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state directory %s not used (%s), nor %s (%s): "
			"health state is private to this process",
			dir, why, fb, why2);
	else
		rlb_dir_log_once(RLB_LOG_WARNING,
				 "state directory %s not used (%s): "
				 "health state is private to this process",
				 dir, why);
	return -1;
}

void rlb_dir_file_name(const char *name, char *out, size_t outlen)
{
	size_t len = strlen(name);
	size_t keep = len > HEALTH_STEM_MAX ? HEALTH_STEM_MAX - 17 : len;
	size_t i;

	for (i = 0; i < keep && i + 1 < outlen; i++) {
		char ch = name[i];
		bool ok = (ch >= 'a' && ch <= 'z') ||
			  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
			  ch == '-';

		out[i] = ok ? ch : '_';
	}
	if (keep < len)
		snprintf(out + i, outlen - i, "-%016llx.state",
			 (unsigned long long)rlb_hash64(name, len, 0));
	else
		snprintf(out + i, outlen - i, ".state");
}

/* ------------------------------------------------------------------ */
/* Name files (design.md §12.1) */

/*
 * Parse the text of a name file into *nm, or -1 with the reason in why.
 * Exactly one line of NAME_FORMAT, NAME_FORMAT_V1 or NAME_FORMAT_MEMFD,
 * nothing else: the text printed again from what was parsed must be the
 * same (no signs, spaces or short numbers).
 */
static int name_parse(const char *text, size_t len, struct health_name *nm,
		      char *why, size_t whylen)
{
	char buf[NAME_MAX_LEN + 1], again[NAME_MAX_LEN + 1] = "";
	unsigned long long tok, tag = 0, ino = 0;
	int n = -1, v = -1, pid = 0, fd = -1;

	if (len == 0 || len > NAME_MAX_LEN || memchr(text, '\0', len)) {
		snprintf(why, whylen, "%s", len ? "not a name file" : "empty");
		return -1;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	*nm = (struct health_name){.kind = STORE_SHM, .fd = -1};
	if (sscanf(buf, "replicalb-state 2 shm %d %16llx %16llx%n", &v, &tok,
		   &tag, &n) == 3 &&
	    n >= 0 && v >= 0 && tag) {
		snprintf(again, sizeof(again), NAME_FORMAT, v, tok, tag);
		goto out_check;
	}
	n = -1;
	tag = 0;
	if (sscanf(buf, "replicalb-state 1 shm %d %16llx%n", &v, &tok, &n) ==
		    2 &&
	    n >= 0 && v >= 0) {
		snprintf(again, sizeof(again), NAME_FORMAT_V1, v, tok);
		goto out_check;
	}
	n = -1;
	v = -1;
	if (sscanf(buf, "replicalb-state 3 memfd %d %d %20llu %16llx %16llx%n",
		   &pid, &fd, &ino, &tok, &tag, &n) == 5 &&
	    n >= 0 && pid > 0 && fd >= 0 && tag) {
		nm->kind = STORE_MEMFD;
		snprintf(again, sizeof(again), NAME_FORMAT_MEMFD, pid, fd, ino,
			 tok, tag);
	}
out_check:
	if (!again[0] || strcmp(again, buf) != 0) {
		snprintf(why, whylen, "not a name file");
		return -1;
	}
	nm->id = v;
	nm->pid = (pid_t)pid;
	nm->fd = fd;
	nm->ino = ino;
	nm->token = tok;
	nm->ns = tag;
	return 0;
}

/* boot_id: it tells the hosts that share a directory over NFS apart. */
static uint64_t boot_hash(void)
{
	static _Atomic uint64_t cached;
	uint64_t h = atomic_load(&cached);
	char text[64];
	ssize_t len;
	int fd;

	if (h)
		return h;
	fd = rlb_libc()->open("/proc/sys/kernel/random/boot_id",
			      O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	len = rlb_libc()->read(fd, text, sizeof(text));
	rlb_libc()->close(fd);
	h = rlb_hash64(text, len > 0 ? (size_t)len : 0, 0) | 1;
	atomic_store(&cached, h);
	return h;
}

uint64_t rlb_dir_ipc_tag(void)
{
	uint64_t words[2] = {boot_hash(), rlb_dir_ns("ipc")};

	if (!words[1])
		return 0;
	/* Never 0, which is a line of version 1's. */
	return rlb_hash64(words, sizeof(words), HEALTH_CHECK_SEED) | 1;
}

void rlb_dir_ns_file_name(const char *fname, uint64_t tag, char *out,
			  size_t outlen)
{
	snprintf(out, outlen, "%s.ipc-%016llx", fname, (unsigned long long)tag);
}

int rlb_dir_name_read(int dirfd, const char *fname, struct health_name *nm,
		      bool *v2, struct stat *st, char *why, size_t whylen)
{
	const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	char text[NAME_MAX_LEN + 1];
	ssize_t len;
	int fd, rc = -1;

	*v2 = false;
	if (rlb_libc()->fstatat(dirfd, fname, st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	fd = rlb_libc()->openat(dirfd, fname, flags, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(why, whylen, "%s",
			 errno == ELOOP ? "it is a symlink" : strerror(errno));
		return -1;
	}
	if (rlb_libc()->fstat(fd, st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(why, whylen, "not a regular file");
		goto out_close;
	}
	if (rlb_dir_owner_problem(st, why, whylen))
		goto out_close;
	*v2 = st->st_size == V2_FILE_SIZE;
	len = rlb_libc()->pread(fd, text, sizeof(text), 0);
	if (len < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		goto out_close;
	}
	rc = name_parse(text, (size_t)len, nm, why, whylen);
out_close:
	rlb_libc()->close(fd);
	return rc;
}

int rlb_dir_name_write(int dirfd, const char *fname,
		       const struct health_name *nm, bool replace)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	char tmp[NAME_MAX + 64], text[NAME_MAX_LEN + 1];
	uint64_t tag = rlb_dir_ipc_tag();
	int fd, len, rc, err;

	snprintf(tmp, sizeof(tmp), "%s.tmp-%ld-%08x", fname,
		 (long)rlb_libc()->getpid(), rlb_random_u32());
	/* Without /proc, the line of version 1: no namespace to name (and
	 * no memfd, which is reached through /proc). */
	if (nm->kind == STORE_MEMFD)
		len = snprintf(
			text, sizeof(text), NAME_FORMAT_MEMFD, (int)nm->pid,
			nm->fd, (unsigned long long)nm->ino,
			(unsigned long long)nm->token, (unsigned long long)tag);
	else if (tag)
		len = snprintf(text, sizeof(text), NAME_FORMAT, nm->id,
			       (unsigned long long)nm->token,
			       (unsigned long long)tag);
	else
		len = snprintf(text, sizeof(text), NAME_FORMAT_V1, nm->id,
			       (unsigned long long)nm->token);
	if (nm->kind == STORE_MEMFD && !tag) {
		errno = ENOENT;
		return -1;
	}
	fd = rlb_libc()->openat(dirfd, tmp, flags, 0600);
	if (fd < 0)
		return -1;
	rlb_libc()->fchmod(fd, 0600);
	rc = rlb_libc()->write(fd, text, (size_t)len) == len ? 0 : -1;
	err = errno;
	rlb_libc()->close(fd);
	if (rc == 0)
		rc = replace ? rlb_libc()->renameat(dirfd, tmp, dirfd, fname)
			     : rlb_libc()->linkat(dirfd, tmp, dirfd, fname, 0);
	if (rc != 0)
		err = errno;
	if (rc != 0 || !replace)
		rlb_libc()->unlinkat(dirfd, tmp, 0);
	errno = err;
	return rc;
}

void rlb_dir_set_aside(int dirfd, const char *dir, const char *fname,
		       const struct stat *st, bool v2, const char *why)
{
	char aside[NAME_MAX + 64];
	struct stat cur;

	if (rlb_libc()->fstatat(dirfd, fname, &cur, AT_SYMLINK_NOFOLLOW) != 0 ||
	    cur.st_dev != st->st_dev || cur.st_ino != st->st_ino)
		return;
	if (v2 && rlb_libc()->unlinkat(dirfd, fname, 0) == 0) {
		rlb_dir_log_once(
			RLB_LOG_INFO,
			"state file %s/%s of an older version removed: "
			"state is now kept in shared memory segments",
			dir, fname);
		return;
	}
	snprintf(aside, sizeof(aside), "%s.corrupt-%lld-%ld", fname,
		 (long long)rlb_now(), (long)rlb_libc()->getpid());
	if (rlb_libc()->renameat(dirfd, fname, dirfd, aside) != 0) {
		if (errno != ENOENT)
			rlb_dir_log_once(
				RLB_LOG_WARNING,
				"state file %s/%s is not valid (%s) and "
				"cannot be set aside: %s",
				dir, fname, why, strerror(errno));
		return;
	}
	rlb_log(RLB_LOG_WARNING,
		"state file %s/%s is not valid (%s): set aside as %s/%s and "
		"recreated",
		dir, fname, why, dir, aside);
}

/* ------------------------------------------------------------------ */
/* Removing state (replicalbctl remove-state, design.md §12.10) */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

/*
 * What follows "NAME.state" in entry name, past an IPC namespace's
 * ".ipc-TAG" (*ns_len its length): "" for a name file, ".corrupt-..." or
 * ".tmp-..." for the files made beside one, or NULL for anything else.
 * A cluster's name may hold ".state" too: the last one that fits counts.
 */
static const char *state_suffix(const char *name, size_t *ns_len)
{
	const char *found = NULL;

	for (const char *dot = strstr(name, ".state"); dot;
	     dot = strstr(dot + 1, ".state")) {
		const char *rest = dot + 6;
		size_t n = 0;

		if (strncmp(rest, ".ipc-", 5) == 0 &&
		    strspn(rest + 5, "0123456789abcdef") >= 16)
			n = 21;
		if (rest[n] == '\0' || strncmp(rest + n, ".corrupt-", 9) == 0 ||
		    strncmp(rest + n, ".tmp-", 5) == 0) {
			found = rest + n;
			*ns_len = n;
		}
	}
	return found;
}

bool rlb_dir_is_name_file(const char *name)
{
	size_t ns_len = 0;
	const char *rest = state_suffix(name, &ns_len);

	return rest && *rest == '\0';
}

/*
 * Whether entry name is a file this library leaves in a state directory;
 * *name_file when it is a name file, *base_len the length of the plain
 * NAME.state of its cluster.
 */
static bool is_state_entry(const char *name, bool *name_file, size_t *base_len)
{
	size_t ns_len = 0;
	const char *rest = state_suffix(name, &ns_len);

	*name_file = rest && *rest == '\0';
	*base_len = rest ? (size_t)(rest - name) - ns_len : 0;
	return rest != NULL;
}

/*
 * Whether entry name is a side file of a cluster (NAME.members, or one
 * set aside or half-written beside it, design.md §15.6): then base (of
 * len bytes) is that cluster's NAME.state, as the keep list has it.
 */
static bool is_side_entry(const char *name, char *base, size_t len)
{
	static const char *const exts[] = {".members", ".saved"};
	const char *found = NULL;

	for (size_t e = 0; e < sizeof(exts) / sizeof(exts[0]); e++) {
		size_t elen = strlen(exts[e]);

		for (const char *p = strstr(name, exts[e]); p;
		     p = strstr(p + 1, exts[e])) {
			const char *rest = p + elen;

			/* Saved counts of an IPC namespace's own state. */
			if (strncmp(rest, ".ipc-", 5) == 0 &&
			    strspn(rest + 5, "0123456789abcdef") >= 16)
				rest += 21;
			if (*rest == '\0' ||
			    strncmp(rest, ".corrupt-", 9) == 0 ||
			    strncmp(rest, ".tmp-", 5) == 0)
				found = p;
		}
	}
	if (!found || found == name)
		return false;
	snprintf(base, len, "%.*s.state", (int)(found - name), name);
	return true;
}

/*
 * Remove segment id if it is ours, and say so on out. True if removed.
 */
static bool remove_segment(int id, const char *why, FILE *out)
{
	struct shmid_ds ds;

	uid_t me = rlb_libc()->geteuid();

	if (rlb_libc()->shmctl(id, IPC_STAT, &ds) != 0 ||
	    ds.shm_perm.uid != me || ds.shm_perm.cuid != me ||
	    rlb_libc()->shmctl(id, IPC_RMID, NULL) != 0)
		return false;
	if (out)
		fprintf(out, "removed segment %d (%s)\n", id, why);
	return true;
}

int rlb_health_remove_state(const struct rlb_config *cfg, bool all, FILE *out)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	size_t nkeep = cfg ? cfg->nclusters : 0, nnamed = 0, cap = 0;
	char dir[PATH_MAX], why[160];
	char **keep = NULL;
	int *named = NULL;
	struct dirent *de;
	int dirfd, removed = 0;
	struct stat st;
	DIR *d;

	rlb_health_state_dir(cfg, dir, sizeof(dir));
	dirfd = rlb_libc()->open(dir, flags, 0);
	if (dirfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (rlb_dir_trusted(dirfd, &st, why, sizeof(why)) != 0) {
		rlb_log(RLB_LOG_ERROR, "state directory %s not used (%s)", dir,
			why);
		rlb_libc()->close(dirfd);
		errno = EPERM;
		return -1;
	}
	d = rlb_libc()->fdopendir(dirfd);
	if (!d) {
		rlb_libc()->close(dirfd);
		return -1;
	}
	keep = calloc(nkeep ? nkeep : 1, sizeof(*keep));
	for (size_t i = 0; keep && i < nkeep; i++) {
		keep[i] = malloc(NAME_MAX + 1);
		if (keep[i])
			rlb_dir_file_name(cfg->clusters[i].name, keep[i],
					  NAME_MAX + 1);
		else
			nkeep = i;
	}
	if (!keep)
		nkeep = 0;
	if (nkeep)
		qsort(keep, nkeep, sizeof(*keep), cmp_str);
	while ((de = rlb_libc()->readdir(d))) {
		const char *name = de->d_name;
		struct health_name nm;
		struct stat nst;
		char base[NAME_MAX + 1];
		const char *basep = base;
		bool name_file, v2;
		size_t base_len;
		int rc;

		if (!is_state_entry(name, &name_file, &base_len)) {
			/* A side file goes with its cluster. */
			if (!is_side_entry(name, base, sizeof(base)) ||
			    (!all && keep &&
			     bsearch(&basep, keep, nkeep, sizeof(*keep),
				     cmp_str)))
				continue;
			if (rlb_libc()->unlinkat(dirfd, name, 0) == 0) {
				removed++;
				if (out)
					fprintf(out, "removed %s/%s\n", dir,
						name);
			}
			continue;
		}
		/* An IPC namespace's own file is its cluster's too. */
		snprintf(base, sizeof(base), "%.*s", (int)base_len, name);
		rc = rlb_dir_name_read(dirfd, name, &nm, &v2, &nst, why,
				       sizeof(why));
		/* A memfd is no system resource: it goes with its holders. */
		if (rc == 0 && nm.kind != STORE_SHM)
			rc = 1;
		if (name_file && !all && keep &&
		    bsearch(&basep, keep, nkeep, sizeof(*keep), cmp_str)) {
			if (rc == 0 && nnamed == cap) {
				int *more = realloc(
					named, (cap * 2 + 16) * sizeof(*more));

				if (more) {
					named = more;
					cap = cap * 2 + 16;
				}
			}
			if (rc == 0 && nnamed < cap)
				named[nnamed++] = nm.id;
			continue;
		}
		if (rc == 0 && name_file)
			removed += remove_segment(nm.id, name, out);
		if (rlb_libc()->unlinkat(dirfd, name, 0) == 0) {
			removed++;
			if (out)
				fprintf(out, "removed %s/%s\n", dir, name);
		}
	}
	if (nnamed)
		qsort(named, nnamed, sizeof(*named), cmp_int);
	/* Segments of this directory that no name file names: left by a
	 * process that died between making one and naming it, or that
	 * moved away and exited before removing it. */
	removed += rlb_gc_sweep(&(struct gc_here){(uint64_t)st.st_dev,
						  (uint64_t)st.st_ino, dir,
						  named, nnamed},
				0, out);
	for (size_t i = 0; i < nkeep; i++)
		free(keep[i]);
	free(keep);
	free(named);
	rlb_libc()->closedir(d);
	return removed;
}
