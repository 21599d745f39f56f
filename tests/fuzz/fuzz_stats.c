// SPDX-License-Identifier: MIT
/*
 * fuzz suite: libFuzzer harness for the stats segment reader
 * (workers/stats.c: stats_hdr_parse() through stats_open_fd(), and
 * pc_stats_read_worker(), pc_stats_read_conn(), pc_stats_owner(),
 * pc_stats_hist_percentile() on what they return), the code pollcore-stat
 * runs on segments anyone may have written.
 *
 * An input describes a file (a memfd) and what happens to it:
 *  - byte 0 even: the rest of the input is the whole file;
 *  - byte 0 odd: a valid segment of (byte 1 % 4) workers and (byte 2 % 5)
 *    slots each, built here from the layout in pollcore/stats.h, then
 *    edits of 6 bytes each: [op % 4][args]:
 *      0: byte at (u24 offset % length) = arg byte
 *      1: 32-bit word (u8 % 58) of the header's first 232 bytes = u32
 *      2: length = u24 (the memfd zero-fills what it grows)
 *      3: the reader opens here: later edits happen while it is open.
 * Each result is checked against an oracle written from the format, not
 * from the parser:
 *  - open accepts exactly the files whose header has the magic, version 5,
 *    the three sizes, at most 4096 workers and 2^24 slots, the offsets and
 *    size of the creator's layout, a size within the file and a positive
 *    pid; -EAGAIN for an empty file or no magic yet; -EPROTO otherwise;
 *    then the header is the file's, with comm and devices terminated;
 *  - a worker block or slot read gives -EINVAL beyond the header's counts,
 *    -EPROTO when the file (as it is now) ends before it, -EAGAIN for an
 *    odd seq (the wait is 0 here), -ENOENT for a free slot, and otherwise
 *    exactly the file's bytes with the name or peer terminated;
 *  - percentiles of any histogram read are at most its max (0 when empty).
 * A property that fails aborts, which libFuzzer reports with the input.
 */
#include "stats_pvt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define PROP(cond, ...)                                                          \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_stats: property failed: %s: ", #cond); \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
			abort();                                                 \
		}                                                                \
	} while (0)

#define MAX_FILE (1u << 20)
#define WS	 sizeof(struct pc_stats_worker)
#define CS	 sizeof(struct pc_stats_conn)

static uint8_t file[MAX_FILE];	/* what the memfd holds */
static size_t flen;
static int fd = -1;

static void quiet(enum pc_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	pc_log_set_sink(quiet, NULL);
	stats_read_wait_ns = 0;
	return 0;
}

static uint32_t ld(const uint8_t *p, unsigned int bytes)
{
	uint32_t v = 0;

	while (bytes--)
		v = v << 8 | p[bytes];
	return v;
}

static void put(size_t off, const void *src, size_t len)
{
	memcpy(file + off, src, len);
	PROP(pwrite(fd, src, len, (off_t)off) == (ssize_t)len, "pwrite");
}

static void resize(size_t len)
{
	if (len < flen)
		memset(file + len, 0, flen - len);
	flen = len;
	PROP(ftruncate(fd, (off_t)len) == 0, "ftruncate");
}

static uint64_t page_up(uint64_t x)
{
	return (x + 4095) / 4096 * 4096;
}

