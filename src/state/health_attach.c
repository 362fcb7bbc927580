/* health_attach.c - a cluster's state attached at first use (read-write:
 * create and link; read-only for a look) and followed while attached when
 * it is damaged, replaced or moved (design.md §12.4, §12.9). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>

#include "state/health_internal.h"

static void dirs_put(struct health_dirs *d)
{
	if (d && atomic_fetch_sub(&d->refs, 1) == 1)
		free(d);
}

/* ------------------------------------------------------------------ */
/* Attach (design.md §12.4) */

/*
 * A memfd for c instead of the segment that the kernel's limits refused
 * (why says how; design.md §12.12), with one warning for all clusters.
 * NULL when none can be had either, the reasons in why.
 */
static struct store *memfd_instead(const struct rlb_cluster *c, uint32_t nslots,
				   const struct health_home *home, char *why,
				   size_t whylen)
{
	char refused[200], why2[160];
	struct store *s;

	snprintf(refused, sizeof(refused), "%s", why);
	s = rlb_memfd_create(c, nslots, home, why2, sizeof(why2));
	if (!s) {
		snprintf(why, whylen, "%s; %s", refused, why2);
		return NULL;
	}
	/* Without the cluster: one warning for many clusters. */
	rlb_dir_log_once(RLB_LOG_WARNING,
			 "%s: health of this and other clusters is kept in "
			 "memfds that the processes using them hold, shared "
			 "through /proc",
			 refused);
	return s;
}

/*
 * A new segment for c in the directory dirfd (home), as
 * rlb_segment_create() makes one. Segments that no state file can name
 * any more are reclaimed first, at most once a minute, and again when a
 * kernel limit refused the segment (design.md §12.11); when the limit
 * still refuses it (another user may have filled it), a memfd (§12.12).
 */
static struct store *create_reclaiming(const struct rlb_cluster *c, int dirfd,
				       const struct health_home *home,
				       const char *fname, bool *limit,
				       char *why, size_t whylen)
{
	uint32_t nslots = rlb_table_slots(c->nreplicas);
	struct store *s;

	rlb_gc_at_create(dirfd, home, false);
	s = rlb_segment_create(c, nslots, home, limit, why, whylen);
	if (!s && *limit && rlb_gc_at_create(dirfd, home, true) > 0)
		s = rlb_segment_create(c, nslots, home, limit, why, whylen);
	if (!s && *limit)
		s = memfd_instead(c, nslots, home, why, whylen);
	if (!s)
		return NULL;
	*limit = false;
	/* Counts a memfd's last holders saved (design.md §12.12). */
	rlb_saved_seed(s, c, dirfd, home->path, fname, false);
	return s;
}

/*
 * What nm names, attached read-write for c. *gone when it is a memfd
 * whose holder is gone; *limit when this process may hold no more.
 */
static struct store *attach_one(const struct rlb_cluster *c,
				const struct health_name *nm, bool *gone,
				bool *limit, char *why, size_t whylen)
{
	*gone = false;
	if (nm->kind == STORE_SHM)
		return rlb_segment_attach(c, nm->id, nm->token, false, false,
					  why, whylen);
	if (rlb_memfd_full()) {
		*limit = true;
		snprintf(why, whylen,
			 "this process holds %d memfds of state already",
			 HEALTH_MAX_MEMFDS);
		return NULL;
	}
	return rlb_memfd_attach(c, nm, false, gone, why, whylen);
}

/* Whether the name file fname of dirfd still is the file st described. */
static bool same_file(int dirfd, const char *fname, const struct stat *st)
{
	struct stat cur;

	return rlb_libc()->fstatat(dirfd, fname, &cur, AT_SYMLINK_NOFOLLOW) ==
		       0 &&
	       cur.st_dev == st->st_dev && cur.st_ino == st->st_ino;
}

