/* fuzz_state.c - libFuzzer target: arbitrary state files and segment
 * headers (health.c, design.md §12) attached, then selections, adds,
 * decay, resets and remove-state.
 *
 * The input first builds STATE_DIR/NAME.state of one cluster of a fixed
 * config and the SysV segment it names, then gives operations on the
 * attached clusters. A segment of the right size is mostly zero, so
 * instead of its raw bytes the input holds an image description (all
 * values little-endian, zero once the input runs out):
 *
 *   u8  cluster whose state is written
 *   u8  kind: none; a segment of mode 0600 or 0666 named by a valid state
 *       file (with the token of a segment the library made); a symlink to
 *       such a state file; a directory or a FIFO in its place; a state
 *       file whose text is the image's first 80 bytes (no segment); a
 *       memfd of this process holding the image, sealed against
 *       truncation or not, named by a line of version 3 (design.md
 *       §12.12); or such a line whose holder is gone
 *   u8  base: raw bytes (u16 length, then the bytes), zeros, or zeros
 *       under the valid header of a segment the library made
 *   u8  size: as the base, cut to u24 % size, or grown by u8 + 1 bytes
 *       (a segment of size 0 is not made: the file names a missing one)
 *   u8  number of patches, each one of:
 *         bytes:  u32 offset, u8 length (<= 64), the bytes
 *         slot:   u16 index, key, u64 errors, u64 slowdowns
 *         fill:   u16 first, u16 count, key (+1 per slot for raw), u64
 *                 errors
 *         header: u64 decay time T, u64 round-robin counter
 *       where a key is a u8 choice: empty, dropped, raw u64, or the
 *       identity of (u8) replica of the cluster in config A or B
 *   u8  flags: bit 0 prune on attach; the rest % 5 the state directory
 *       the config names: the one holding the file, a missing one
 *       (created), one writable by the group, a symlink to it, a file
 *   ops until the input ends: select, peek, add errors or slowdowns,
 *       decay, reset, queries, a poke into the live segment (another
 *       process writing, header and successor field included), attach
 *       or drop config B (a process with other replicas, pruning),
 *       setting the state file aside, re-attaching A, sorting keys the
 *       input gives (rlb_select_sort(), against qsort), remove-state;
 *       each with a cluster, a replica and a time chosen from the input.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "engine/engine.h"

#define HEADER_SIZE 128 /* design.md §12.2 */
#define MAX_PATCHES 32
#define MAX_OPS	    64
#define START_TIME  1700000000

/* Config A: what this process runs. Config B: another process' view of
 * the same clusters with other replicas. Names need no escaping in file
 * names (design.md §12.1). */
static const char *const names[] = {"s.cluster", "zero.cluster", "one.cluster",
				    "big.cluster"};
#define NCLUSTERS (sizeof(names) / sizeof(*names))

static char text_a[8192], text_b[8192];
static char state_dir[PATH_MAX], aside_dir[PATH_MAX];
static char top_dir[PATH_MAX];
/* The state directory configs name this input (see use_state_dir()). */
static char cfg_state_dir[PATH_MAX];
static uint8_t template_header[HEADER_SIZE];
static size_t file_size;		  /* of a valid segment */
static unsigned long long template_token; /* its token */
static unsigned long long template_ns;	  /* its IPC namespace tag */
static int forged = -1;	      /* the segment this input made, or -1 */
static int forged_memfd = -1; /* the memfd this input made, or -1 */
static size_t slot_size;      /* bytes per slot */
static uint32_t nslots;	      /* slots per file */

