/* health_side.c - a cluster's side files in the state directory: small
 * files of the engine's (the shared DNS answer, design.md §15.6) kept
 * under the state files' rules (§5.8, §12.1): the directory and the file
 * ours and writable by nobody else, a regular file, never a symlink;
 * read with pread, never mapped; replaced only by the rename() of a whole
 * new file. They take no lock of libc's (no stdio, no strerror), so that
 * a thread of the library's may use them while the program forks. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "state/health_internal.h"

/* NAME.EXT for cluster `cluster` (NAME as its state file's, less .state). */
static void side_name(const char *cluster, const char *ext, char *out,
		      size_t len)
{
	size_t n;

	rlb_dir_file_name(cluster, out, len);
	n = strlen(out);
	if (n > 6 && strcmp(out + n - 6, ".state") == 0)
		out[n - 6] = '\0';
	n = strlen(out);
	snprintf(out + n, len - n, ".%s", ext);
}

/* The state directory dir, if it is ours and nobody else can write it
 * (created when `create`); -1 otherwise. */
static int side_dir(const char *dir, bool create)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char why[160];
	struct stat st;
	int fd;

	if (create)
		return rlb_dir_open(dir, why, sizeof(why));
	fd = rlb_libc()->open(dir, flags, 0);
	if (fd < 0)
		return -1;
	if (rlb_libc()->fstat(fd, &st) != 0 ||
	    rlb_dir_owner_problem(&st, why, sizeof(why))) {
		rlb_libc()->close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* Rename side file name of dirfd to NAME.corrupt-TIME-PID, with one
 * warning saying why. */
static void set_aside(int dirfd, const char *dir, const char *name,
		      const char *why)
{
	char to[NAME_MAX + 1];

	snprintf(to, sizeof(to), "%.200s.corrupt-%lld-%d", name,
		 (long long)rlb_now(), (int)rlb_libc()->getpid());
	if (rlb_libc()->renameat(dirfd, name, dirfd, to) == 0)
		rlb_log(RLB_LOG_WARNING, "%s/%s: %s; set aside as %s", dir,
			name, why, to);
}

ssize_t rlb_side_read_at(int dirfd, const char *dir, const char *name,
			 char *buf, size_t cap)
{
	int saved = errno, fd;
	const char *why = NULL;
	struct stat st;
	ssize_t n = -1;

	fd = rlb_libc()->openat(
		dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == ELOOP)
			why = "a symlink";
		goto out;
	}
	if (rlb_libc()->fstat(fd, &st) != 0)
		goto out_file;
	if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_uid != rlb_libc()->geteuid())
		why = "not ours";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		why = "writable by others";
	else if ((size_t)st.st_size > cap)
		why = "too large";
	else
		n = rlb_libc()->pread(fd, buf, cap, 0);
out_file:
	rlb_libc()->close(fd);
out:
	if (why)
		set_aside(dirfd, dir, name, why);
	errno = saved;
	return n;
}

ssize_t rlb_health_side_read(const char *dir, const char *cluster,
			     const char *ext, char *buf, size_t cap)
{
	char name[NAME_MAX + 1];
	int saved = errno, dirfd;
	ssize_t n = -1;

	side_name(cluster, ext, name, sizeof(name));
	dirfd = side_dir(dir, false);
	if (dirfd >= 0) {
		n = rlb_side_read_at(dirfd, dir, name, buf, cap);
		rlb_libc()->close(dirfd);
	}
	errno = saved;
	return n;
}

void rlb_side_set_aside_at(int dirfd, const char *dir, const char *name,
			   const char *why)
{
	int saved = errno;

	set_aside(dirfd, dir, name, why);
	errno = saved;
}

void rlb_health_side_set_aside(const char *dir, const char *cluster,
			       const char *ext, const char *why)
{
	char name[NAME_MAX + 1];
	int saved = errno, dirfd = side_dir(dir, false);

	side_name(cluster, ext, name, sizeof(name));
	if (dirfd >= 0) {
		set_aside(dirfd, dir, name, why);
		rlb_libc()->close(dirfd);
	}
	errno = saved;
}

int rlb_side_write_at(int dirfd, const char *name, const void *data, size_t len)
{
	char tmp[NAME_MAX + 1];
	int saved = errno, rc = -1, fd;
	size_t off = 0;

	snprintf(tmp, sizeof(tmp), "%.200s.tmp-%d-%08x", name,
		 (int)rlb_libc()->getpid(), rlb_random_u32());
	fd = rlb_libc()->openat(
		dirfd, tmp,
		O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	while (off < len) {
		ssize_t w = rlb_libc()->write(fd, (const char *)data + off,
					      len - off);

		if (w <= 0 && errno != EINTR)
			break;
		if (w > 0)
			off += (size_t)w;
	}
	rlb_libc()->close(fd);
	/* Readers see the old file or the whole new one, never a part. */
	if (off == len && rlb_libc()->renameat(dirfd, tmp, dirfd, name) == 0)
		rc = 0;
	else
		rlb_libc()->unlinkat(dirfd, tmp, 0);
out:
	errno = saved;
	return rc;
}

int rlb_health_side_write(const char *dir, const char *cluster, const char *ext,
			  const void *data, size_t len)
{
	char name[NAME_MAX + 1];
	int saved = errno, rc = -1, dirfd;

	side_name(cluster, ext, name, sizeof(name));
	dirfd = side_dir(dir, true);
	if (dirfd >= 0) {
		rc = rlb_side_write_at(dirfd, name, data, len);
		rlb_libc()->close(dirfd);
	}
	errno = saved;
	return rc;
}