/*
 * The segment (or memfd) that the name file fname of dir (dirfd) names,
 * attached for c; when there is none, mine, or else a new segment, is
 * named by creating the name file with link(): of processes that start
 * together, the first link wins and the others attach its segment and
 * remove their own. A name file that is not valid, or names a segment
 * that fails the checks, is set aside first; so is one that names a
 * segment of another IPC namespace, unless foreign is given: then
 * *foreign is set and NULL returned, the file left alone. A file that
 * names a memfd whose holder is gone (design.md §12.12) is no fault: it
 * is renamed to name mine (or a new one), this process its holder now.
 * Returns mine when the name file names it; NULL with the reason in why
 * (*limit: the kernel's segment limits, and no memfd either).
 * Successors are not followed here.
 */
static struct store *attach_named(const struct rlb_cluster *c, int dirfd,
				  const char *dir, const char *fname,
				  struct store *mine, bool *foreign,
				  bool *limit, char *why, size_t whylen)
{
	struct health_home home = {c->name_hash, 0, 0, dir, rlb_dir_ns("mnt")};
	uint64_t tag = rlb_dir_ipc_tag();
	struct stat dst;
	int dir_err = 0;

	*limit = false;
	if (rlb_libc()->fstat(dirfd, &dst) == 0) {
		home.dir_dev = (uint64_t)dst.st_dev;
		home.dir_ino = (uint64_t)dst.st_ino;
	} else {
		dir_err = errno;
	}
	for (int tries = 0; tries <= HEALTH_TRIES; tries++) {
		struct health_name nm;
		struct store *s;
		struct stat st;
		bool v2, gone = false;
		int rc, err;

		rc = rlb_dir_name_read(dirfd, fname, &nm, &v2, &st, why,
				       whylen);
		/* Its id means nothing here: not ours to judge or replace. */
		if (rc == 0 && nm.ns && tag && nm.ns != tag) {
			if (foreign) {
				*foreign = true;
				return NULL;
			}
			snprintf(why, whylen,
				 "it names a segment of another IPC namespace");
			rc = -1;
		}
		if (rc == 0 && mine && rlb_segment_named(mine, &nm)) {
			if (mine->kind != STORE_MEMFD ||
			    rlb_memfd_holder_alive(&nm))
				return mine;
			gone = true; /* named through a holder that is gone */
		} else if (rc == 0) {
			s = attach_one(c, &nm, &gone, limit, why, whylen);
			if (s || *limit)
				return s;
		}
		if (rc < 0 || (rc == 0 && !gone)) {
			if (tries == HEALTH_TRIES)
				break;
			rlb_dir_set_aside(dirfd, dir, fname, &st, v2, why);
			continue;
		}
		s = mine;
		/* A segment names its directory, for remove-state to find
		 * it should its name file go: none without one. */
		if (!s && dir_err) {
			snprintf(why, whylen, "cannot stat its directory: %s",
				 strerror(dir_err));
			return NULL;
		}
		if (!s)
			s = create_reclaiming(c, dirfd, &home, fname, limit,
					      why, whylen);
		if (!s)
			return NULL;
		/* A holder gone: replaced, unless another process did so
		 * meanwhile (then its file is read again). */
		if (gone && !same_file(dirfd, fname, &st)) {
			if (s != mine)
				rlb_segment_destroy(s);
			continue;
		}
		rlb_segment_name(s, &nm);
		if (rlb_dir_name_write(dirfd, fname, &nm, gone) == 0) {
			/* A segment persists by itself. */
			if (s != mine && s->kind == STORE_SHM)
				rlb_saved_remove(dirfd, fname);
			return s;
		}
		err = errno;
		if (s != mine)
			rlb_segment_destroy(s);
		if (err != EEXIST) {
			snprintf(why, whylen, "cannot write it: %s",
				 strerror(err));
			return NULL;
		}
		/* Another process named its segment first: use that one. */
	}
	snprintf(why, whylen, "it keeps being corrupted or replaced");
	return NULL;
}

/*
 * attach_named() for c's state in dir (dirfd) through the name file of
 * this IPC namespace (design.md §5.8): NAME.state, unless this namespace
 * keeps its own NAME.state.ipc-TAG beside it already, or NAME.state
 * names a segment of another IPC namespace (a container or a host that
 * shares the directory); then its own, made with one warning. fname
 * (NAME_MAX + 1 bytes) gets the name file used.
 */