static void make_configs(void)
{
	static const char head[] =
		"clusters = (\n"
		" { name = \"s.cluster\"; load_balancing = \"round_robin\";\n"
		"   replicas = ( %s ); },\n"
		" { name = \"zero.cluster\"; load_balancing = \"in_order\";\n"
		"   distributed_replica_error_half_life = 0;\n"
		"   distributed_replica_max_ignored_errors = 2;\n"
		"   distributed_replica_error_cap = 5;\n"
		"   replicas = ( \"z1\", \"z2\" ); },\n"
		" { name = \"one.cluster\"; load_balancing = "
		"\"first_or_random\";\n"
		"   distributed_replica_error_half_life = 1;\n"
		"   distributed_replica_error_cap = 0;\n"
		"   replicas = ( \"o1\" ); },\n"
		" { name = \"big.cluster\"; load_balancing = "
		"\"nearest_hostname\";\n"
		"   local_hostname = \"b7.example\";\n"
		"   distributed_replica_error_half_life = "
		"9223372036854775807L;\n"
		"   distributed_replica_error_cap = 9223372036854775807L;\n"
		"   replicas = ( \"b0.example\"%s ); }\n);\n";
	char big_a[4096] = "", big_b[4096] = "";
	size_t oa = 0, ob = 0;

	/* More than 64 replicas: the packed radix selection. */
	for (int i = 1; i < 72; i++) {
		oa += (size_t)snprintf(big_a + oa, sizeof(big_a) - oa,
				       ", \"b%d.example\"", i);
		if (i % 3)
			ob += (size_t)snprintf(big_b + ob, sizeof(big_b) - ob,
					       ", \"b%d.example\"", i + 8);
	}
	snprintf(text_a, sizeof(text_a), head,
		 "\"r1\", \"r2\", \"r3:9000\", \"10.0.0.4\"", big_a);
	snprintf(text_b, sizeof(text_b), head, "\"r1\", \"r4\", \"r3:9001\"",
		 big_b);
}

/* A snapshot of config text with the private state directory. */
static struct rlb_snapshot *attach(const char *text, bool prune)
{
	struct rlb_config *cfg;
	struct rlb_diag diag = {0};

	if (rlb_config_parse_string(text, "state.conf", &cfg, &diag) != 0) {
		for (size_t i = 0; i < diag.n; i++)
			fprintf(stderr, "%s\n", diag.msgs[i]);
		exit(1);
	}
	free(cfg->state_dir);
	cfg->state_dir = strdup(cfg_state_dir);
	return rlb_snapshot_new(cfg, NULL, RLB_STATE_COUNT, prune);
}

