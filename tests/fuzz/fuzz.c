/* fuzz.c - helpers shared by the libFuzzer targets (see fuzz.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>

#include "fuzz.h"
#include "engine/engine.h"

static uint64_t read_le(struct fuzz_input *in, size_t size)
{
	uint8_t b[8] = {0};
	uint64_t v = 0;

	fuzz_bytes(in, b, size);
	for (size_t i = size; i-- > 0;)
		v = v << 8 | b[i];
	return v;
}

uint8_t fuzz_u8(struct fuzz_input *in)
{
	return (uint8_t)read_le(in, 1);
}

uint16_t fuzz_u16(struct fuzz_input *in)
{
	return (uint16_t)read_le(in, 2);
}

uint32_t fuzz_u32(struct fuzz_input *in)
{
	return (uint32_t)read_le(in, 4);
}

uint64_t fuzz_u64(struct fuzz_input *in)
{
	return read_le(in, 8);
}

size_t fuzz_bytes(struct fuzz_input *in, void *dst, size_t n)
{
	size_t got = n < in->n ? n : in->n;

	memcpy(dst, in->p, got);
	memset((char *)dst + got, 0, n - got);
	in->p += got;
	in->n -= got;
	return got;
}

char *fuzz_string(struct fuzz_input *in, size_t max)
{
	size_t len = fuzz_u8(in);
	char *s;

	if (len > max)
		len = max;
	if (len > in->n)
		len = in->n;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	fuzz_bytes(in, s, len);
	s[len] = '\0';
	return s;
}

static char scratch[4096];

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	/* The top directory itself stays: it is removed at exit only. */
	if (ftw->level > 0)
		remove(path);
	return 0;
}

void fuzz_empty_dir(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void fuzz_remove_own_segments(void)
{
	struct shm_info info;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);

	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT, &ds);

		if (id >= 0 && ds.shm_cpid == getpid())
			shmctl(id, IPC_RMID, NULL);
	}
}

static void remove_scratch(void)
{
	fuzz_remove_own_segments();
	if (!scratch[0])
		return;
	fuzz_empty_dir(scratch);
	rmdir(scratch);
}

const char *fuzz_scratch_dir(const char *name)
{
	const char *tmp = getenv("TMPDIR");

	if (scratch[0])
		return scratch;
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if ((size_t)snprintf(scratch, sizeof(scratch), "%s/rlb-fuzz-%s-XXXXXX",
			     tmp, name) >= sizeof(scratch) ||
	    !mkdtemp(scratch)) {
		fprintf(stderr,
			"fuzz: cannot make a scratch directory in %s: %s\n",
			tmp, strerror(errno));
		exit(1);
	}
	atexit(remove_scratch);
	return scratch;
}

int fuzz_write_file(const char *path, const void *data, size_t n)
{
	int fd;
	ssize_t w;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < n; off += (size_t)w) {
		w = write(fd, (const char *)data + off, n - off);
		if (w <= 0) {
			close(fd);
			return -1;
		}
	}
	return close(fd);
}

char *fuzz_path(char *buf, size_t len, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len) {
		fprintf(stderr, "fuzz: path too long: %s/%s\n", dir, name);
		exit(1);
	}
	return buf;
}

void fuzz_log_setup(void)
{
	const char *v = getenv("FUZZ_LOG");
	enum rlb_log_level level = RLB_LOG_NONE;

	if (v)
		rlb_log_level_parse(v, &level);
	rlb_log_configure(level, RLB_LOG_STDERR);
}

void fuzz_check(int ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz: invariant broken: %s\n", what);
	abort();
}