static struct store *attach_state(const struct rlb_cluster *c, int dirfd,
				  const char *dir, char *fname,
				  struct store *mine, bool *limit, char *why,
				  size_t whylen)
{
	uint64_t tag = rlb_dir_ipc_tag();
	char own[NAME_MAX + 1];
	bool foreign = false;
	struct store *s;
	struct stat st;

	rlb_dir_file_name(c->name ? c->name : "", fname, NAME_MAX + 1);
	if (!tag)
		return attach_named(c, dirfd, dir, fname, mine, NULL, limit,
				    why, whylen);
	rlb_dir_ns_file_name(fname, tag, own, sizeof(own));
	if (rlb_libc()->fstatat(dirfd, own, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		snprintf(fname, NAME_MAX + 1, "%s", own);
		return attach_named(c, dirfd, dir, fname, mine, NULL, limit,
				    why, whylen);
	}
	s = attach_named(c, dirfd, dir, fname, mine, &foreign, limit, why,
			 whylen);
	if (s || !foreign)
		return s;
	/* Without the cluster: one warning for all of the directory's. */
	rlb_dir_log_once(
		RLB_LOG_WARNING,
		"state files in %s name segments of another IPC namespace (a "
		"container or host that shares the directory): this namespace "
		"keeps its own state beside them, as NAME.state.ipc-%016llx",
		dir, (unsigned long long)tag);
	snprintf(fname, NAME_MAX + 1, "%s", own);
	return attach_named(c, dirfd, dir, fname, mine, NULL, limit, why,
			    whylen);
}

/* Label of a store: the name file's path, with suffix. */
static void store_label(struct store *s, const char *dir, const char *fname,
			const char *suffix)
{
	if (asprintf(&s->label, "%s/%s%s", dir, fname, suffix) < 0)
		s->label = NULL;
}

/* Log that c's state is private, and why (once per process and text). */
static void log_private(const struct rlb_cluster *c, const char *path,
			const char *why, bool limit)
{
	if (limit)
		/* Without the cluster: one warning for many clusters. */
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"%s: health of this and other clusters is private "
			"to this process",
			why);
	else
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state file %s not used (%s): health of cluster %s "
			"is private to this process",
			path, why, c->name);
}

/* First use, read-write: the named segment, else private memory. */
static struct store *attach_rw(struct rlb_health *h,
			       const struct rlb_cluster *c)
{
	char dir[PATH_MAX], fname[NAME_MAX + 1], why[200];
	struct store *s = NULL, *tip;
	bool limit = false;
	int dirfd = -1;

	rlb_dir_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if (h->dirs)
		dirfd = rlb_dir_resolve(h->dirs, dir, sizeof(dir), false);
	if (dirfd < 0)
		return rlb_segment_private(c, false);
	if (strlen(dir) + strlen(fname) + 2 > PATH_MAX) {
		snprintf(why, sizeof(why), "path too long");
		goto out_private;
	}
	s = attach_state(c, dirfd, dir, fname, NULL, &limit, why, sizeof(why));
	if (!s)
		goto out_private;
	tip = rlb_segment_follow(c, s);
	if (tip != s)
		rlb_segment_free(s);
	s = rlb_segment_settle(c, tip, dirfd, dir, fname, h->prune);
	if (s != tip)
		rlb_segment_free(tip);
	s->dir = strdup(dir);
	s->fname = strdup(fname);
	store_label(s, dir, fname, "");
	rlb_libc()->close(dirfd);
	return s;

out_private:
	log_private(c, dir, why, limit);
	rlb_libc()->close(dirfd);
	return rlb_segment_private(c, false);
}

/*
 * Read, for a look, the name file of this IPC namespace (as attach_state()
 * chooses it) in dirfd: fname (NAME_MAX + 1 bytes) is the cluster's
 * NAME.state, and becomes the file read. As rlb_dir_name_read().
 */