static char *state_path(char *buf, size_t len, const char *dir, size_t k)
{
	char name[64];

	snprintf(name, sizeof(name), "%s.state", names[k]);
	return fuzz_path(buf, len, dir, name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *top = fuzz_scratch_dir("state");
	struct rlb_snapshot *snap;
	char path[PATH_MAX], text[128] = "";
	struct shmid_ds ds;
	struct stat st;
	void *map = NULL;
	uint32_t n;
	int fd, id;

	fuzz_log_setup();
	snprintf(top_dir, sizeof(top_dir), "%s", top);
	fuzz_path(state_dir, sizeof(state_dir), top, "state");
	snprintf(cfg_state_dir, sizeof(cfg_state_dir), "%s", state_dir);
	fuzz_path(aside_dir, sizeof(aside_dir), top, "aside");
	if (mkdir(state_dir, 0700) != 0 || mkdir(aside_dir, 0700) != 0) {
		perror("fuzz_state: mkdir");
		exit(1);
	}
	make_configs();
	/* A segment the library made gives the valid header and the size. */
	snap = attach(text_a, false);
	if (snap)
		rlb_health_path(snap->cfg->clusters[0].health); /* first use */
	state_path(path, sizeof(path), state_dir, 0);
	fd = open(path, O_RDONLY);
	if (!snap || fd < 0 || read(fd, text, sizeof(text) - 1) <= 0 ||
	    sscanf(text, "replicalb-state %*d shm %d %llx %llx", &id,
		   &template_token, &template_ns) < 2 ||
	    shmctl(id, IPC_STAT, &ds) != 0 ||
	    (map = shmat(id, NULL, SHM_RDONLY)) == (void *)-1) {
		perror("fuzz_state: the library's segment");
		exit(1);
	}
	close(fd);
	memcpy(template_header, map, HEADER_SIZE);
	shmdt(map);
	st.st_size = (off_t)ds.shm_segsz;
	rlb_snapshot_put(snap);
	shmctl(id, IPC_RMID, NULL);
	fuzz_empty_dir(state_dir);
	memcpy(&n, template_header + 12, sizeof(n));
	file_size = (size_t)st.st_size;
	nslots = n;
	if (nslots == 0 || file_size <= HEADER_SIZE ||
	    (file_size - HEADER_SIZE) % nslots) {
		fprintf(stderr, "fuzz_state: unexpected layout\n");
		exit(1);
	}
	slot_size = (file_size - HEADER_SIZE) / nslots;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The file image */

struct image {
	uint8_t *bytes;
	size_t size;
};

static struct rlb_config *cfg_a, *cfg_b; /* parsed once, for identities */

static uint64_t pick_key(struct fuzz_input *in, size_t k)
{
	uint8_t how = fuzz_u8(in) % 8;
	const struct rlb_config *cfg = how >= 6 ? cfg_b : cfg_a;
	const struct rlb_cluster *c = &cfg->clusters[k];

	if (how == 0)
		return 0; /* EMPTY */
	if (how == 1)
		return 1; /* DROPPED */
	if (how == 2)
		return fuzz_u64(in);
	return c->replicas[fuzz_u8(in) % c->nreplicas].identity;
}

/* n bytes of v at offset off of img, as far as they fit. */
static void put(struct image *img, size_t off, const void *v, size_t n)
{
	if (off >= img->size)
		return;
	memcpy(img->bytes + off, v, n < img->size - off ? n : img->size - off);
}

static void patch(struct image *img, struct fuzz_input *in, size_t k)
{
	uint8_t buf[64];
	uint64_t v[2], key;
	size_t off, n, first;

	switch (fuzz_u8(in) % 4) {
	case 0:
		off = fuzz_u32(in) % (img->size ? img->size : 1);
		n = fuzz_u8(in) % (sizeof(buf) + 1);
		fuzz_bytes(in, buf, n);
		put(img, off, buf, n);
		break;
	case 1:
		off = HEADER_SIZE + (fuzz_u16(in) % nslots) * slot_size;
		key = pick_key(in, k);
		v[0] = fuzz_u64(in);
		v[1] = fuzz_u64(in);
		put(img, off, &key, 8);
		put(img, off + 8, v, 16);
		break;
	case 2:
		first = fuzz_u16(in) % nslots;
		n = fuzz_u16(in) % (nslots + 1);
		key = pick_key(in, k);
		v[0] = fuzz_u64(in);
		for (size_t i = 0; i < n; i++) {
			off = HEADER_SIZE + ((first + i) % nslots) * slot_size;
			put(img, off, &key, 8);
			put(img, off + 8, v, 8);
			if (key > 1 && key < UINT64_MAX)
				key++; /* raw keys: a run of distinct ones */
		}
		break;
	default:
		v[0] = fuzz_u64(in);
		v[1] = fuzz_u64(in);
		put(img, 16, v, 16);
		break;
	}
}

/* The file's bytes as the input describes them; false: out of memory. */
static bool build_image(struct image *img, struct fuzz_input *in, size_t k)
{
	uint8_t base = fuzz_u8(in) % 3, how = fuzz_u8(in) % 3;
	size_t npatches, grow = 0;

	if (base == 0) {
		img->size = fuzz_u16(in);
	} else {
		img->size = file_size;
		if (how == 1)
			img->size = (fuzz_u32(in) & 0xffffff) % file_size;
		else if (how == 2)
			grow = (size_t)fuzz_u8(in) + 1;
		img->size += grow;
	}
	img->bytes = calloc(1, img->size ? img->size : 1);
	if (!img->bytes)
		return false;
	if (base == 0)
		fuzz_bytes(in, img->bytes, img->size);
	else if (base == 2) {
		/* The header of cluster k: its name hash, the check again
		 * (FNV-1a of bytes 0-55, design.md §12.2). */
		uint64_t hash = cfg_a->clusters[k].name_hash, check;

		put(img, 0, template_header, HEADER_SIZE);
		put(img, 24, &hash, 8);
		check = rlb_hash64(img->bytes, img->size < 56 ? img->size : 56,
				   0x524c4253u);
		put(img, 56, &check, 8);
	}
	npatches = fuzz_u8(in) % (MAX_PATCHES + 1);
	for (size_t i = 0; i < npatches; i++)
		patch(img, in, k);
	return true;
}

/*
 * The image as a segment of mode `mode` (none when it is empty), named by
 * a state file at path with the token of the library's segment.
 */
static void write_segment(const struct image *img, const char *path,
			  mode_t mode)
{
	char text[128];
	int id = 2147483000; /* no such segment */
	void *map;

	if (img->size > 0 &&
	    (forged = shmget(IPC_PRIVATE, img->size, IPC_CREAT | mode)) >= 0) {
		map = shmat(forged, NULL, 0);
		fuzz_check(map != (void *)-1, "shmat a forged segment");
		memcpy(map, img->bytes, img->size);
		shmdt(map);
		id = forged;
	}
	snprintf(text, sizeof(text), "replicalb-state 1 shm %d %016llx\n", id,
		 template_token);
	fuzz_check(fuzz_write_file(path, text, strlen(text)) == 0,
		   "write the state file");
}

/*
 * The image as a memfd of this process (sealed against truncation, or
 * not), named by a line of version 3 at path; or, gone, a line naming a
 * descriptor that this process does not have.
 */
static void write_memfd(const struct image *img, const char *path, bool sealed,
			bool gone)
{
	const unsigned seals =
		F_SEAL_GROW | F_SEAL_SEAL | (sealed ? F_SEAL_SHRINK : 0);
	unsigned long long ino = 1;
	struct stat st;
	char text[160];
	int fd = 1023;

	if (!gone) {
		forged_memfd =
			memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		fuzz_check(forged_memfd >= 0 &&
				   write(forged_memfd, img->bytes, img->size) ==
					   (ssize_t)img->size &&
				   fcntl(forged_memfd, F_ADD_SEALS, seals) ==
					   0 &&
				   fstat(forged_memfd, &st) == 0,
			   "a memfd of the image");
		fd = forged_memfd;
		ino = (unsigned long long)st.st_ino;
	}
	snprintf(text, sizeof(text),
		 "replicalb-state 3 memfd %d %d %llu %016llx %016llx\n",
		 (int)getpid(), fd, ino, template_token, template_ns);
	fuzz_check(fuzz_write_file(path, text, strlen(text)) == 0,
		   "write a state file naming a memfd");
}

/* Put the image at cluster k's state file path, as `kind` says. */
static void write_state(const struct image *img, size_t k, uint8_t kind)
{
	char path[PATH_MAX], other[PATH_MAX];

	state_path(path, sizeof(path), state_dir, k);
	switch (kind % 10) {
	case 0:
		return; /* no file: the library creates it */
	case 1:
	case 2:
		write_segment(img, path, kind % 7 == 2 ? 0666 : 0600);
		return;
	case 3:
		/* A symlink to a good file: refused all the same. */
		state_path(other, sizeof(other), aside_dir, k);
		write_segment(img, other, 0600);
		fuzz_check(symlink(other, path) == 0, "symlink");
		return;
	case 4:
		fuzz_check(mkdir(path, 0700) == 0, "mkdir in place of a file");
		return;
	case 5:
		fuzz_check(mkfifo(path, 0600) == 0, "mkfifo");
		return;
	case 6:
		fuzz_check(fuzz_write_file(path, img->bytes,
					   img->size < 80 ? img->size : 80) ==
				   0,
			   "write a state file of raw text");
		return;
	default:
		write_memfd(img, path, kind % 10 == 7, kind % 10 == 9);
		return;
	}
}

/* ------------------------------------------------------------------ */
/* Operations */

struct run {
	struct rlb_snapshot *a, *b;
	int64_t now;
	size_t file; /* cluster whose file the input wrote */
};

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (!__builtin_add_overflow(a, b, &r))
		return r;
	return b > 0 ? INT64_MAX : INT64_MIN;
}

/* The time of an operation: the clock moves on, jumps, or is odd. */
static int64_t pick_time(struct run *r, struct fuzz_input *in,
			 const struct rlb_cluster *c)
{
	static const int64_t odd[] = {0, 1, -1, INT64_MAX, INT64_MIN};
	uint8_t how = fuzz_u8(in) % 6;

	switch (how) {
	case 0:
		break;
	case 1:
		r->now = sat_add(r->now, fuzz_u8(in));
		break;
	case 2:
		r->now = sat_add(r->now, (int64_t)fuzz_u16(in) * 60);
		break;
	case 3:
		return (int64_t)fuzz_u64(in);
	case 4:
		return sat_add(rlb_health_decay_time(c), (int8_t)fuzz_u8(in));
	default:
		return odd[fuzz_u8(in) % 5];
	}
	return r->now;
}

static void check_order(const struct rlb_selection *sel)
{
	uint8_t seen[RLB_MAX_REPLICAS] = {0};

	for (size_t k = 0; k < sel->n; k++) {
		fuzz_check(sel->order[k] < sel->n, "selection index in range");
		fuzz_check(!seen[sel->order[k]], "selection without repeats");
		seen[sel->order[k]] = 1;
	}
}

static void select_once(struct rlb_cluster *c, bool peek, int64_t now)
{
	struct rlb_selection *sel = rlb_selection_new(c->nreplicas);

	if (!sel)
		return;
	rlb_select(c, peek, now, sel);
	check_order(sel);
	for (size_t i = 0; i < c->nreplicas && peek; i++) {
		fuzz_check(sel->errors[i] == rlb_health_errors(c, i, now, true),
			   "peek shows the decayed errors");
	}
	free(sel);
}

static void queries(struct rlb_cluster *c, size_t i, int64_t now)
{
	uint64_t e = rlb_health_errors(c, i, now, false);
	uint64_t s = rlb_health_slowdowns(c, i, now, false);

	fuzz_check(rlb_health_errors(c, i, now, true) <= e,
		   "decay never adds errors");
	fuzz_check(rlb_health_slowdowns(c, i, now, true) <= s,
		   "decay never adds slowdowns");
	fuzz_check(rlb_health_recovery_seconds(c, i, now) >= 0,
		   "recovery is not negative");
	(void)rlb_health_rr_peek(c);
	(void)rlb_health_path(c->health);
}

/* Write bytes into cluster k's live segment, as another process could. */
static void poke(size_t k, struct fuzz_input *in)
{
	char path[PATH_MAX], text[128] = "";
	uint8_t buf[16];
	size_t off = fuzz_u32(in) % file_size, n = fuzz_u8(in) % 17;
	struct shmid_ds ds;
	struct stat st;
	void *map;
	int fd, id, pid;

	fuzz_bytes(in, buf, n);
	state_path(path, sizeof(path), state_dir, k);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	if (read(fd, text, sizeof(text) - 1) > 0 &&
	    sscanf(text, "replicalb-state %*d shm %d", &id) == 1 &&
	    shmctl(id, IPC_STAT, &ds) == 0 && off + n <= ds.shm_segsz &&
	    (map = shmat(id, NULL, 0)) != (void *)-1) {
		memcpy((char *)map + off, buf, n);
		shmdt(map);
	} else if (sscanf(text, "replicalb-state 3 memfd %d %d", &pid, &id) ==
		   2) {
		/* A memfd: written through its holder, within its size. */
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, id);
		close(fd);
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    off + n <= (size_t)st.st_size)
			fuzz_check(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n,
				   "poke a memfd");
		if (fd < 0)
			return;
	}
	close(fd);
}

