/* health_gc.c - reclaiming segments that no state file can name any more:
 * their state directory is gone, or it names them no more (design.md
 * §12.11). */
#include "config.h"

#include <dirent.h>
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

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

/*
 * Whether ds is a segment of ours in our format that nobody has attached:
 * the only kind a sweep may remove.
 */
static bool unused_ours(const struct shmid_ds *ds, uid_t me)
{
	return ds->shm_perm.uid == me && ds->shm_perm.cuid == me &&
	       (ds->shm_perm.mode & 0777) == 0600 &&
	       !(ds->shm_perm.mode & SHM_DEST) && ds->shm_nattch == 0 &&
	       ((ds->shm_segsz >= HEALTH_SIZE(HEALTH_MIN_SLOTS) &&
		 ds->shm_segsz <= HEALTH_SIZE(HEALTH_MAX_SLOTS)) ||
		(ds->shm_segsz >= HEALTH_V3_SIZE(HEALTH_MIN_SLOTS) &&
		 ds->shm_segsz <= HEALTH_V3_SIZE(HEALTH_MAX_SLOTS)));
}

/*
 * The header of segment id (of size bytes) into hdr, and the path of the
 * directory it keeps into path ("" when none): false when it is not a
 * valid segment of this version, or of version 3 (the release before the
 * ledger, whose path is not read: only its inode tells where it
 * belongs). Attached read-only for the copy.
 */
static bool home_of(int id, size_t size, struct health_header *hdr, char *path,
		    size_t pathlen)
{
	char why[160];
	void *map;
	bool ok;

	map = rlb_libc()->shmat(id, NULL, SHM_RDONLY);
	if (map == (void *)-1)
		return false;
	memcpy(hdr, map, sizeof(*hdr));
	ok = rlb_table_header_validate(hdr, size, hdr->token, hdr->name_hash,
				       why, sizeof(why)) == 0;
	if (!ok || rlb_table_home_get(map, size, path, pathlen) < 0)
		path[0] = '\0';
	ok = ok || rlb_table_header_v3(hdr, size);
	rlb_libc()->shmdt(map);
	return ok;
}

/*
 * Whether the directory of hdr, which was path, is gone: nothing is at
 * path any more, or another file or directory. A directory renamed away
 * reads as gone (design.md §12.11 says what that costs).
 */
static bool dir_gone(const char *path, const struct health_header *hdr)
{
	struct stat st;

	if (rlb_libc()->lstat(path, &st) != 0)
		return errno == ENOENT || errno == ENOTDIR;
	return !S_ISDIR(st.st_mode) || (uint64_t)st.st_dev != hdr->dir_dev ||
	       (uint64_t)st.st_ino != hdr->dir_ino;
}

/* Whether ds was attached, detached or changed at or after since. */
static bool touched_since(const struct shmid_ds *ds, int64_t since)
{
	return (int64_t)ds->shm_atime >= since ||
	       (int64_t)ds->shm_dtime >= since ||
	       (int64_t)ds->shm_ctime >= since;
}

/* Remove segment id if it is still unused and ours. */
static bool remove_unused(int id, uid_t me)
{
	struct shmid_ds ds;

	return rlb_libc()->shmctl(id, IPC_STAT, &ds) == 0 &&
	       unused_ours(&ds, me) &&
	       rlb_libc()->shmctl(id, IPC_RMID, NULL) == 0;
}