static int look_name(int dirfd, char *fname, struct health_name *nm,
		     struct stat *st, char *why, size_t whylen)
{
	uint64_t tag = rlb_dir_ipc_tag();
	char own[NAME_MAX + 1];
	bool v2;
	int rc;

	if (tag) {
		rlb_dir_ns_file_name(fname, tag, own, sizeof(own));
		if (rlb_libc()->fstatat(dirfd, own, st, AT_SYMLINK_NOFOLLOW) ==
		    0)
			snprintf(fname, NAME_MAX + 1, "%s", own);
	}
	rc = rlb_dir_name_read(dirfd, fname, nm, &v2, st, why, whylen);
	if (rc != 0 || !nm->ns || !tag || nm->ns == tag)
		return rc;
	/* Another namespace's: this one has no state of its own yet. */
	snprintf(fname, NAME_MAX + 1, "%s", own);
	return 1;
}

/*
 * First use, read-only (replicalbctl status, resolve --peek): the named
 * segment attached SHM_RDONLY, or zeroes; nothing is created or changed,
 * no directory either.
 */
static struct store *attach_look(struct rlb_health *h,
				 const struct rlb_cluster *c)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char dir[PATH_MAX], fname[NAME_MAX + 1], why[200];
	const char *suffix = " (private)";
	struct health_name nm;
	struct store *s = NULL;
	struct stat st;
	int dirfd, rc;
	bool gone;

	rlb_dir_file_name(c->name ? c->name : "", fname, sizeof(fname));
	if (!h->dirs)
		goto out_zeroes;
	snprintf(dir, sizeof(dir), "%s", h->dirs->want);
	if (h->dirs->fb[0] && !rlb_dir_usable(dir))
		snprintf(dir, sizeof(dir), "%s", h->dirs->fb);
	dirfd = rlb_libc()->open(dir, flags, 0);
	if (dirfd < 0) {
		if (errno == ENOENT) {
			suffix = " (absent)";
			goto out_zeroes;
		}
		snprintf(why, sizeof(why), "%s",
			 errno == ELOOP || errno == ENOTDIR
				 ? "not a directory or a symlink"
				 : strerror(errno));
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state directory %s not read (%s): no state shown", dir,
			why);
		goto out_zeroes;
	}
	if (rlb_dir_trusted(dirfd, &st, why, sizeof(why)) != 0) {
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state directory %s not read (%s): no state shown", dir,
			why);
		rlb_libc()->close(dirfd);
		goto out_zeroes;
	}
	rc = look_name(dirfd, fname, &nm, &st, why, sizeof(why));
	if (rc == 1) {
		rlb_libc()->close(dirfd);
		suffix = " (absent)";
		goto out_zeroes;
	}
	if (rc == 0 && nm.kind == STORE_MEMFD) {
		s = rlb_memfd_attach(c, &nm, true, &gone, why, sizeof(why));
		/* Its holders gone: what they saved (design.md §12.12). */
		if (!s && gone) {
			s = rlb_segment_private(c, true);
			if (s &&
			    rlb_saved_seed(s, c, dirfd, dir, fname, true)) {
				rlb_libc()->close(dirfd);
				store_label(s, dir, fname, " (saved)");
				return s;
			}
			rlb_segment_free(s);
			s = NULL;
		}
	} else if (rc == 0) {
		s = rlb_segment_attach(c, nm.id, nm.token, false, true, why,
				       sizeof(why));
	}
	rlb_libc()->close(dirfd);
	if (!s) {
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state file %s/%s not read (%s): cluster %s shows no "
			"state",
			dir, fname, why, c->name ? c->name : "");
		goto out_zeroes;
	}
	s = rlb_segment_follow(c, s);
	store_label(s, dir, fname, "");
	return s;

out_zeroes:
	s = rlb_segment_private(c, true);
	if (s && h->dirs && strlen(dir) + strlen(fname) + 2 <= PATH_MAX)
		store_label(s, dir, fname, suffix);
	return s;
}

/*
 * c's store, attached at this first use if it is not yet (design.md
 * §12.4). Threads that use a cluster first at the same time each attach
 * (the name file makes them agree on the segment); one store is
 * published, the others are dropped. NULL only when not even private
 * memory could be had. Keeps errno.
 */
