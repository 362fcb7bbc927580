/* fuzz.h - what the libFuzzer targets share: a private scratch directory
 * and a reader that turns input bytes into choices. */
#ifndef RLB_FUZZ_H
#define RLB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* The rest of an input, consumed from the front. */
struct fuzz_input {
	const uint8_t *p;
	size_t n;
};

/*
 * Fixed-size little-endian values from the front of in; once in is
 * exhausted they read as zero, so every input means something.
 */
uint8_t fuzz_u8(struct fuzz_input *in);
uint16_t fuzz_u16(struct fuzz_input *in);
uint32_t fuzz_u32(struct fuzz_input *in);
uint64_t fuzz_u64(struct fuzz_input *in);
/* Up to n bytes into dst, zero-filled after the end; returns those read. */
size_t fuzz_bytes(struct fuzz_input *in, void *dst, size_t n);
/*
 * A string of at most max bytes: a length byte, then that many bytes
 * (fewer at the end of the input), cut at the first NUL. Malloc'd;
 * NULL only when out of memory.
 */
char *fuzz_string(struct fuzz_input *in, size_t max);

/*
 * This process' scratch directory, made on first use under $TMPDIR (else
 * /tmp) as rlb-fuzz-NAME-XXXXXX and removed with everything in it at
 * exit. Exits the process when it cannot be made.
 */
const char *fuzz_scratch_dir(const char *name);
/*
 * Remove every SysV segment this process made (state segments outlive the
 * state files that name them); also done at exit.
 */
void fuzz_remove_own_segments(void);
/* Remove everything inside dir, keeping dir itself. */
void fuzz_empty_dir(const char *dir);
/* Create or replace file path (mode 0600) with n bytes; 0 or -1. */
int fuzz_write_file(const char *path, const void *data, size_t n);
/* dir/name into buf (size len); exits when it does not fit. */
char *fuzz_path(char *buf, size_t len, const char *dir, const char *name);

/*
 * The library's messages: none, unless FUZZ_LOG names a level ("debug")
 * to see what an input does (a crash's, or a seed's).
 */
void fuzz_log_setup(void);

/* Abort with a message when an invariant of the library is broken. */
void fuzz_check(int ok, const char *what);

#endif /* RLB_FUZZ_H */
