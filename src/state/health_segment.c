/* health_segment.c - SysV segments and the stores that hold them (design.md
 * §12.3, §12.8): checks, attach, create, private memory, successors and
 * growth. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#include "state/health_internal.h"

struct store *rlb_segment_store(size_t nreplicas)
{
	struct store *s;

	s = calloc(1, sizeof(*s) + nreplicas * sizeof(s->slot[0]));
	if (!s)
		return NULL;
	s->shmid = -1;
	s->fd = -1;
	atomic_init(&s->fork_row, -1);
	s->nreplicas = nreplicas;
	for (size_t i = 0; i < nreplicas; i++)
		atomic_init(&s->slot[i], HEALTH_NO_SLOT);
	return s;
}

void rlb_segment_free(struct store *s)
{
	if (!s)
		return;
	if (s->map) {
		if (s->kind == STORE_SHM)
			rlb_libc()->shmdt(s->map);
		else if (s->kind == STORE_ANON || s->kind == STORE_MEMFD)
			rlb_libc()->munmap(s->map, s->size);
		else
			free(s->map);
	}
	if (s->kind == STORE_MEMFD)
		rlb_memfd_close(s);
	free(s->dir);
	free(s->fname);
	free(s->label);
	free(s);
}

void rlb_segment_destroy(struct store *s)
{
	if (s && s->kind == STORE_SHM)
		rlb_libc()->shmctl(s->shmid, IPC_RMID, NULL);
	rlb_segment_free(s);
}

/* The successor field that names segment id with token. */
static uint64_t successor_code(int id, uint64_t token)
{
	return ((uint64_t)(uint32_t)(id + 1) << 32) | (token & 0xffffffffu);
}

uint64_t rlb_segment_token(void)
{
	uint64_t t = ((uint64_t)rlb_random_u32() << 32) | rlb_random_u32();

	return t ? t : 1;
}

void rlb_segment_name(const struct store *s, struct health_name *nm)
{
	*nm = (struct health_name){
		.kind = s->kind, .id = s->shmid, .fd = -1, .token = s->token};
	if (s->kind == STORE_MEMFD) {
		nm->pid = rlb_libc()->getpid();
		nm->fd = s->fd;
		nm->ino = s->ino;
	}
}

bool rlb_segment_named(const struct store *s, const struct health_name *nm)
{
	if (nm->kind != s->kind || nm->token != s->token)
		return false;
	return s->kind == STORE_MEMFD ? nm->ino == s->ino : nm->id == s->shmid;
}

const char *rlb_segment_problem(const struct shmid_ds *ds, char *why,
				size_t whylen)
{
	uid_t me = rlb_libc()->geteuid();

	if (ds->shm_perm.uid != me || ds->shm_perm.cuid != me)
		snprintf(why, whylen, "segment owned by uid %lu, made by %lu",
			 (unsigned long)ds->shm_perm.uid,
			 (unsigned long)ds->shm_perm.cuid);
	else if ((ds->shm_perm.mode & 0777) != 0600)
		snprintf(why, whylen, "segment mode %04o, expected 0600",
			 (unsigned)(ds->shm_perm.mode & 0777));
	else if (ds->shm_perm.mode & SHM_DEST)
		snprintf(why, whylen, "segment removed");
	else if (ds->shm_segsz < HEALTH_SIZE(HEALTH_MIN_SLOTS) ||
		 ds->shm_segsz > HEALTH_SIZE(HEALTH_MAX_SLOTS))
		snprintf(why, whylen, "segment of %zu bytes",
			 (size_t)ds->shm_segsz);
	else
		return NULL;
	return why;
}

struct store *rlb_segment_attach(const struct rlb_cluster *c, int id,
				 uint64_t token, bool lo_only, bool readonly,
				 char *why, size_t whylen)
{
	struct shmid_ds ds;
	struct store *s;
	void *map;

	/* Stat before attaching: another user's segment is never mapped. */
	if (rlb_libc()->shmctl(id, IPC_STAT, &ds) != 0) {
		snprintf(why, whylen, "segment %d: %s", id,
			 errno == EINVAL || errno == EIDRM ? "removed"
							   : strerror(errno));
		return NULL;
	}
	if (rlb_segment_problem(&ds, why, whylen))
		return NULL;
	map = rlb_libc()->shmat(id, NULL, readonly ? SHM_RDONLY : 0);
	if (map == (void *)-1) {
		snprintf(why, whylen, "segment %d: %s", id, strerror(errno));
		return NULL;
	}
	/* The same segment still: the id may have been reused meanwhile. */
	if (rlb_libc()->shmctl(id, IPC_STAT, &ds) != 0) {
		snprintf(why, whylen, "segment %d: %s", id,
			 errno == EINVAL || errno == EIDRM ? "removed"
							   : strerror(errno));
		goto out_detach;
	}
	if (rlb_segment_problem(&ds, why, whylen))
		goto out_detach;
	if (lo_only)
		token = (((struct health_map *)map)->hdr.token &
			 ~(uint64_t)0xffffffffu) |
			(token & 0xffffffffu);
	if (rlb_table_header_validate(&((struct health_map *)map)->hdr,
				      ds.shm_segsz, token, c->name_hash, why,
				      whylen) != 0)
		goto out_detach;
	s = rlb_segment_store(c->nreplicas);
	if (!s) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		goto out_detach;
	}
	s->map = map;
	s->size = ds.shm_segsz;
	s->nslots = s->map->hdr.nslots;
	s->kind = STORE_SHM;
	s->readonly = readonly;
	s->shmid = id;
	s->token = token;
	return s;

