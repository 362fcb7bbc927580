/* health_memfd.c - health in a sealed memfd, where the kernel's segment
 * limits refuse a segment (design.md §12.12): made, sealed against
 * truncation, mapped, and reached by the user's other processes through
 * the /proc/PID/fd/FD of a process that holds it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "state/health_internal.h"

/* No truncation, no growth, and nobody can take these seals off. */
#define MEMFD_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* Memfds this process holds (a forked child holds its parent's too). */
static _Atomic int nheld;

bool rlb_memfd_any(void)
{
	return atomic_load(&nheld) > 0;
}

bool rlb_memfd_full(void)
{
	return atomic_load(&nheld) >= HEALTH_MAX_MEMFDS;
}

/*
 * fd moved above the standard descriptors: a program that closed them
 * and opens /dev/null in their place expects 0, 1 and 2 back.
 */
static int above_stdio(int fd)
{
	int high;

	if (fd > 2)
		return fd;
	high = rlb_libc()->fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (high < 0)
		return fd;
	rlb_libc()->close(fd);
	return high;
}

static void holder_path(const struct health_name *nm, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/%ld/fd/%d", (long)nm->pid, nm->fd);
}

/*
 * The file behind nm's holder descriptor, stat'ed through the magic link
 * without opening it: 0 when it is a regular file with nm's inode, -1
 * (why) when the holder is gone or holds something else there.
 */
static int holder_stat(const struct health_name *nm, struct stat *st, char *why,
		       size_t whylen)
{
	char path[64];

	holder_path(nm, path, sizeof(path));
	if (rlb_libc()->stat(path, st) != 0) {
		snprintf(why, whylen, "process %ld that held it is gone (%s)",
			 (long)nm->pid, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_ino != nm->ino) {
		snprintf(why, whylen,
			 "process %ld holds another file as descriptor %d",
			 (long)nm->pid, nm->fd);
		return -1;
	}
	return 0;
}

bool rlb_memfd_holder_alive(const struct health_name *nm)
{
	struct stat st;
	char why[160];

	return holder_stat(nm, &st, why, sizeof(why)) == 0 &&
	       st.st_uid == rlb_libc()->geteuid();
}

bool rlb_memfd_intact(const struct store *s)
{
	struct stat st;

	return s->fd >= 0 && rlb_libc()->fstat(s->fd, &st) == 0 &&
	       (uint64_t)st.st_dev == s->dev && (uint64_t)st.st_ino == s->ino;
}

void rlb_memfd_close(struct store *s)
{
	if (s->fd < 0)
		return;
	/* Never a descriptor the program has put in its place. */
	if (rlb_memfd_intact(s))
		rlb_libc()->close(s->fd);
	s->fd = -1;
	atomic_fetch_sub(&nheld, 1);
}

struct store *rlb_memfd_create(const struct rlb_cluster *c, uint32_t nslots,
			       const struct health_home *home, char *why,
			       size_t whylen)
{
	struct store *s;
	struct stat st;
	size_t size;
	void *map;
	int fd;

	if (nslots < rlb_table_home_slots(home->path))
		nslots = rlb_table_home_slots(home->path);
	size = HEALTH_SIZE(nslots);
	/* The line that names it needs the namespace, as /proc does. */
	if (!rlb_dir_ipc_tag()) {
		snprintf(why, whylen, "no memfd either: /proc cannot be read");
		return NULL;
	}
	if (rlb_memfd_full()) {
		snprintf(why, whylen,
			 "no memfd either: this process holds %d already",
			 HEALTH_MAX_MEMFDS);
		return NULL;
	}
	s = rlb_segment_store(c->nreplicas);
	if (!s) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		return NULL;
	}
	fd = rlb_libc()->memfd_create("replicalb",
				      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		snprintf(why, whylen, "no memfd either: %s", strerror(errno));
		goto out_free;
	}
	fd = above_stdio(fd);
	if (rlb_libc()->ftruncate(fd, (off_t)size) != 0 ||
	    rlb_libc()->fcntl(fd, F_ADD_SEALS, MEMFD_SEALS) != 0 ||
	    rlb_libc()->fstat(fd, &st) != 0) {
		snprintf(why, whylen, "no memfd either: %s", strerror(errno));
		goto out_close;
	}
	map = rlb_libc()->mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
			       fd, 0);
	if (map == MAP_FAILED) {
		snprintf(why, whylen, "no memfd either: %s", strerror(errno));
		goto out_close;
	}
	s->map = map;
	s->size = size;
	s->nslots = nslots;
	s->kind = STORE_MEMFD;
	s->fd = fd;
	s->dev = (uint64_t)st.st_dev;
	s->ino = (uint64_t)st.st_ino;
	s->token = rlb_segment_token();
	rlb_table_header_init(s->map, nslots, s->token, home);
	atomic_fetch_add(&nheld, 1);
	return s;

