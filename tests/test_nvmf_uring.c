// SPDX-License-Identifier: MIT
/*
 * unit suite, white-box: tools/nvmf/backend_uring.c (the file backend of
 * pollcore-nvmf) on a real io_uring and a real file, with
 * the worker's poller stubbed: the test runs the backend's poller itself
 * until an operation's done() comes. The backend's file is opened as
 * pollcore-nvmf opens it, in the build directory (ext4 or xfs: both
 * fallocate modes), and each ZEROES / DISCARD method is forced through the
 * file's step, so each is checked whatever the file system would pick:
 *  - ZEROES and DISCARD with FUA have made their range durable before
 *    done(): an fdatasync step completed after the method and before
 *    done(), exactly one; without FUA, none;
 *  - the range reads back as zeroes, the bytes around it are untouched;
 *  - the caller's bio (op, flags) is as it gave it: pollcore-nvmf names
 *    the op in its error messages and resubmits it for the next range;
 *  - FLUSH completes one fdatasync step; a FUA WRITE none (RWF_DSYNC).
 */
#include "../tools/nvmf/backend_uring.c"

#include "pc_test.h"

#include <poll.h>

/* --- stubs: the worker's poller registry and the library's error text --------------- */

static pc_poller_fn stub_fn;
static void *stub_arg;
static int stub_fd = -1;
static char stub_poller; /* its address is the handle */

struct pc_poller *pc_worker_add_poller_fd(struct pc_worker *w, pc_poller_fn fn, void *arg, int fd)
{
	(void)w;
	stub_fn = fn;
	stub_arg = arg;
	stub_fd = fd;
	return (struct pc_poller *)&stub_poller;
}

const char *pc_last_error(void)
{
	return "stub";
}

/* --- the backend on a file ------------------------------------------------------------ */

#define BS	 4096u
#define FILE_LEN (8u << 20)
/* a range of more than ZBUF_SIZE: Z_WRITE takes two steps */
#define R_OFF (3u * BS)
#define R_LEN (ZBUF_SIZE + 5u * BS)

static struct blk_backend be;
static void *wq;
static char path[512];
static int tfd = -1; /* the test's own view of the file */

static unsigned int dones;
static int done_res;
static uint64_t fsyncs_at_done;

static struct uwq *uq(void)
{
	return wq;
}

static void on_done(struct blk_bio *bio, int res)
{
	(void)bio;
	dones++;
	done_res = res;
	fsyncs_at_done = uq()->fsyncs;
}

static void setup(void)
{
	const char *dir = pc_test_env("PC_BUILD_ROOT", ".");
	int fd;

	snprintf(path, sizeof(path), "%s/test_nvmf_uring.XXXXXX", dir);
	fd = mkstemp(path);
	ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	ck_assert_int_eq(ftruncate(fd, FILE_LEN), 0);
	/* the fallocate methods are the point: a file system without them cannot test them */
	ck_assert_msg(!fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0, BS) &&
			  !fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, BS),
		      "%s: the file system refuses a fallocate mode (%s): this test needs one "
		      "with ZERO_RANGE and PUNCH_HOLE (ext4, xfs) under PC_BUILD_ROOT",
		      path, strerror(errno));
	close(fd);
	tfd = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(tfd, 0);
	memset(&be, 0, sizeof(be));
	ck_assert_int_eq(blk_uring_open(&be, "test_nvmf_uring", path, BS), 0);
	unlink(path); /* both descriptors are open: nothing is left behind, failed or not */
	ck_assert_uint_eq(be.size, FILE_LEN);
	stub_fn = NULL;
	ck_assert_int_eq(be.wq_init(&be, NULL, 0, &wq), 0);
	ck_assert_ptr_nonnull(stub_fn);
	ck_assert_ptr_eq(stub_arg, wq);
	dones = 0;
}

static void teardown(void)
{
	be.wq_fini(&be, wq);
	be.close(&be);
	close(tfd);
}

/* Submits @bio and runs the poller, sleeping on its fd, until done() (10 s at most). */
static void run(struct blk_bio *bio)
{
	uint64_t end = pc_test_now_ms() + 10000;
	struct pollfd pfd = {.fd = stub_fd, .events = POLLIN};
	unsigned int before = dones;
	int i;

	bio->done = on_done;
	be.submit(&be, wq, bio);
	while (dones == before) {
		ck_assert_int_ge(stub_fn(stub_arg), 0);
		if (dones != before)
			break;
		ck_assert_msg(pc_test_now_ms() < end, "the operation did not complete in 10 s");
		poll(&pfd, 1, 100);
	}
	/* exactly once: nothing more comes for it */
	for (i = 0; i < 5; i++) {
		ck_assert_int_ge(stub_fn(stub_arg), 0);
		poll(&pfd, 1, 10);
	}
	ck_assert_uint_eq(dones, before + 1);
	ck_assert_int_eq(io_uring_sq_ready(&uq()->ring), 0);
	ck_assert_int_eq(io_uring_cq_ready(&uq()->ring), 0);
}