/* Move cluster k's file out of the way, as a corrupt file is. */
static void set_aside(size_t k)
{
	char path[PATH_MAX], aside[PATH_MAX];
	struct stat st;

	state_path(path, sizeof(path), state_dir, k);
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return;
	snprintf(aside, sizeof(aside), "%s.corrupt-fuzz", path);
	rename(path, aside);
}

/* Entries of the scratch directory that use_state_dir() makes. */
static const char *const odd_dirs[] = {"new", "open", "link", "file"};

/*
 * The state directory the configs of this input name: 0 the one the
 * file was written to, 1 a missing one (made, parents too), 2 one
 * writable by the group, 3 a symlink to the real one, 4 a regular file.
 */
static void use_state_dir(unsigned how)
{
	char path[PATH_MAX];

	if (how == 0) {
		snprintf(cfg_state_dir, sizeof(cfg_state_dir), "%s", state_dir);
		return;
	}
	fuzz_path(path, sizeof(path), top_dir, odd_dirs[how - 1]);
	switch (how) {
	case 1:
		fuzz_path(cfg_state_dir, sizeof(cfg_state_dir), path,
			  "sub/dir");
		return;
	case 2:
		fuzz_check(mkdir(path, 0700) == 0 && chmod(path, 0770) == 0,
			   "a group-writable directory");
		break;
	case 3:
		fuzz_check(symlink(state_dir, path) == 0,
			   "a directory symlink");
		break;
	default:
		fuzz_check(fuzz_write_file(path, "", 0) == 0, "a file");
		break;
	}
	snprintf(cfg_state_dir, sizeof(cfg_state_dir), "%s", path);
}

