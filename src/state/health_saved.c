/* health_saved.c - the counts of a memfd kept in a file of the state
 * directory (design.md §12.12), so that they outlive the processes that
 * hold the memfd: written by a process that changed them (at once, then
 * at most once a second, and at exit or exec), read by the next process
 * that has to make the state anew. The file is a side file (§5.8): ours,
 * read with pread, replaced by the rename() of a whole new file, never
 * mapped; a damaged one is set aside. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/health_internal.h"

/*
 * "replicalb-saved 1 NAMEHASH WRITTEN T RR N\n", then N lines
 * "KEY ERRORS SLOWDOWNS CONNECTS FAILURES\n" (KEY in hex), then
 * "check HASH\n", HASH rlb_hash64() of every byte before it.
 */
#define SAVED_HEAD	   "replicalb-saved 1 "
#define SAVED_LINE_MAX	   (16 + 4 * 21 + 2)
#define SAVED_HEAD_MAX	   (sizeof(SAVED_HEAD) + 16 + 3 * 21 + 11 + 2)
#define SAVED_CHECK_LEN	   (6 + 16 + 1)
#define SAVED_MAX_BYTES(n) (SAVED_HEAD_MAX + (size_t)(n)*SAVED_LINE_MAX + 32)
#define SAVED_EVERY_MS	   1000

void rlb_saved_name(const char *fname, char *out, size_t outlen)
{
	const char *dot = NULL;

	/* The last ".state": a cluster's name may hold one too. */
	for (const char *p = strstr(fname, ".state"); p;
	     p = strstr(p + 1, ".state"))
		dot = p;
	if (!dot) {
		snprintf(out, outlen, "%s.saved", fname);
		return;
	}
	snprintf(out, outlen, "%.*s.saved%s", (int)(dot - fname), fname,
		 dot + 6);
}