out_close:
	rlb_libc()->close(fd);
out_free:
	rlb_segment_free(s);
	return NULL;
}

struct store *rlb_memfd_attach(const struct rlb_cluster *c,
			       const struct health_name *nm, bool readonly,
			       bool *gone, char *why, size_t whylen)
{
	const int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC |
			  O_NONBLOCK | O_NOCTTY;
	uid_t me = rlb_libc()->geteuid();
	struct stat st, fst;
	struct store *s;
	char path[64];
	void *map;
	int fd, seals;

	*gone = false;
	/* Stat before opening: another process' FIFO or device is never
	 * opened, whatever its number now holds. */
	if (holder_stat(nm, &st, why, whylen) != 0) {
		*gone = true;
		return NULL;
	}
	if (st.st_uid != me) {
		snprintf(why, whylen, "memfd owned by uid %lu",
			 (unsigned long)st.st_uid);
		return NULL;
	}
	holder_path(nm, path, sizeof(path));
	fd = rlb_libc()->open(path, flags, 0);
	if (fd < 0) {
		*gone = true;
		snprintf(why, whylen, "memfd of process %ld: %s", (long)nm->pid,
			 strerror(errno));
		return NULL;
	}
	/* The same file still: the number may have been reused meanwhile. */
	if (rlb_libc()->fstat(fd, &fst) != 0 || fst.st_dev != st.st_dev ||
	    fst.st_ino != st.st_ino) {
		*gone = true;
		snprintf(why, whylen, "memfd of process %ld replaced",
			 (long)nm->pid);
		goto out_close;
	}
	/* Sealed, so that nobody can cut it under our mapping (SIGBUS). */
	seals = rlb_libc()->fcntl(fd, F_GET_SEALS, 0);
	if (seals < 0 || (seals & MEMFD_SEALS) != MEMFD_SEALS) {
		snprintf(why, whylen, "memfd not sealed against truncation");
		goto out_close;
	}
	if ((size_t)fst.st_size < HEALTH_SIZE(HEALTH_MIN_SLOTS) ||
	    (size_t)fst.st_size > HEALTH_SIZE(HEALTH_MAX_SLOTS)) {
		snprintf(why, whylen, "memfd of %lld bytes",
			 (long long)fst.st_size);
		goto out_close;
	}
	map = rlb_libc()->mmap(NULL, (size_t)fst.st_size,
			       PROT_READ | (readonly ? 0 : PROT_WRITE),
			       MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		snprintf(why, whylen, "memfd: %s", strerror(errno));
		goto out_close;
	}
	if (rlb_table_header_validate(map, (size_t)fst.st_size, nm->token,
				      c->name_hash, why, whylen) != 0)
		goto out_unmap;
	s = rlb_segment_store(c->nreplicas);
	if (!s) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		goto out_unmap;
	}
	s->map = map;
	s->size = (size_t)fst.st_size;
	s->nslots = s->map->hdr.nslots;
	s->kind = STORE_MEMFD;
	s->readonly = readonly;
	s->dev = (uint64_t)fst.st_dev;
	s->ino = (uint64_t)fst.st_ino;
	s->token = nm->token;
	/* A look keeps no descriptor: it names nothing. */
	if (readonly) {
		rlb_libc()->close(fd);
	} else {
		s->fd = above_stdio(fd);
		atomic_fetch_add(&nheld, 1);
	}
	return s;

out_unmap:
	rlb_libc()->munmap(map, (size_t)fst.st_size);
out_close:
	rlb_libc()->close(fd);
	return NULL;
}