static struct store *store_of(const struct rlb_cluster *c)
{
	struct rlb_health *h = c->health;
	struct store *s, *expected = NULL;
	int saved, cancel;

	if (!h)
		return NULL;
	s = atomic_load_explicit(&h->cur, memory_order_acquire);
	if (s ||
	    atomic_load_explicit(&h->mode, memory_order_relaxed) == HEALTH_NONE)
		return s;
	saved = errno;
	/* Files and segments opened here are closed here: no cancel. */
	cancel = rlb_cancel_off();
	s = h->use == RLB_STATE_LOOK ? attach_look(h, c) : attach_rw(h, c);
	rlb_cancel_restore(cancel);
	if (!s) {
		atomic_store(&h->mode, HEALTH_NONE);
	} else if (atomic_compare_exchange_strong(&h->cur, &expected, s)) {
		atomic_store(&h->follow_ms,
			     rlb_monotonic_ms() + HEALTH_FOLLOW_MS);
		atomic_store(&h->mode, rlb_store_named(s) ? HEALTH_SHARED
							  : HEALTH_PRIVATE);
	} else {
		rlb_segment_free(s);
		s = expected;
	}
	errno = saved;
	return s;
}

void rlb_health_attach_all(struct rlb_config *cfg, enum rlb_state_mode mode,
			   bool prune)
{
	struct health_dirs *dirs;
	int saved = errno;

	if (!cfg || cfg->nclusters == 0)
		return;
	dirs = calloc(1, sizeof(*dirs));
	if (dirs) {
		dirs->ok = rlb_dir_paths(cfg, dirs->want, sizeof(dirs->want),
					 dirs->fb, sizeof(dirs->fb));
		atomic_init(&dirs->refs, 1);
	}
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];
		struct rlb_health *h = calloc(1, sizeof(*h));

		rlb_health_detach(c->health);
		c->health = h;
		if (!h)
			continue;
		h->cluster = c;
		h->use = mode;
		/* A DNS cluster's members come and go between snapshots;
		 * one that returns finds its counts (design.md §15). */
		h->prune = prune && !c->srv && !c->dns;
		if (dirs) {
			atomic_fetch_add(&dirs->refs, 1);
			h->dirs = dirs;
		}
	}
	dirs_put(dirs);
	errno = saved;
}

void rlb_health_detach(struct rlb_health *h)
{
	if (!h)
		return;
	rlb_segment_free(atomic_load(&h->cur));
	while (h->retired) {
		struct store *next = h->retired->next;

		rlb_segment_free(h->retired);
		h->retired = next;
	}
	dirs_put(h->dirs);
	free(h);
}

/* Whether dir holds fname, or this IPC namespace's fname.ipc-TAG. */
static bool has_name_file(const char *dir, const char *fname)
{
	char path[PATH_MAX], ns[NAME_MAX + 1];
	struct stat st;
	uint64_t tag = rlb_dir_ipc_tag();

	if (!dir[0])
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir, fname);
	if (rlb_libc()->lstat(path, &st) == 0)
		return true;
	if (!tag)
		return false;
	rlb_dir_ns_file_name(fname, tag, ns, sizeof(ns));
	snprintf(path, sizeof(path), "%s/%s", dir, ns);
	return rlb_libc()->lstat(path, &st) == 0;
}

bool rlb_health_has_state(const struct rlb_cluster *c)
{
	struct rlb_health *h = c->health;
	char fname[NAME_MAX + 1];
	int saved = errno;
	bool has;

	if (!h || atomic_load_explicit(&h->cur, memory_order_acquire))
		return h != NULL;
	if (!h->dirs || !h->dirs->ok)
		return false;
	rlb_dir_file_name(c->name ? c->name : "", fname, sizeof(fname));
	has = has_name_file(h->dirs->want, fname) ||
	      has_name_file(h->dirs->fb, fname);
	errno = saved;
	return has;
}