static void fill(uint8_t *p, size_t len, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)((off + i) * 131u + 7u) | 1u; /* never 0 */
}

/* The file's bytes: [R_OFF, R_OFF + R_LEN) zeroes when @zeroed, the pattern elsewhere. */
static void check_file(bool zeroed)
{
	uint8_t *got = malloc(FILE_LEN), *want = malloc(FILE_LEN);

	ck_assert_ptr_nonnull(got);
	ck_assert_ptr_nonnull(want);
	ck_assert_int_eq(pread(tfd, got, FILE_LEN, 0), FILE_LEN);
	fill(want, FILE_LEN, 0);
	if (zeroed)
		memset(want + R_OFF, 0, R_LEN);
	ck_assert_msg(!memcmp(got, want, FILE_LEN),
		      "the file's bytes differ from what they should be");
	free(got);
	free(want);
}

static void write_pattern(void)
{
	uint8_t *p = malloc(FILE_LEN);

	ck_assert_ptr_nonnull(p);
	fill(p, FILE_LEN, 0);
	ck_assert_int_eq(pwrite(tfd, p, FILE_LEN, 0), FILE_LEN);
	ck_assert_int_eq(fsync(tfd), 0);
	free(p);
	check_file(false);
}

static const char *const mname[] = {"ZERO_RANGE", "PUNCH_HOLE", "writing zeroes"};

/* loop index: op (ZEROES, DISCARD) x method (zmethod) x FUA (no, yes) */
START_TEST(test_zeroes_discard_fua_durable)
{
	uint8_t op = _i / 6 ? BLK_BIO_DISCARD : BLK_BIO_ZEROES;
	enum zmethod m = (enum zmethod)(_i / 2 % 3);
	uint8_t flags = _i % 2 ? BLK_BIO_FUA : 0;
	const uint8_t *order = op == BLK_BIO_ZEROES ? zeroes_order : discard_order;
	atomic_uint *step = op == BLK_BIO_ZEROES ? &uq()->f->zstep : &uq()->f->dstep;
	struct blk_bio bio = {.op = op, .flags = flags, .off = R_OFF, .len = R_LEN};
	unsigned int idx = 0;
	uint64_t f0;

	while (order[idx] != m)
		idx++;
	atomic_store(step, idx);
	write_pattern();
	f0 = uq()->fsyncs;
	run(&bio);
	ck_assert_msg(done_res == 0, "%s by %s: %s", op == BLK_BIO_ZEROES ? "ZEROES" : "DISCARD",
		      mname[m], strerror(-done_res));
	/* the method forced is the one that ran: the file system did not refuse it */
	ck_assert_uint_eq(atomic_load(step), idx);
	ck_assert_msg(fsyncs_at_done - f0 == (flags ? 1u : 0u),
		      "%s%s by %s: %" PRIu64 " fdatasync steps completed before done(), want %u",
		      op == BLK_BIO_ZEROES ? "ZEROES" : "DISCARD", flags ? " with FUA" : "",
		      mname[m], fsyncs_at_done - f0, flags ? 1u : 0u);
	ck_assert_uint_eq(uq()->fsyncs, fsyncs_at_done);
	/* the caller's bio is as given */
	ck_assert_uint_eq(bio.op, op);
	ck_assert_uint_eq(bio.flags, flags);
	check_file(true);
}
END_TEST

START_TEST(test_flush_and_fua_write)
{
	struct blk_bio bio = {.op = BLK_BIO_FLUSH};
	uint8_t *buf;
	uint64_t f0;

	write_pattern();
	f0 = uq()->fsyncs;
	run(&bio);
	ck_assert_int_eq(done_res, 0);
	ck_assert_uint_eq(fsyncs_at_done - f0, 1);

	/* a FUA write is RWF_DSYNC itself: no separate step */
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, R_LEN), 0);
	memset(buf, 0, R_LEN);
	bio = (struct blk_bio){
	    .op = BLK_BIO_WRITE, .flags = BLK_BIO_FUA, .buf = buf, .off = R_OFF, .len = R_LEN};
	f0 = uq()->fsyncs;
	run(&bio);
	ck_assert_int_eq(done_res, 0);
	ck_assert_uint_eq(fsyncs_at_done - f0, 0);
	check_file(true);
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("blk_uring");
	TCase *tc = tcase_create("blk_uring");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_zeroes_discard_fua_durable, 0, 12);
	tcase_add_test(tc, test_flush_and_fua_write);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