out_detach:
	rlb_libc()->shmdt(map);
	return NULL;
}

struct store *rlb_segment_create(const struct rlb_cluster *c, uint32_t nslots,
				 const struct health_home *home, bool *limit,
				 char *why, size_t whylen)
{
	struct store *s = rlb_segment_store(c->nreplicas);
	size_t size;
	void *map;
	int id;

	/* Room for the directory's path in the slots' home words. */
	if (nslots < rlb_table_home_slots(home->path))
		nslots = rlb_table_home_slots(home->path);
	size = HEALTH_SIZE(nslots);
	*limit = false;
	if (!s) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		return NULL;
	}
	id = rlb_libc()->shmget(IPC_PRIVATE, size, IPC_CREAT | IPC_EXCL | 0600);
	if (id < 0) {
		/* No size in the text: one warning for clusters of any size. */
		*limit = errno == ENOSPC || errno == ENOMEM || errno == EINVAL;
		snprintf(why, whylen,
			 "cannot create a shared memory segment: %s%s",
			 strerror(errno),
			 *limit ? " (kernel.shmmni, shmall or shmmax)" : "");
		free(s);
		return NULL;
	}
	map = rlb_libc()->shmat(id, NULL, 0);
	if (map == (void *)-1) {
		snprintf(why, whylen, "segment %d: %s", id, strerror(errno));
		rlb_libc()->shmctl(id, IPC_RMID, NULL);
		free(s);
		return NULL;
	}
	s->map = map;
	s->size = size;
	s->nslots = nslots;
	s->kind = STORE_SHM;
	s->shmid = id;
	s->token = rlb_segment_token();
	rlb_table_header_init(s->map, nslots, s->token, home);
	return s;
}

struct store *rlb_segment_private(const struct rlb_cluster *c, bool readonly)
{
	struct store *s = rlb_segment_store(c->nreplicas);

	if (!s)
		return NULL;
	s->nslots = rlb_table_slots(c->nreplicas);
	s->size = HEALTH_SIZE(s->nslots);
	s->kind = STORE_ANON;
	s->readonly = readonly;
	s->map = rlb_libc()->mmap(NULL, s->size, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->map == MAP_FAILED) {
		s->kind = STORE_HEAP;
		s->map = calloc(1, s->size);
		if (!s->map) {
			free(s);
			return NULL;
		}
	}
	if (!readonly) {
		struct health_home home = {c->name_hash, 0, 0, NULL, 0};

		rlb_table_header_init(s->map, s->nslots, 0, &home);
		for (size_t i = 0; i < c->nreplicas; i++)
			atomic_store(&s->slot[i],
				     (uint32_t)rlb_table_claim(
					     s->map, s->nslots,
					     c->replicas[i].identity));
	}
	return s;
}

struct store *rlb_segment_follow(const struct rlb_cluster *c,
				 struct store *first)
{
	struct store *s = first;
	char why[160];

	for (int hop = 0; hop < HEALTH_MAX_HOPS && rlb_store_named(s); hop++) {
		uint64_t code = atomic_load(&s->map->hdr.successor);
		struct store *n;

		if (!code)
			break;
		n = rlb_segment_attach(c, (int)(code >> 32) - 1, code, true,
				       s->readonly, why, sizeof(why));
		if (!n)
			break;
		if (!s->readonly)
			rlb_table_move(s->map, s->nslots, n->map, n->nslots,
				       rlb_table_cap(c));
		if (s != first)
			rlb_segment_free(s);
		s = n;
	}
	return s;
}

/* Replicas of c that s has no slot for. */
static size_t missing_replicas(const struct rlb_cluster *c,
			       const struct store *s)
{
	size_t n = 0;

	for (size_t i = 0; i < c->nreplicas; i++)
		n += rlb_table_find(s->map, s->nslots,
				    c->replicas[i].identity) < 0;
	return n;
}

bool rlb_segment_rename(int dirfd, const char *fname, const struct store *s,
			const struct store *n)
{
	struct health_name nm;
	struct stat st;
	char why[200];
	bool v2;

	if (dirfd < 0 ||
	    rlb_dir_name_read(dirfd, fname, &nm, &v2, &st, why, sizeof(why)) !=
		    0 ||
	    !rlb_segment_named(s, &nm))
		return false;
	rlb_segment_name(n, &nm);
	return rlb_dir_name_write(dirfd, fname, &nm, true) == 0;
}