/* A valid segment of @nw workers with @ns slots each, as the creator makes it. */
static void build(unsigned int nw, unsigned int ns)
{
	static struct pc_stats_hdr h;
	static struct pc_stats_worker w;
	struct pc_stats_conn c;
	unsigned int k, i;

	memset(&h, 0, sizeof(h));
	h.magic = PC_STATS_MAGIC;
	h.version = 5;
	h.hdr_size = 4096;
	h.worker_size = WS;
	h.conn_size = CS;
	h.nworkers = nw;
	h.conn_slots = ns;
	h.worker_off = 4096;
	h.conn_off = 4096 + nw * WS;
	h.size = page_up(h.conn_off + (uint64_t)nw * ns * CS);
	h.pid = getpid();
	h.state = PC_STATS_STATE_LIVE;
	h.engine = 1;
	strcpy(h.comm, "fuzz");
	strcpy(h.devices, "fz0");
	resize(0);
	resize(h.size);
	put(0, &h, sizeof(h));
	for (k = 0; k < nw; k++) {
		memset(&w, 0, sizeof(w));
		w.publishes = 1;
		snprintf(w.st.name, sizeof(w.st.name), "pc-w%u-fz0", k);
		w.rpc.count = 3;
		w.rpc.max_ns = 5000;
		w.rpc.bucket[pc_stats_hist_bucket(4000)] = 3;
		put(4096 + k * WS, &w, sizeof(w));
	}
	for (i = 0; i < nw * ns; i++) {
		memset(&c, 0, sizeof(c));
		c.state = i % 2 ? PC_STATS_CONN_FREE : PC_STATS_CONN_UP;
		c.worker = (uint16_t)(i / (ns ? ns : 1));
		snprintf(c.peer, sizeof(c.peer), "10.0.0.%u", i);
		put(h.conn_off + i * CS, &c, sizeof(c));
	}
}

/* The oracle for open: what it must return for the file as it is. */
static int expect_open(struct pc_stats_hdr *want)
{
	uint64_t coff, size, slots;

	if (flen == 0)
		return -EAGAIN;
	if (flen < 8)
		return -EPROTO;
	memcpy(want, file, flen < sizeof(*want) ? flen : sizeof(*want));
	if (want->magic == 0)
		return -EAGAIN;
	if (flen < sizeof(*want) || want->magic != PC_STATS_MAGIC || want->version != 5 ||
	    want->hdr_size != 4096 || want->worker_size != WS || want->conn_size != CS)
		return -EPROTO;
	slots = (uint64_t)want->nworkers * want->conn_slots;
	if (want->nworkers > 4096 || slots > (1u << 24))
		return -EPROTO;
	coff = 4096 + (uint64_t)want->nworkers * WS;
	size = page_up(coff + slots * CS);
	if (want->worker_off != 4096 || want->conn_off != coff || want->size != size ||
	    size > flen || want->pid <= 0)
		return -EPROTO;
	want->comm[sizeof(want->comm) - 1] = 0;
	want->devices[sizeof(want->devices) - 1] = 0;
	return 0;
}

/* The oracle for a block read at @off of @len bytes (seq first). */
static int expect_block(uint64_t off, size_t len)
{
	uint32_t seq;

	if (off + 4 > flen)
		return -EPROTO;
	memcpy(&seq, file + off, 4);
	if (seq & 1)
		return -EAGAIN;
	if (off + len > flen)
		return -EPROTO;
	return 0;
}

static void check_hist(const struct pc_stats_hist *h)
{
	static const double ps[] = { 0.0001, 0.5, 0.99, 0.999, 1.0 };
	unsigned int i;

	for (i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t v = pc_stats_hist_percentile(h, ps[i]);

		PROP(h->count ? v <= h->max_ns : v == 0, "p%g = %llu, max %llu, count %llu", ps[i],
		     (unsigned long long)v, (unsigned long long)h->max_ns,
		     (unsigned long long)h->count);
	}
}

