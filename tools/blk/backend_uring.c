// SPDX-License-Identifier: MIT
/*
 * tools/blk/backend_uring.c - pollcore-blk's file and block-device backend:
 * io_uring, one ring per worker, reaped by a poller on that worker.
 *
 * A command's read, write or fdatasync is queued as an SQE from the
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
 */
#include "blk.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define URING_ENTRIES 256
#define REAP_BATCH    64

struct ufile {
	int fd;
	bool direct;
	char path[200];
};

struct uwq {
	struct io_uring ring;
	bool ring_up;
	int efd;
	bool efd_dirty;
	struct pc_poller *poller;
	struct ufile *f;
};

static int uring_poll(void *arg)
{
	struct uwq *u = arg;
	struct io_uring_cqe *cqes[REAP_BATCH];
	struct blk_io *ios[REAP_BATCH];
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
			ios[i] = io_uring_cqe_get_data(cqes[i]);
			res[i] = cqes[i]->res;
		}
		io_uring_cq_advance(&u->ring, n);
		for (i = 0; i < n; i++) {
			struct blk_io *io = ios[i];

			if (res[i] >= 0 && io->cmd.opcode != BLK_OP_FLUSH)
				res[i] = (uint32_t)res[i] == io->cmd.len ? 0 : -EIO; /* short */
			blk_io_stored(io, res[i] < 0 ? res[i] : 0);
		}
		work += (int)n;
		u->efd_dirty = true;
	}
	return work;
}

static void uring_submit(struct blk_backend *b, struct blk_wq *wq, struct blk_io *io)
{
	struct uwq *u = wq->be;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	uint64_t off = io->cmd.lba * b->bs;

	if (pc_unlikely(!sqe)) {
		/* more commands than ring entries in one turn: submit what is queued */
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe) {
			blk_io_stored(io, -EBUSY);
			return;
		}
	}
	switch (io->cmd.opcode) {
	case BLK_OP_READ:
		io_uring_prep_read(sqe, u->f->fd, io->stage, io->cmd.len, off);
		break;
	case BLK_OP_WRITE:
		io_uring_prep_write(sqe, u->f->fd, io->stage, io->cmd.len, off);
		break;
	default:
		io_uring_prep_fsync(sqe, u->f->fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data(sqe, io);
}

static void uring_wq_fini(struct blk_backend *b, struct blk_wq *wq)
{
	struct uwq *u = wq->be;

	(void)b;
	if (!u)
		return;
	/* the engine is destroyed: the poller went with it; in-flight SQEs are cancelled */
	if (u->ring_up)
		io_uring_queue_exit(&u->ring);
	if (u->efd >= 0)
		close(u->efd);
	free(u);
	wq->be = NULL;
}

static int uring_wq_init(struct blk_backend *b, struct blk_wq *wq)
{
	struct uwq *u = calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return -ENOMEM;
	u->f = b->priv;
	u->efd = -1;
	wq->be = u;
	ret = io_uring_queue_init(URING_ENTRIES, &u->ring, 0);
	if (ret) {
		fprintf(stderr, PROG " server: worker %u: io_uring_queue_init: %s\n", wq->idx,
			strerror(-ret));
		return ret;
	}
	u->ring_up = true;
	u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->efd < 0) {
		ret = -errno;
		fprintf(stderr, PROG " server: eventfd: %s\n", strerror(errno));
		return ret;
	}
	ret = io_uring_register_eventfd(&u->ring, u->efd);
	if (ret) {
		fprintf(stderr, PROG " server: io_uring_register_eventfd: %s\n", strerror(-ret));
		return ret;
	}
	u->poller = pc_worker_add_poller_fd(wq->pw, uring_poll, u, u->efd);
	if (!u->poller) {
		ret = -errno;
		fprintf(stderr, PROG " server: worker %u: pc_worker_add_poller_fd: %s\n", wq->idx,
			pc_last_error());
		return ret;
	}
	return 0;
}

static void uring_close(struct blk_backend *b)
{
	struct ufile *f = b->priv;

	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
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

int blk_uring_open(struct blk_backend *b, const char *path, uint32_t bs)
{
	static struct ufile f = {.fd = -1};
	const char *why = NULL;
	uint64_t size = 0;
	struct stat st;
	int ret;

	snprintf(f.path, sizeof(f.path), "%s", path);
	f.direct = true;
	f.fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (f.fd < 0 && errno == EINVAL)
		why = "open";
	else if (f.fd >= 0 && (ret = probe_direct(f.fd, bs)) == -EINVAL)
		why = "a read";
	if (why) {
		fprintf(stderr,
			PROG " server: %s: O_DIRECT refused by the file system (%s failed with "
			     "EINVAL); using the page cache (FLUSH still makes writes durable)\n",
			path, why);
		if (f.fd >= 0)
			close(f.fd);
		f.direct = false;
		f.fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (f.fd < 0) {
		ret = -errno;
		fprintf(stderr, PROG " server: --file %s: %s\n", path, strerror(errno));
		return ret;
	}
	if (fstat(f.fd, &st)) {
		ret = -errno;
		goto fail;
	}
	if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(f.fd, BLKGETSIZE64, &size)) {
			ret = -errno;
			goto fail;
		}
	} else {
		fprintf(stderr, PROG " server: --file %s: neither a regular file nor a block device\n",
			path);
		ret = -EINVAL;
		goto fail_quiet;
	}
	b->name = "uring";
	snprintf(b->desc, sizeof(b->desc), "%s %s (%s, io_uring)",
		 S_ISBLK(st.st_mode) ? "block device" : "file", path,
		 f.direct ? "O_DIRECT" : "page cache");
	b->size = size / bs * bs;
	b->bs = bs;
	b->wq_init = uring_wq_init;
	b->wq_fini = uring_wq_fini;
	b->submit = uring_submit;
	b->close = uring_close;
	b->priv = &f;
	return 0;
fail:
	fprintf(stderr, PROG " server: --file %s: %s\n", path, strerror(-ret));
fail_quiet:
	close(f.fd);
	f.fd = -1;
	return ret;
}