/*
 * A larger (or tombstone-free) successor of s, with c's replicas claimed
 * (design.md §12.3): a new segment takes every live count of s, its T
 * and its counter, and is published with a compare-and-swap of s's
 * successor field; the winner renames the name file to it and removes s
 * from the system (it lives on while attached). A process that loses the
 * race moves what it took into the winner's segment and removes its own.
 * When the kernel's limits refuse a segment, the successor is a memfd
 * (design.md §12.12), which the successor field cannot name: the name
 * file is renamed to it, and the others follow that within a second
 * (§12.9). NULL when nothing better can be had (s stays in use).
 */
static struct store *grow(const struct rlb_cluster *c, struct store *s,
			  int dirfd, const char *dir, const char *fname)
{
	size_t need =
		rlb_table_live(s->map, s->nslots) + missing_replicas(c, s);
	uint32_t nslots = rlb_table_slots(need);
	uint64_t expected = 0;
	struct store *n, *m;
	char why[200], why2[200];
	bool limit;

	struct health_home home = {c->name_hash, s->map->hdr.dir_dev,
				   s->map->hdr.dir_ino, dir, rlb_dir_ns("mnt")};

	if (!rlb_store_named(s) || s->readonly)
		return NULL;
	n = rlb_segment_create(c, nslots, &home, &limit, why, sizeof(why));
	if (!n && limit && !rlb_memfd_full())
		n = rlb_memfd_create(c, nslots, &home, why2, sizeof(why2));
	if (!n) {
		rlb_dir_log_once(
			RLB_LOG_WARNING,
			"state of cluster %s cannot grow (%s): replicas "
			"without a slot count nothing",
			c->name, why);
		return NULL;
	}
	atomic_store(&n->map->hdr.decay_time,
		     atomic_load(&s->map->hdr.decay_time));
	atomic_store(&n->map->hdr.rr_counter,
		     atomic_load(&s->map->hdr.rr_counter));
	for (size_t i = 0; i < c->nreplicas; i++)
		rlb_table_claim(n->map, n->nslots, c->replicas[i].identity);
	rlb_table_move(s->map, s->nslots, n->map, n->nslots, rlb_table_cap(c));
	/* A memfd cannot be named in the successor field: the others follow
	 * the name file to it within a second (design.md §12.9). */
	if (n->kind == STORE_MEMFD ||
	    atomic_compare_exchange_strong(
		    &s->map->hdr.successor, &expected,
		    successor_code(n->shmid, n->token))) {
		if (rlb_segment_rename(dirfd, fname, s, n) &&
		    s->kind == STORE_SHM)
			rlb_libc()->shmctl(s->shmid, IPC_RMID, NULL);
		/* Counts added to s while n was being filled. */
		rlb_table_move(s->map, s->nslots, n->map, n->nslots,
			       rlb_table_cap(c));
		rlb_log(RLB_LOG_INFO,
			"state of cluster %s moved to a %s of %u slots",
			c->name, n->kind == STORE_MEMFD ? "memfd" : "segment",
			n->nslots);
		return n;
	}
	m = rlb_segment_follow(c, s);
	if (m == s) {
		rlb_table_move(n->map, n->nslots, s->map, s->nslots,
			       rlb_table_cap(c));
		rlb_segment_destroy(n);
		return NULL;
	}
	rlb_table_move(n->map, n->nslots, m->map, m->nslots, rlb_table_cap(c));
	rlb_segment_destroy(n);
	return m;
}

struct store *rlb_segment_settle(const struct rlb_cluster *c, struct store *s,
				 int dirfd, const char *dir, const char *fname,
				 bool prune)
{
	struct store *cur = s;

	for (int round = 0; round < HEALTH_TRIES; round++) {
		size_t used, live;
		bool room = true;
		struct store *n;

		for (size_t i = 0; i < c->nreplicas; i++) {
			long idx = rlb_table_claim(cur->map, cur->nslots,
						   c->replicas[i].identity);

			if (idx < 0)
				room = false;
			else
				atomic_store(&cur->slot[i], (uint32_t)idx);
		}
		used = rlb_table_used(cur->map, cur->nslots);
		live = rlb_table_live(cur->map, cur->nslots);
		if (room &&
		    (used * 2 <= cur->nslots ||
		     (rlb_table_slots(live) <= cur->nslots && used == live)))
			break;
		n = grow(c, cur, dirfd, dir, fname);
		if (!n)
			break;
		if (cur != s)
			rlb_segment_free(cur);
		cur = n;
	}
	if (prune)
		rlb_table_prune(cur->map, cur->nslots, c);
	return cur;
}