int rlb_gc_sweep(const struct gc_here *here, unsigned flags, FILE *out)
{
	uid_t me = rlb_libc()->geteuid();
	uint64_t mnt = rlb_dir_ns("mnt");
	int64_t since = rlb_now() - HEALTH_GC_GRACE_S;
	struct shm_info info;
	int max, removed = 0;

	max = rlb_libc()->shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);
	for (int idx = 0; idx <= max; idx++) {
		char path[PATH_MAX], why[PATH_MAX + 64];
		struct health_header hdr;
		struct shmid_ds ds;
		int id = rlb_libc()->shmctl(idx, SHM_STAT, &ds);

		if (id < 0 || !unused_ours(&ds, me) ||
		    (here && here->nnamed &&
		     bsearch(&id, here->named, here->nnamed,
			     sizeof(*here->named), cmp_int)) ||
		    !home_of(id, ds.shm_segsz, &hdr, path, sizeof(path)))
			continue;
		if (here && hdr.dir_dev == here->dev &&
		    hdr.dir_ino == here->ino &&
		    !(path[0] && here->path && hdr.home_mnt == mnt &&
		      strcmp(path, here->path) != 0)) {
			/* A name file may have been linked since the
			 * listing, by a process that attached it. */
			if ((flags & GC_GRACE) && touched_since(&ds, since))
				continue;
			snprintf(why, sizeof(why), "named by no state file");
		} else if ((flags & GC_GONE_DIRS) && path[0] && mnt &&
			   hdr.home_mnt == mnt && dir_gone(path, &hdr)) {
			snprintf(why, sizeof(why), "state directory %s is gone",
				 path);
		} else {
			continue;
		}
		if (!remove_unused(id, me))
			continue;
		removed++;
		if (out)
			fprintf(out, "removed segment %d (%s)\n", id, why);
	}
	return removed;
}

int rlb_gc_named(int dirfd, int **ids, size_t *nids)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int *v = NULL, fd;
	DIR *d;

	*ids = NULL;
	*nids = 0;
	fd = rlb_libc()->openat(dirfd, ".", flags, 0);
	if (fd < 0)
		return -1;
	d = rlb_libc()->fdopendir(fd);
	if (!d) {
		rlb_libc()->close(fd);
		return -1;
	}
	while ((de = rlb_libc()->readdir(d))) {
		struct health_name nm;
		char why[160];
		struct stat st;
		bool v2;

		/* A memfd's line names no segment. */
		if (!rlb_dir_is_name_file(de->d_name) ||
		    rlb_dir_name_read(dirfd, de->d_name, &nm, &v2, &st, why,
				      sizeof(why)) != 0 ||
		    nm.kind != STORE_SHM)
			continue;
		if (n == cap) {
			int *more = realloc(v, (cap * 2 + 16) * sizeof(*more));

			if (!more)
				goto out_nomem;
			v = more;
			cap = cap * 2 + 16;
		}
		v[n++] = nm.id;
	}
	rlb_libc()->closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_int);
	*ids = v;
	*nids = n;
	return 0;

out_nomem:
	rlb_libc()->closedir(d);
	free(v);
	return -1;
}

/* When this process last swept (monotonic ms), and which process it is. */
static _Atomic int64_t gc_last_ms;
static _Atomic pid_t gc_pid;

int rlb_gc_at_create(int dirfd, const struct health_home *home, bool urgent)
{
	int64_t now = rlb_monotonic_ms(), last = atomic_load(&gc_last_ms);
	pid_t me = rlb_libc()->getpid();
	struct gc_here here = {home->dir_dev, home->dir_ino, home->path, NULL,
			       0};
	int *named, removed;

	if (atomic_load(&gc_pid) == me &&
	    now - last < (urgent ? HEALTH_GC_SOON_MS : HEALTH_GC_MS))
		return 0;
	if (!atomic_compare_exchange_strong(&gc_last_ms, &last, now))
		return 0;
	atomic_store(&gc_pid, me);
	/* Without the listing, nothing of this directory is judged. */
	if (rlb_gc_named(dirfd, &named, &here.nnamed) != 0)
		return rlb_gc_sweep(NULL, GC_GONE_DIRS, NULL);
	here.named = named;
	removed = rlb_gc_sweep(&here, GC_GONE_DIRS | GC_GRACE, NULL);
	free(named);
	if (removed)
		rlb_log(RLB_LOG_INFO,
			"removed %d unused segments that no state file names",
			removed);
	return removed;
}

int rlb_health_gc(FILE *out)
{
	return rlb_gc_sweep(NULL, GC_GONE_DIRS, out);
}