const char *rlb_health_path(const struct rlb_health *h)
{
	struct store *s;

	if (!h)
		return "(private)";
	s = store_of(h->cluster);
	return s && s->label ? s->label : "(private)";
}

/* ------------------------------------------------------------------ */
/* Following the state while attached (design.md §12.9) */

/*
 * Take h's slow-path flag: false if another thread of this process has
 * it. A flag inherited through fork() from a thread that no longer
 * exists here is taken over: the store pointer it may have been about to
 * change is published atomically, so nothing is half done.
 */
static bool busy_enter(struct rlb_health *h)
{
	pid_t me = rlb_libc()->getpid(), cur = 0;

	if (atomic_compare_exchange_strong(&h->busy, &cur, me))
		return true;
	return cur != me && atomic_compare_exchange_strong(&h->busy, &cur, me);
}

static void busy_leave(struct rlb_health *h)
{
	atomic_store(&h->busy, 0);
}

/*
 * Under the busy flag: use n instead of s from now on. s stays mapped
 * (another thread may be using it) until the health is detached; what was
 * added to it until the switch is moved into n. False when this cluster
 * has moved too often already (n is freed; s stays in use).
 */
static bool switch_to(struct rlb_health *h, const struct rlb_cluster *c,
		      struct store *s, struct store *n)
{
	if (h->nretired >= HEALTH_MAX_RETIRED) {
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state of cluster %s was replaced too often: this "
			"process keeps its segment until the next config load",
			c->name);
		rlb_segment_free(n);
		return false;
	}
	atomic_store(&h->cur, n);
	s->next = h->retired;
	h->retired = s;
	h->nretired++;
	if (!s->readonly)
		rlb_table_move(s->map, s->nslots, n->map, n->nslots,
			       rlb_table_cap(c));
	return true;
}

/* The name file s is named by: its own, else c's NAME.state. */
static void store_fname(const struct rlb_cluster *c, const struct store *s,
			char *fname, size_t len)
{
	if (s->fname)
		snprintf(fname, len, "%s", s->fname);
	else
		rlb_dir_file_name(c->name ? c->name : "", fname, len);
}

/* Whether s is gone (why): a segment removed or given another owner or
 * mode, a memfd whose descriptor the program closed or replaced. */
static bool store_gone(const struct store *s, char *why, size_t whylen)
{
	struct shmid_ds ds;

	if (s->kind == STORE_MEMFD) {
		if (rlb_memfd_intact(s))
			return false;
		snprintf(why, whylen, "its memfd's descriptor was closed");
		return true;
	}
	if (rlb_libc()->shmctl(s->shmid, IPC_STAT, &ds) != 0) {
		snprintf(why, whylen, "segment %d removed", s->shmid);
		return true;
	}
	return rlb_segment_problem(&ds, why, whylen) != NULL;
}

/*
 * s, a memfd that the name file fname of dirfd names: once every
 * HEALTH_GC_MS, a segment is tried again (the other user's segments may
 * be gone), with s's T and counter, and the name file renamed to it; the
 * others follow it within a second, with their counts (design.md
 * §12.12). Returns the store to use: s, or the segment.
 */
static struct store *retry_segment(struct rlb_health *h,
				   const struct rlb_cluster *c, struct store *s,
				   int dirfd, const char *fname)
{
	struct health_home home = {c->name_hash, s->map->hdr.dir_dev,
				   s->map->hdr.dir_ino, s->dir,
				   rlb_dir_ns("mnt")};
	int64_t now = rlb_monotonic_ms();
	struct store *n;
	char why[200];
	bool limit;

	if (now < atomic_load(&h->shm_retry_ms))
		return s;
	atomic_store(&h->shm_retry_ms, now + HEALTH_GC_MS);
	n = rlb_segment_create(c, s->nslots, &home, &limit, why, sizeof(why));
	if (!n)
		return s;
	atomic_store(&n->map->hdr.decay_time,
		     atomic_load(&s->map->hdr.decay_time));
	atomic_store(&n->map->hdr.rr_counter,
		     atomic_load(&s->map->hdr.rr_counter));
	if (!rlb_segment_rename(dirfd, fname, s, n)) {
		rlb_segment_destroy(n);
		return s;
	}
	rlb_saved_remove(dirfd, fname);
	rlb_log(RLB_LOG_INFO,
		"state of cluster %s moved from a memfd back to segment %d",
		c->name, n->shmid);
	return n;
}