static void remove_odd_dirs(void)
{
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(odd_dirs) / sizeof(*odd_dirs); i++) {
		fuzz_path(path, sizeof(path), top_dir, odd_dirs[i]);
		if (unlink(path) != 0 && errno != ENOENT) {
			fuzz_empty_dir(path);
			rmdir(path);
		}
	}
}

/* The order of design.md §3, field by field, for qsort(). */
static int key_cmp(const void *pa, const void *pb)
{
	const struct rlb_select_key *a = pa, *b = pb;

#define CMP(f)                                                                 \
	if (a->f != b->f)                                                      \
		return a->f < b->f ? -1 : 1;
	CMP(errors)
	CMP(slowdowns)
	CMP(priority)
	CMP(policy_prio)
	CMP(random)
	CMP(index)
#undef CMP
	return 0;
}

/*
 * Keys from the input, sorted by rlb_select_sort() and by qsort(): the
 * same sequence. Few distinct values (many ties, the packed radix sort)
 * or raw ones (extremes, keys too wide to pack).
 */
static void sort_keys(struct fuzz_input *in)
{
	size_t n = fuzz_u16(in) % 300;
	bool raw = fuzz_u8(in) & 1;
	struct rlb_select_key *k = calloc(n + 1, sizeof(*k));
	struct rlb_select_key *want = calloc(n + 1, sizeof(*k));

	if (!k || !want)
		goto out_free;
	for (size_t i = 0; i < n; i++) {
		if (raw) {
			k[i].errors = fuzz_u64(in);
			k[i].slowdowns = fuzz_u64(in);
			k[i].priority = (int64_t)fuzz_u64(in);
			k[i].policy_prio = (int64_t)fuzz_u64(in);
			k[i].random = fuzz_u32(in);
			k[i].index = fuzz_u32(in);
		} else {
			uint8_t a = fuzz_u8(in), b = fuzz_u8(in);

			k[i].errors = a & 3;
			k[i].slowdowns = a >> 2 & 1;
			k[i].priority = (a >> 3 & 3) - 1;
			k[i].policy_prio =
				b & 0x80 ? INT64_MIN + (b & 7) : b & 7;
			k[i].random = b >> 3 & 3;
			k[i].index = a & 0x80 ? (uint32_t)i : a >> 5;
		}
	}
	memcpy(want, k, n * sizeof(*k));
	qsort(want, n, sizeof(*want), key_cmp);
	rlb_select_sort(k, n);
	fuzz_check(memcmp(k, want, n * sizeof(*k)) == 0,
		   "rlb_select_sort sorts as qsort does");
out_free:
	free(k);
	free(want);
}

