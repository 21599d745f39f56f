// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/backend_uring.c - the file and block-device backend (store.h)
 * of pollcore-nvmf: io_uring, one ring per worker and
 * backend, reaped by a poller on that worker.
 *
 * An operation's read, write, fdatasync or fallocate is queued as an SQE from the
 * handler (or poller) that starts it; the worker's poller runs once per
 * loop turn, after the turn's completions were handled, so it submits all
 * SQEs queued in the turn with one io_uring_submit() and reaps the CQEs
 * that arrived, finishing each command on the spot (the RDMA WRITE of a
 * READ goes out in the same turn's doorbell). The ring's eventfd
 * (io_uring_register_eventfd) is the poller's fd: a worker in hybrid idle
 * sleeps on it and wakes when a completion is posted. The poller reads it
 * only on turns that find completions, and once more on the turn after
 * (a completion posted while it reaped has been taken but left the fd
 * readable), so a busy worker's idle turns make no syscall.
 *
 * FLUSH is IORING_OP_FSYNC with IORING_FSYNC_DATASYNC: io_uring does not
 * order it against writes still in flight, but FLUSH promises durability
 * only of acknowledged writes, and a write is acknowledged after its CQE.
 * A read or write that moves less than asked (9p) goes on from where it
 * stopped; one that moves nothing is an error (-EIO). A FUA write carries
 * RWF_DSYNC. ZEROES and DISCARD are fallocate (ZERO_RANGE or PUNCH_HOLE,
 * KEEP_SIZE); where the file system refuses one (EOPNOTSUPP: tmpfs has no
 * ZERO_RANGE, 9p neither), the other is tried, then zeroes are written in
 * 1 MiB steps. The file remembers what failed; each operation keeps the
 * method it was issued with, so that one completing after another moved
 * the file on is judged by its own. A ZEROES or DISCARD with FUA, whichever
 * method did it, then takes an fdatasync step before it completes (fallocate
 * has no RWF_DSYNC); the caller's op and flags are left as given.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define URING_ENTRIES 256
#define REAP_BATCH    64
#define ZBUF_SIZE     (1u << 20) /* zeroes written per step where fallocate cannot */

/* How ZEROES and DISCARD are done, in the order tried: a method the file refuses is not tried again. */
enum zmethod { Z_ZERO_RANGE, Z_PUNCH, Z_WRITE };
static const uint8_t zeroes_order[] = {Z_ZERO_RANGE, Z_PUNCH, Z_WRITE};
static const uint8_t discard_order[] = {Z_PUNCH, Z_ZERO_RANGE, Z_WRITE};
/* bio->step of a ZEROES or DISCARD with FUA whose method succeeded: its fdatasync runs */
#define ZSTEP_FLUSH 0xffu

struct ufile {
	int fd;
	bool direct;
	char path[200];
	atomic_uint zstep, dstep; /* index into zeroes_order / discard_order; only grows */
	void *zbuf;		  /* ZBUF_SIZE zeroes, page aligned */
};

struct uwq {
	struct io_uring ring;
	bool ring_up;
	int efd;
	bool efd_dirty;
	struct pc_poller *poller;
	struct ufile *f;
	const char *prog;
	uint64_t fsyncs; /* fdatasync steps that succeeded (tests/test_nvmf_uring.c reads it) */
};

static struct io_uring_sqe *get_sqe(struct uwq *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (pc_unlikely(!sqe)) {
		/* more operations than ring entries in one turn: submit what is queued */
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

/* The method @bio is being done with: its own step, never the file's, which others may move. */
static enum zmethod zmethod_of(const struct blk_bio *bio)
{
	return bio->op == BLK_BIO_ZEROES ? zeroes_order[bio->step] : discard_order[bio->step];
}

/* Queues @bio's next step (all of it, but for zeroes written in ZBUF_SIZE pieces). */
static void queue_bio(struct uwq *u, struct blk_bio *bio)
{
	struct io_uring_sqe *sqe = get_sqe(u);
	uint64_t n;

	if (pc_unlikely(!sqe)) {
		bio->done(bio, -EBUSY);
		return;
	}
	switch (bio->op) {
	case BLK_BIO_READ: /* from bio->pos on: a short transfer is resumed */
		io_uring_prep_read(sqe, u->f->fd, (uint8_t *)bio->buf + bio->pos,
				   (unsigned int)(bio->len - bio->pos), bio->off + bio->pos);
		break;
	case BLK_BIO_WRITE:
		io_uring_prep_write(sqe, u->f->fd, (uint8_t *)bio->buf + bio->pos,
				    (unsigned int)(bio->len - bio->pos), bio->off + bio->pos);
		if (bio->flags & BLK_BIO_FUA)
			sqe->rw_flags = RWF_DSYNC;
		break;
	case BLK_BIO_ZEROES:
	case BLK_BIO_DISCARD:
		if (bio->step == ZSTEP_FLUSH) {
			io_uring_prep_fsync(sqe, u->f->fd, IORING_FSYNC_DATASYNC);
			break;
		}
		switch (zmethod_of(bio)) {
		case Z_ZERO_RANGE:
			io_uring_prep_fallocate(sqe, u->f->fd,
						FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
						bio->off, bio->len);
			break;
		case Z_PUNCH:
			io_uring_prep_fallocate(sqe, u->f->fd,
						FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						bio->off, bio->len);
			break;
		default:
			n = bio->len - bio->pos < ZBUF_SIZE ? bio->len - bio->pos : ZBUF_SIZE;
			io_uring_prep_write(sqe, u->f->fd, u->f->zbuf, (unsigned int)n,
					    bio->off + bio->pos);
			break;
		}
		break;
	default:
		io_uring_prep_fsync(sqe, u->f->fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data(sqe, bio);
}

/* A CQE for @bio: done, or its next step queued. */
static void bio_step(struct uwq *u, struct blk_bio *bio, int res)
{
	struct ufile *f = u->f;
	atomic_uint *step;
	unsigned int cur;
	uint64_t n;

	switch (bio->op) {
	case BLK_BIO_READ:
	case BLK_BIO_WRITE:
		/* short (a file system that moves less at once, 9p): the rest; nothing at all: EOF */
		if (res > 0 && (bio->pos += (uint64_t)res) < bio->len) {
			queue_bio(u, bio);
			return;
		}
		if (res == 0)
			res = -EIO;
		break;
	case BLK_BIO_ZEROES:
	case BLK_BIO_DISCARD:
		if (bio->step == ZSTEP_FLUSH) { /* the FUA flush: done */
			if (res >= 0)
				u->fsyncs++;
			break;
		}
		if (zmethod_of(bio) == Z_WRITE) {
			n = bio->len - bio->pos < ZBUF_SIZE ? bio->len - bio->pos : ZBUF_SIZE;
			if (res == 0 || (uint64_t)res > n)
				res = -EIO;
			/* short: the next step starts where this one ended */
			if (res > 0 && (bio->pos += (uint64_t)res) < bio->len) {
				queue_bio(u, bio);
				return;
			}
		} else if (res == -EOPNOTSUPP) {
			/* this file refuses the method: the next one, for good */
			step = bio->op == BLK_BIO_ZEROES ? &f->zstep : &f->dstep;
			cur = bio->step;
			/* the file's step moves past this method once, whoever finds out first */
			if (!atomic_compare_exchange_strong(step, &cur, bio->step + 1u) &&
			    cur > bio->step + 1u) {
				bio->step = (uint8_t)cur;
			} else {
				bio->step++;
			}
			bio->pos = 0;
			queue_bio(u, bio);
			return;
		}
		if (res >= 0 && (bio->flags & BLK_BIO_FUA)) {
			/* whichever method did it: durable before done(), like a FUA write */
			bio->step = ZSTEP_FLUSH;
			queue_bio(u, bio);
			return;
		}
		if (res > 0)
			res = 0;
		break;
	default: /* FLUSH */
		if (res >= 0)
			u->fsyncs++;
		break;
	}
	bio->done(bio, res < 0 ? res : 0);
}

static int uring_poll(void *arg)
{
	struct uwq *u = arg;
	struct io_uring_cqe *cqes[REAP_BATCH];
	struct blk_bio *bios[REAP_BATCH];
	int res[REAP_BATCH], work = 0, ret;
	unsigned int n, i;
	uint64_t v;

	if (io_uring_sq_ready(&u->ring)) {
		ret = io_uring_submit(&u->ring);
		if (ret > 0)
			work += ret;
		/* -EAGAIN / -EBUSY: the SQEs stay queued; the next turn tries again */
	}
	if (!io_uring_cq_ready(&u->ring) && !u->efd_dirty)
		return work;
	/* clear first: a completion posted from now on makes the fd readable again */
	if (read(u->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	u->efd_dirty = false;
	for (;;) {
		n = io_uring_peek_batch_cqe(&u->ring, cqes, REAP_BATCH);
		if (!n)
			break;
		/* copy out and advance first: finishing a command may queue and submit more */
		for (i = 0; i < n; i++) {
			bios[i] = io_uring_cqe_get_data(cqes[i]);
			res[i] = cqes[i]->res;
		}
		io_uring_cq_advance(&u->ring, n);
		for (i = 0; i < n; i++)
			bio_step(u, bios[i], res[i]);
		work += (int)n;
		u->efd_dirty = true;
	}
	return work;
}

/* Worker thread: queued now, submitted by this worker's poller at the end of the turn. */
static void uring_submit(struct blk_backend *b, void *wq, struct blk_bio *bio)
{
	struct uwq *u = wq;

	(void)b;
	bio->pos = 0;
	bio->step = (uint8_t)atomic_load_explicit(
		bio->op == BLK_BIO_ZEROES ? &u->f->zstep : &u->f->dstep, memory_order_relaxed);
	queue_bio(u, bio);
}

static void uring_wq_fini(struct blk_backend *b, void *wq)
{
	struct uwq *u = wq;

	(void)b;
	if (!u)
		return;
	/* the engine is destroyed: the poller went with it; in-flight SQEs are cancelled */
	if (u->ring_up)
		io_uring_queue_exit(&u->ring);
	if (u->efd >= 0)
		close(u->efd);
	free(u);
}

static int uring_wq_init(struct blk_backend *b, struct pc_worker *pw, unsigned int idx, void **wq)
{
	struct uwq *u = calloc(1, sizeof(*u));
	int ret;

	*wq = u;
	if (!u)
		return -ENOMEM;
	u->f = b->priv;
	u->prog = b->prog;
	u->efd = -1;
	ret = io_uring_queue_init(URING_ENTRIES, &u->ring, 0);
	if (ret) {
		fprintf(stderr, "%s: worker %u: io_uring_queue_init: %s\n", b->prog, idx,
			strerror(-ret));
		return ret;
	}
	u->ring_up = true;
	u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->efd < 0) {
		ret = -errno;
		fprintf(stderr, "%s: eventfd: %s\n", b->prog, strerror(errno));
		return ret;
	}
	ret = io_uring_register_eventfd(&u->ring, u->efd);
	if (ret) {
		fprintf(stderr, "%s: io_uring_register_eventfd: %s\n", b->prog, strerror(-ret));
		return ret;
	}
	u->poller = pc_worker_add_poller_fd(pw, uring_poll, u, u->efd);
	if (!u->poller) {
		ret = -errno;
		fprintf(stderr, "%s: worker %u: pc_worker_add_poller_fd: %s\n", b->prog, idx,
			pc_last_error());
		return ret;
	}
	return 0;
}

/* Main thread, after the engine: what was acknowledged is made durable before the file closes. */
static void uring_close(struct blk_backend *b)
{
	struct ufile *f = b->priv;

	if (!f)
		return;
	if (f->fd >= 0) {
		if (fdatasync(f->fd))
			fprintf(stderr, "%s: %s: fdatasync at exit: %s\n", b->prog, f->path,
				strerror(errno));
		close(f->fd);
	}
	free(f->zbuf);
	free(f);
	b->priv = NULL;
}

/* O_DIRECT may open and still fail at the first read (some file systems): try one. */
static int probe_direct(int fd, uint32_t bs)
{
	void *buf;
	ssize_t r;
	int err = 0;

	if (posix_memalign(&buf, 4096, bs))
		return -ENOMEM;
	r = pread(fd, buf, bs, 0);
	if (r < 0)
		err = -errno;
	free(buf);
	return err;
}

/* store.h */
int blk_uring_open(struct blk_backend *b, const char *prog, const char *path, uint32_t bs)
{
	struct ufile *f = calloc(1, sizeof(*f));
	const char *why = NULL;
	uint64_t size = 0;
	struct stat st;
	int ret;

	if (!f || posix_memalign(&f->zbuf, 4096, ZBUF_SIZE)) {
		free(f);
		return -ENOMEM;
	}
	memset(f->zbuf, 0, ZBUF_SIZE);
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->direct = true;
	f->fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (f->fd < 0 && errno == EINVAL)
		why = "open";
	else if (f->fd >= 0 && (ret = probe_direct(f->fd, bs)) == -EINVAL)
		why = "a read";
	if (why) {
		fprintf(stderr,
			"%s: %s: O_DIRECT refused by the file system (%s failed with "
			"EINVAL); using the page cache (FLUSH still makes writes durable)\n",
			prog, path, why);
		if (f->fd >= 0)
			close(f->fd);
		f->direct = false;
		f->fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (f->fd < 0) {
		ret = -errno;
		fprintf(stderr, "%s: --file %s: %s\n", prog, path, strerror(errno));
		goto fail_free;
	}
	if (fstat(f->fd, &st)) {
		ret = -errno;
		goto fail;
	}
	if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(f->fd, BLKGETSIZE64, &size)) {
			ret = -errno;
			goto fail;
		}
	} else {
		fprintf(stderr, "%s: --file %s: neither a regular file nor a block device\n", prog,
			path);
		ret = -EINVAL;
		goto fail_quiet;
	}
	b->name = "uring";
	b->prog = prog;
	snprintf(b->desc, sizeof(b->desc), "%s %s (%s, io_uring)",
		 S_ISBLK(st.st_mode) ? "block device" : "file", path,
		 f->direct ? "O_DIRECT" : "page cache");
	b->size = size / bs * bs;
	b->bs = bs;
	b->wq_init = uring_wq_init;
	b->wq_fini = uring_wq_fini;
	b->submit = uring_submit;
	b->close = uring_close;
	b->mem = NULL; /* bytes on a file: a READ brings them */
	b->priv = f;
	return 0;
fail:
	fprintf(stderr, "%s: --file %s: %s\n", prog, path, strerror(-ret));
fail_quiet:
	close(f->fd);
fail_free:
	free(f->zbuf);
	free(f);
	return ret;
}