/*
 * Once a second: whether the name file still names s, whole and of ours
 * (for a memfd, through a holder that is alive); if not (removed,
 * emptied, cut, replaced, its segment removed or given another mode, its
 * memfd's holder gone), attach what it names, or name s again, or a new
 * segment when s is gone too. Returns the store to use (s if nothing
 * changed).
 */
static struct store *follow_name(struct rlb_health *h,
				 const struct rlb_cluster *c, struct store *s)
{
	char fname[NAME_MAX + 1], why[200], why2[200], what[32];
	enum rlb_log_level level = RLB_LOG_WARNING;
	struct store *n, *tip;
	struct health_name nm;
	bool gone, v2, limit;
	struct stat st;
	int dirfd;

	if (!s->dir)
		return s;
	store_fname(c, s, fname, sizeof(fname));
	gone = store_gone(s, why2, sizeof(why2));
	dirfd = rlb_dir_open(s->dir, why, sizeof(why));
	if (dirfd < 0)
		return s;
	if (!gone &&
	    rlb_dir_name_read(dirfd, fname, &nm, &v2, &st, why, sizeof(why)) ==
		    0 &&
	    rlb_segment_named(s, &nm) &&
	    (s->kind != STORE_MEMFD || rlb_memfd_holder_alive(&nm))) {
		n = s->kind == STORE_MEMFD
			    ? retry_segment(h, c, s, dirfd, fname)
			    : s;
		level = RLB_LOG_INFO;
	} else {
		n = attach_state(c, dirfd, s->dir, fname, gone ? NULL : s,
				 &limit, why, sizeof(why));
	}
	/* Named again, in this namespace's own file now: follow that. */
	if (n == s && strcmp(fname, s->fname ? s->fname : "") != 0) {
		free(s->fname);
		s->fname = strdup(fname);
	}
	if (n && n != s) {
		tip = rlb_segment_follow(c, n);
		if (tip != n)
			rlb_segment_free(n);
		n = rlb_segment_settle(c, tip, dirfd, s->dir, fname, h->prune);
		if (n != tip)
			rlb_segment_free(tip);
		n->dir = strdup(s->dir);
		n->fname = strdup(fname);
		n->label = s->label ? strdup(s->label) : NULL;
		/* Memfds change hands as programs come and go. */
		if (!gone && (s->kind == STORE_MEMFD || n->kind == STORE_MEMFD))
			level = RLB_LOG_INFO;
		if (n->kind == STORE_MEMFD)
			snprintf(what, sizeof(what), "a memfd");
		else
			snprintf(what, sizeof(what), "segment %d", n->shmid);
		if (level == RLB_LOG_WARNING)
			rlb_dir_log_once(
				level,
				"state of cluster %s was replaced or removed "
				"while in use (%s): now %s",
				c->name, gone ? why2 : "the name file changed",
				what);
		else
			rlb_log(level, "state of cluster %s: now %s", c->name,
				what);
		/* Nobody finds s any more: gone once all have moved. */
		if (!gone && s->kind == STORE_SHM)
			rlb_libc()->shmctl(s->shmid, IPC_RMID, NULL);
	}
	rlb_libc()->close(dirfd);
	return n ? n : s;
}

bool rlb_attach_successor_due(const struct rlb_health *h, const struct store *s)
{
	uint64_t code = atomic_load(&s->map->hdr.successor);

	return code && code != atomic_load_explicit(&h->dead_successor,
						    memory_order_relaxed);
}

void rlb_attach_slow(struct rlb_health *h, const struct rlb_cluster *c,
		     struct store *s, int64_t now, bool force)
{
	bool succ = rlb_attach_successor_due(h, s);
	bool grow_owed = atomic_load(&h->grow_owed);
	struct store *n;
	int cancel;