static void read_all(struct pc_stats *s, const struct pc_stats_hdr *h)
{
	static struct pc_stats_worker w, ww;
	struct pc_stats_conn c, cw;
	uint64_t slots = (uint64_t)h->nworkers * h->conn_slots, i;
	unsigned int k;
	int ret, want;

	for (k = 0; k <= h->nworkers && k < 8; k++) {
		uint64_t off = h->worker_off + (uint64_t)k * WS;

		ret = pc_stats_read_worker(s, k, &w);
		want = k >= h->nworkers ? -EINVAL : expect_block(off, WS);
		PROP(ret == want, "worker %u: %d, expected %d (file %zu bytes)", k, ret, want, flen);
		if (ret)
			continue;
		memcpy(&ww, file + off, WS);
		ww.st.name[sizeof(ww.st.name) - 1] = 0;
		PROP(!memcmp(&w, &ww, WS), "worker %u: not the file's bytes", k);
		check_hist(&w.rpc);
	}
	PROP(pc_stats_read_worker(s, h->nworkers, &w) == -EINVAL, "worker past the count");
	for (i = 0; i <= slots && i < 32; i++) {
		uint64_t off = h->conn_off + i * CS;

		ret = pc_stats_read_conn(s, (unsigned int)i, &c);
		want = i >= slots ? -EINVAL : expect_block(off, CS);
		if (!want) {
			memcpy(&cw, file + off, CS);
			cw.peer[sizeof(cw.peer) - 1] = 0;
			if (cw.state == PC_STATS_CONN_FREE)
				want = -ENOENT;
		}
		PROP(ret == want, "slot %llu: %d, expected %d", (unsigned long long)i, ret, want);
		if (!ret)
			PROP(!memcmp(&c, &cw, CS), "slot %llu: not the file's bytes",
			     (unsigned long long)i);
	}
	if (slots < UINT32_MAX)
		PROP(pc_stats_read_conn(s, (unsigned int)slots, &c) == -EINVAL, "slot past the count");
	ret = (int)pc_stats_owner(s);
	PROP(ret >= PC_STATS_OWNER_LIVE && ret <= PC_STATS_OWNER_ELSEWHERE, "owner %d", ret);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pc_stats_hdr want;
	const struct pc_stats_hdr *h;
	struct pc_stats *s = NULL;
	size_t i = 3;
	int expect, rfd, err = 0;

	if (!size)
		return 0;
	fd = memfd_create("fuzz_stats", MFD_CLOEXEC);
	PROP(fd >= 0, "memfd_create");
	/* resize(0) below clears what the last input left in file[] */
	if (!(data[0] & 1)) {
		resize(0);
		if (size > 1)
			put(0, data + 1, size - 1 > MAX_FILE ? MAX_FILE : size - 1);
		flen = size - 1 > MAX_FILE ? MAX_FILE : size - 1;
		i = size;
	} else {
		build(size > 1 ? data[1] % 4 : 1, size > 2 ? data[2] % 5 : 2);
	}
	for (;; i += 6) {
		bool done = i + 6 > size;
		const uint8_t *e = data + i;

		if (!s && (done || e[0] % 4 == 3)) {
			/* the reader opens here */
			expect = expect_open(&want);
			rfd = dup(fd);
			PROP(rfd >= 0, "dup");
			s = stats_open_fd(rfd, "fuzz");
			err = s ? 0 : -errno;
			PROP(err == expect, "open: %d, expected %d (file %zu bytes)", err, expect, flen);
			if (!s)
				break;
			h = pc_stats_header(s);
			PROP(!memcmp(h, &want, sizeof(want)), "the header is not the file's");
			PROP(memchr(h->comm, 0, sizeof(h->comm)) && memchr(h->devices, 0, sizeof(h->devices)),
			     "strings not terminated");
			if (done)
				break;
			continue;
		}
		if (done)
			break;
		switch (e[0] % 4) {
		case 0:
			if (flen)
				put(ld(e + 1, 3) % flen, e + 4, 1);
			break;
		case 1:
			if (flen >= 232) {
				uint32_t v = ld(e + 2, 4);

				put((size_t)(e[1] % 58) * 4, &v, 4);
			}
			break;
		case 2:
			resize(ld(e + 1, 3) % MAX_FILE);
			break;
		}
	}
	if (s) {
		/* the header read at open, whatever the file holds now */
		h = pc_stats_header(s);
		PROP(!memcmp(h, &want, sizeof(want)), "the header changed after open");
		read_all(s, h);
		pc_stats_close(s);
	}
	close(fd);
	return 0;
}