static void operate(struct run *r, struct fuzz_input *in)
{
	uint8_t op = fuzz_u8(in) % 14, sel = fuzz_u8(in);
	struct rlb_snapshot *snap = (sel & 0x80) && r->b ? r->b : r->a;
	struct rlb_cluster *c = &snap->cfg->clusters[sel % NCLUSTERS];
	size_t i = fuzz_u8(in) % c->nreplicas;
	int64_t now = pick_time(r, in, c);
	uint64_t n;

	switch (op) {
	case 0:
	case 1:
		select_once(c, op == 1, now);
		break;
	case 2:
	case 3:
		n = fuzz_u8(in) == 0xff ? fuzz_u64(in) : 1;
		if (op == 2)
			rlb_health_add_errors(c, i, n, now);
		else
			rlb_health_add_slowdowns(c, i, n, now);
		break;
	case 4:
		rlb_health_decay(c, now);
		break;
	case 5:
		if (sel & 0x40)
			i = SIZE_MAX;
		rlb_health_reset(c, i);
		for (size_t j = 0; j < c->nreplicas; j++) {
			if (i != SIZE_MAX && j != i)
				continue;
			fuzz_check(rlb_health_errors(c, j, now, false) == 0 &&
					   rlb_health_slowdowns(c, j, now,
								false) == 0,
				   "reset zeroes");
		}
		break;
	case 6:
		queries(c, i, now);
		break;
	case 7:
		poke(sel % NCLUSTERS, in);
		break;
	case 8:
		if (r->b) {
			rlb_snapshot_put(r->b);
			r->b = NULL;
		} else {
			r->b = attach(text_b, sel & 1);
		}
		break;
	case 9:
		set_aside(sel % NCLUSTERS);
		break;
	case 10:
		rlb_health_attach_all(r->a->cfg, RLB_STATE_COUNT, sel & 1);
		break;
	case 11:
		sort_keys(in);
		break;
	case 12:
		/* remove-state while the clusters are in use. */
		(void)rlb_health_remove_state(r->a->cfg, sel & 1, NULL);
		break;
	default:
		(void)rlb_health_decay_time(c);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = {data, size};
	struct run r = {.now = START_TIME};
	struct image img = {0};
	uint8_t kind, flags;

	if (!cfg_a) {
		struct rlb_diag diag = {0};

		if (rlb_config_parse_string(text_a, "a", &cfg_a, &diag) != 0 ||
		    rlb_config_parse_string(text_b, "b", &cfg_b, &diag) != 0)
			exit(1);
	}
	r.file = fuzz_u8(&in) % NCLUSTERS;
	kind = fuzz_u8(&in);
	if (!build_image(&img, &in, r.file))
		return 0;
	write_state(&img, r.file, kind);
	free(img.bytes);
	flags = fuzz_u8(&in);
	use_state_dir((flags >> 1) % 5);

	r.a = attach(text_a, flags & 1);
	if (r.a) {
		for (int k = 0; k < MAX_OPS && in.n > 0; k++)
			operate(&r, &in);
		/* Every cluster still selects after all that. */
		for (size_t k = 0; k < NCLUSTERS; k++)
			select_once(&r.a->cfg->clusters[k], false, r.now);
	}
	rlb_snapshot_put(r.b);
	rlb_snapshot_put(r.a);
	/* Segments outlive their state files: remove this input's. */
	rlb_health_remove_state(
		&(struct rlb_config){.state_dir = cfg_state_dir}, true, NULL);
	rlb_health_remove_state(&(struct rlb_config){.state_dir = state_dir},
				true, NULL);
	if (forged >= 0)
		shmctl(forged, IPC_RMID, NULL);
	forged = -1;
	if (forged_memfd >= 0)
		close(forged_memfd);
	forged_memfd = -1;
	fuzz_remove_own_segments();
	fuzz_empty_dir(state_dir);
	fuzz_empty_dir(aside_dir);
	remove_odd_dirs();
	return 0;
}