	if ((!succ && !grow_owed && !force &&
	     now < atomic_load(&h->follow_ms)) ||
	    !busy_enter(h))
		return;
	/* A thread cancelled here would keep the busy flag for good. */
	cancel = rlb_cancel_off();
	s = atomic_load(&h->cur);
	n = s;
	if (succ || grow_owed) {
		char fname[NAME_MAX + 1], why[160];
		int dirfd =
			s->dir ? rlb_dir_open(s->dir, why, sizeof(why)) : -1;
		struct store *tip = rlb_segment_follow(c, s);

		atomic_store(&h->grow_owed, false);
		store_fname(c, s, fname, sizeof(fname));
		n = rlb_segment_settle(c, tip, dirfd, s->dir, fname, false);
		if (n != tip && tip != s)
			rlb_segment_free(tip);
		if (dirfd >= 0)
			rlb_libc()->close(dirfd);
		/* Gone already: not again at every operation; the name file
		 * is read again once a second. */
		if (tip == s)
			atomic_store(&h->dead_successor,
				     atomic_load(&s->map->hdr.successor));
		if (n != s) {
			n->dir = s->dir ? strdup(s->dir) : NULL;
			n->fname = s->fname ? strdup(s->fname) : NULL;
			n->label = s->label ? strdup(s->label) : NULL;
		}
	} else {
		atomic_store(&h->follow_ms, now + HEALTH_FOLLOW_MS);
		n = follow_name(h, c, s);
		/* Once a second too: what dead processes held goes back
		 * (design.md §12.13). */
		if (n == s)
			rlb_ledger_reclaim_due(s);
	}
	if (n != s)
		switch_to(h, c, s, n);
	busy_leave(h);
	rlb_cancel_restore(cancel);
}

struct store *rlb_attach_now(const struct rlb_cluster *c)
{
	struct store *s = store_of(c);
	int saved;

	if (!s || !rlb_store_named(s) || s->readonly ||
	    !atomic_load_explicit(&s->map->hdr.successor,
				  memory_order_relaxed) ||
	    !rlb_attach_successor_due(c->health, s))
		return s;
	saved = errno;
	rlb_attach_slow(c->health, c, s, rlb_monotonic_ms(), true);
	errno = saved;
	return atomic_load_explicit(&c->health->cur, memory_order_acquire);
}

bool rlb_health_settled(const struct rlb_cluster *c, int64_t now)
{
	struct rlb_health *h = c->health;
	struct store *s;

	if (!h)
		return true;
	/* Not attached yet: the first use attaches (files, the segment). */
	s = atomic_load_explicit(&h->cur, memory_order_acquire);
	if (!s)
		return atomic_load_explicit(&h->mode, memory_order_relaxed) ==
		       HEALTH_NONE;
	if (!rlb_store_named(s) || s->readonly)
		return true;
	return !(atomic_load_explicit(&s->map->hdr.successor,
				      memory_order_relaxed) &&
		 rlb_attach_successor_due(h, s)) &&
	       !atomic_load(&h->grow_owed) && now < atomic_load(&h->follow_ms);
}

struct store *rlb_attach_check(const struct rlb_cluster *c)
{
	struct store *s = store_of(c);
	struct rlb_health *h = c->health;
	int64_t now, last;
	int saved;

	if (!s || !rlb_store_named(s) || s->readonly)
		return s;
	if (atomic_load_explicit(&s->map->hdr.successor,
				 memory_order_relaxed) &&
	    rlb_attach_successor_due(h, s))
		return rlb_attach_now(c);
	/* A gate of once a tick: the operation's reading will do. */
	now = rlb_op_monotonic_ms();
	last = atomic_load_explicit(&h->checked_ms, memory_order_relaxed);
	if (now == last || !atomic_compare_exchange_strong_explicit(
				   &h->checked_ms, &last, now,
				   memory_order_relaxed, memory_order_relaxed))
		return s;
	saved = errno;
	rlb_attach_slow(h, c, s, now, false);
	errno = saved;
	return atomic_load_explicit(&h->cur, memory_order_acquire);
}