/* Parse an unsigned number of base `base` at *p, then one `end` byte. */
static bool take_u64(const char **p, int base, char end, uint64_t *out)
{
	const char *q = *p;
	uint64_t v = 0;
	int digits = 0;

	for (;; q++, digits++) {
		unsigned d;

		if (*q >= '0' && *q <= '9')
			d = (unsigned)(*q - '0');
		else if (base == 16 && *q >= 'a' && *q <= 'f')
			d = (unsigned)(*q - 'a' + 10);
		else
			break;
		if (v > (UINT64_MAX - d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + d;
	}
	if (digits == 0 || digits > 20 || *q != end)
		return false;
	*out = v;
	*p = q + 1;
	return true;
}

struct saved_entry {
	uint64_t key, errors, slowdowns, connects, failures;
};

struct saved {
	uint64_t name_hash, written, decay_time, rr;
	size_t n;
	struct saved_entry *e; /* n entries, malloc'ed */
};

/* Parse the len bytes of buf (NUL-terminated) into *sv: 0, or -1 (why). */
static int saved_parse(const char *buf, size_t len, struct saved *sv,
		       const char **why)
{
	const char *p = buf, *check;
	uint64_t n, hash;

	*why = "not a saved-counts file";
	if (strlen(buf) != len || len < sizeof(SAVED_HEAD) + SAVED_CHECK_LEN)
		return -1;
	check = buf + len - SAVED_CHECK_LEN;
	if (strncmp(check, "check ", 6) != 0 || buf[len - 1] != '\n' ||
	    (check != buf && check[-1] != '\n'))
		return -1;
	p = check + 6;
	if (!take_u64(&p, 16, '\n', &hash))
		return -1;
	*why = "its check does not match";
	if (hash != rlb_hash64(buf, (size_t)(check - buf), HEALTH_CHECK_SEED))
		return -1;
	*why = "a bad header";
	p = buf;
	if (strncmp(p, SAVED_HEAD, sizeof(SAVED_HEAD) - 1) != 0)
		return -1;
	p += sizeof(SAVED_HEAD) - 1;
	if (!take_u64(&p, 16, ' ', &sv->name_hash) ||
	    !take_u64(&p, 10, ' ', &sv->written) ||
	    !take_u64(&p, 10, ' ', &sv->decay_time) ||
	    !take_u64(&p, 10, ' ', &sv->rr) || !take_u64(&p, 10, '\n', &n) ||
	    n > HEALTH_MAX_SLOTS || sv->decay_time > INT64_MAX)
		return -1;
	sv->n = (size_t)n;
	sv->e = calloc(sv->n ? sv->n : 1, sizeof(*sv->e));
	*why = "out of memory";
	if (!sv->e)
		return -1;
	*why = "a bad line";
	for (size_t i = 0; i < sv->n; i++) {
		struct saved_entry *e = &sv->e[i];

		if (!take_u64(&p, 16, ' ', &e->key) ||
		    !take_u64(&p, 10, ' ', &e->errors) ||
		    !take_u64(&p, 10, ' ', &e->slowdowns) ||
		    !take_u64(&p, 10, ' ', &e->connects) ||
		    !take_u64(&p, 10, '\n', &e->failures) ||
		    e->key <= HEALTH_KEY_DROPPED)
			goto bad;
	}
	if (p != check)
		goto bad;
	return 0;
bad:
	free(sv->e);
	sv->e = NULL;
	return -1;
}

/* A look's read of side file name: the rules of rlb_side_read_at(),
 * nothing set aside. */
static ssize_t read_only(int dirfd, const char *name, char *buf, size_t cap)
{
	const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = rlb_libc()->openat(dirfd, name, flags, 0);
	ssize_t n = -1;
	struct stat st;

	if (fd < 0)
		return -1;
	if (rlb_libc()->fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == rlb_libc()->geteuid() &&
	    !(st.st_mode & (S_IWGRP | S_IWOTH)) && (size_t)st.st_size <= cap)
		n = rlb_libc()->pread(fd, buf, cap, 0);
	rlb_libc()->close(fd);
	return n;
}

bool rlb_saved_seed(struct store *s, const struct rlb_cluster *c, int dirfd,
		    const char *dir, const char *fname, bool look)
{
	size_t cap = SAVED_MAX_BYTES(HEALTH_MAX_SLOTS);
	uint64_t errcap = rlb_table_cap(c);
	char name[NAME_MAX + 1], *buf;
	struct saved sv = {0};
	const char *why;
	ssize_t len;

	if (!look && (s->readonly || !rlb_store_named(s)))
		return false;
	rlb_saved_name(fname, name, sizeof(name));
	buf = malloc(cap + 1);
	if (!buf)
		return false;
	len = look ? read_only(dirfd, name, buf, cap)
		   : rlb_side_read_at(dirfd, dir, name, buf, cap);
	if (len <= 0) {
		free(buf);
		return false;
	}
	buf[len] = '\0';
	if (saved_parse(buf, (size_t)len, &sv, &why) != 0 ||
	    (why = "another cluster's", sv.name_hash != c->name_hash)) {
		if (!look)
			rlb_side_set_aside_at(dirfd, dir, name, why);
		free(sv.e);
		free(buf);
		return false;
	}
	for (size_t i = 0; i < sv.n; i++) {
		const struct saved_entry *e = &sv.e[i];
		long idx = rlb_table_claim(s->map, s->nslots, e->key);
		struct health_slot *slot;

		if (idx < 0)
			continue; /* a smaller table: the rest is decayed */
		slot = &s->map->slots[idx];
		atomic_store(&slot->errors,
			     e->errors < errcap ? e->errors : errcap);
		atomic_store(&slot->slowdowns, e->slowdowns);
		atomic_store(&slot->connects, e->connects);
		atomic_store(&slot->failures, e->failures);
	}
	atomic_store(&s->map->hdr.decay_time, (int64_t)sv.decay_time);
	atomic_store(&s->map->hdr.rr_counter, sv.rr);
	free(sv.e);
	free(buf);
	return true;
}

void rlb_saved_remove(int dirfd, const char *fname)
{
	char name[NAME_MAX + 1];
	int saved = errno;

	rlb_saved_name(fname, name, sizeof(name));
	rlb_libc()->unlinkat(dirfd, name, 0);
	errno = saved;
}

/* The file's text for s into buf (cap bytes): its length, 0 if no fit. */
static size_t saved_format(const struct store *s, char *buf, size_t cap)
{
	const struct health_map *m = s->map;
	size_t n = 0, off;
	int w;

	for (uint32_t i = 0; i < s->nslots; i++)
		if (atomic_load(&m->slots[i].key) > HEALTH_KEY_DROPPED)
			n++;
	w = snprintf(buf, cap,
		     SAVED_HEAD "%016" PRIx64 " %lld %lld %" PRIu64 " %zu\n",
		     m->hdr.name_hash, (long long)rlb_now(),
		     (long long)atomic_load(&m->hdr.decay_time),
		     (uint64_t)atomic_load(&m->hdr.rr_counter), n);
	if (w < 0 || (size_t)w >= cap)
		return 0;
	off = (size_t)w;
	for (uint32_t i = 0; i < s->nslots && n; i++) {
		const struct health_slot *sl = &m->slots[i];
		uint64_t key = atomic_load(&sl->key);

		if (key <= HEALTH_KEY_DROPPED)
			continue;
		n--;
		w = snprintf(buf + off, cap - off,
			     "%016" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			     " %" PRIu64 "\n",
			     key, (uint64_t)atomic_load(&sl->errors),
			     (uint64_t)atomic_load(&sl->slowdowns),
			     (uint64_t)atomic_load(&sl->connects),
			     (uint64_t)atomic_load(&sl->failures));
		if (w < 0 || (size_t)w >= cap - off)
			return 0;
		off += (size_t)w;
	}
	/* A slot claimed meanwhile is saved next time. */
	if (n)
		return 0;
	w = snprintf(buf + off, cap - off, "check %016" PRIx64 "\n",
		     rlb_hash64(buf, off, HEALTH_CHECK_SEED));
	if (w < 0 || (size_t)w >= cap - off)
		return 0;
	return off + (size_t)w;
}

/* Write s's counts beside its name file. */
static void saved_write(struct store *s)
{
	size_t cap = SAVED_MAX_BYTES(s->nslots), len;
	char name[NAME_MAX + 1], why[160], *buf;
	int dirfd, cancel;

	if (!s->dir || !s->fname)
		return;
	cancel = rlb_cancel_off();
	buf = malloc(cap);
	if (!buf)
		goto out;
	len = saved_format(s, buf, cap);
	dirfd = len ? rlb_dir_open(s->dir, why, sizeof(why)) : -1;
	if (dirfd >= 0) {
		rlb_saved_name(s->fname, name, sizeof(name));
		rlb_side_write_at(dirfd, name, buf, len);
		rlb_libc()->close(dirfd);
	}
	free(buf);
out:
	rlb_cancel_restore(cancel);
}

void rlb_saved_changed(struct store *s)
{
	int64_t now = rlb_monotonic_ms();
	int saved;

	atomic_store_explicit(&s->dirty, true, memory_order_relaxed);
	if (now < atomic_load_explicit(&s->save_ms, memory_order_relaxed))
		return;
	atomic_store_explicit(&s->save_ms, now + SAVED_EVERY_MS,
			      memory_order_relaxed);
	atomic_store_explicit(&s->dirty, false, memory_order_relaxed);
	saved = errno;
	saved_write(s);
	errno = saved;
}

void rlb_health_save_changed(const struct rlb_config *cfg)
{
	int saved;

	if (!cfg || !rlb_memfd_any())
		return;
	saved = errno;
	for (size_t i = 0; i < cfg->nclusters; i++) {
		const struct rlb_health *h = cfg->clusters[i].health;
		struct store *s = h ? atomic_load(&h->cur) : NULL;

		if (s && s->kind == STORE_MEMFD && !s->readonly &&
		    atomic_exchange(&s->dirty, false))
			saved_write(s);
	}
	errno = saved;
}
