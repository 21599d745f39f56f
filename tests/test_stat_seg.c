// SPDX-License-Identifier: MIT
/*
 * unit suite, white-box (workers/stats.c alone, on the host): stats
 * segments that are not what they should be (issue 21).
 *
 * A reader trusts nothing in a segment (fault 1):
 *  - the header is a private copy taken at open: counts, offsets and
 *    strings changed in the file afterwards change nothing the reader
 *    uses, and an index beyond the copy's counts is -EINVAL;
 *  - a segment truncated while open gives -EPROTO, never SIGBUS;
 *  - crafted headers whose offsets wrap, overlap or pass the file's end,
 *    or whose counts are impossible, are refused (-EPROTO);
 *  - comm, devices, a worker's name and a peer's address come back
 *    NUL-terminated whatever the file holds;
 *  - a FIFO or a symbolic link under a segment's name is no segment
 *    (-EPROTO), and opening one does not block;
 *  - pollcore-stat (the tool, argv[1]) keeps to what it read at open while
 *    the segment changes under it (one worker row per frame), and stops
 *    with exit 1 and a message when the segment is truncated (SIGBUS
 *    before).
 * Segment names (fault 2):
 *  - names squatted by another user's files (pollcore.<pid>, .2 ... .1000)
 *    leave the engine with a segment of its own under an unpredictable
 *    name, which pc_stats_for_each() finds, and remove none of them;
 *  - a live namesake (a segment of pollcore.<our pid> held by a live
 *    process whose pid is ours in its own PID namespace, simulated by a
 *    child) is never unlinked: not by pc_stats_clean(), not by a new
 *    engine, which takes another name;
 *  - the same in a real PID namespace (root only): a segment of pid 1 of
 *    another namespace is live elsewhere, and --clean's call keeps it.
 */
#include "stats_pvt.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pc_test.h"

static const char *tool;	/* pollcore-stat, or NULL */

static bool shm_exists(const char *name)
{
	char path[128];
	struct stat sb;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	return lstat(path, &sb) == 0;
}

static void set_name(struct pc_worker_stats *st, const char *name, size_t len)
{
	memset(st->name, 0, sizeof(st->name));
	memcpy(st->name, name, len);
}

/* A segment of this process: 1 worker that published once, 2 slots, slot 0 up. */
static void own_seg(struct stats_seg *seg, struct wstats *ws, const char *wname, size_t wlen,
		    const char *peer, size_t plen)
{
	struct pc_stats_conn id = { .state = PC_STATS_CONN_UP, .qp_num = 0x11, .peer_port = 7471 };
	struct pc_worker_stats st = { 0 };

	ck_assert_int_eq(stats_seg_create(seg, 1, 2, "fake0"), 0);
	ck_assert_int_eq(wstats_init(ws, stats_seg_worker(seg, 0), stats_seg_conns(seg, 0), 2), 0);
	memcpy(id.peer, peer, plen);
	ck_assert_ptr_nonnull(wstats_slot_open(ws, &id));
	set_name(&st, wname, wlen);
	st.loops = 5;
	wstats_publish(ws, &st, 1000);
}

/* --- fault 1: the reader ----------------------------------------------------------------- */

START_TEST(test_header_is_a_snapshot)
{
	static struct pc_stats_worker w;
	struct stats_seg seg;
	struct wstats ws;
	struct pc_stats_hdr *live;
	const struct pc_stats_hdr *h;
	struct pc_stats_conn c;
	struct pc_stats *r;

	own_seg(&seg, &ws, "pc-w0-fake0", 11, "10.0.0.1", 8);
	r = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(r);
	/* the owner rewrites its header: more workers and slots, other offsets, no NULs */
	live = stats_seg_hdr(&seg);
	live->nworkers = 64;
	live->conn_slots = 100000;
	live->worker_off = 1ull << 40;
	live->conn_off = 8;
	memset(live->comm, 'A', sizeof(live->comm));
	memset(live->devices, 'B', sizeof(live->devices));

	h = pc_stats_header(r);
	ck_assert_uint_eq(h->nworkers, 1);
	ck_assert_uint_eq(h->conn_slots, 2);
	ck_assert_uint_eq(h->worker_off, 4096);
	ck_assert_str_eq(h->comm, "test_stat_seg");
	ck_assert_str_eq(h->devices, "fake0");
	ck_assert_int_eq(pc_stats_read_worker(r, 0, &w), 0);
	ck_assert_str_eq(w.st.name, "pc-w0-fake0");
	ck_assert_uint_eq(w.st.loops, 5);
	ck_assert_int_eq(pc_stats_read_worker(r, 1, &w), -EINVAL);
	ck_assert_int_eq(pc_stats_read_worker(r, 63, &w), -EINVAL);
	ck_assert_int_eq(pc_stats_read_conn(r, 0, &c), 0);
	ck_assert_str_eq(c.peer, "10.0.0.1");
	ck_assert_int_eq(pc_stats_read_conn(r, 1, &c), -ENOENT);
	ck_assert_int_eq(pc_stats_read_conn(r, 2, &c), -EINVAL);
	ck_assert_int_eq(pc_stats_read_conn(r, 99999, &c), -EINVAL);
	pc_stats_close(r);
	/* a reader opening it now refuses it */
	ck_assert_ptr_null(pc_stats_open(seg.name));
	ck_assert_int_eq(errno, EPROTO);
	wstats_free(&ws);
	stats_seg_destroy(&seg);
}
END_TEST

START_TEST(test_truncated_while_open)
{
	static struct pc_stats_worker w;
	struct stats_seg seg;
	struct wstats ws;
	struct pc_stats_conn c;
	struct pc_stats *r;
	int fd;

	own_seg(&seg, &ws, "pc-w0-fake0", 11, "10.0.0.1", 8);
	r = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(pc_stats_read_worker(r, 0, &w), 0);
	fd = shm_open(seg.name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	close(fd);
	ck_assert_int_eq(pc_stats_read_worker(r, 0, &w), -EPROTO);
	ck_assert_int_eq(pc_stats_read_conn(r, 0, &c), -EPROTO);
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_LIVE);
	pc_stats_close(r);
	/* a new reader: shorter than its header says */
	ck_assert_ptr_null(pc_stats_open(seg.name));
	ck_assert_int_eq(errno, EPROTO);
	/* the worker's pages are gone: it must not publish any more (SIGBUS) */
	wstats_free(&ws);
	stats_seg_destroy(&seg);
}
END_TEST

/* Writes @len bytes of @hdr as /dev/shm/@name, extended to @size. */
static void write_shm(const char *name, const void *hdr, size_t len, size_t size)
{
	int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, hdr, len), (ssize_t)len);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

START_TEST(test_crafted_headers)
{
	static struct pc_stats_hdr good, h;
	const uint64_t ws = sizeof(struct pc_stats_worker), cs = sizeof(struct pc_stats_conn);
	struct stats_seg seg;
	struct pc_stats *r;
	char name[64];
	int i;

	ck_assert_int_eq(stats_seg_create(&seg, 1, 2, "fake0"), 0);
	memcpy(&good, seg.base, sizeof(good));
	stats_seg_destroy(&seg);
	snprintf(name, sizeof(name), "pollcore.%d.950", getpid());
	/* the unchanged header is accepted */
	write_shm(name, &good, sizeof(good), good.size);
	r = pc_stats_open(name);
	ck_assert_ptr_nonnull(r);
	pc_stats_close(r);
	for (i = 0; i < 9; i++) {
		h = good;
		switch (i) {
		case 0: /* worker_off + nworkers * worker_size wraps to below conn_off */
			h.conn_slots = 0;
			h.worker_off = (uint64_t)0 - ws + 4096;
			h.conn_off = 4096 + ws;
			h.size = 4096 + ws;
			break;
		case 1: /* conn_off wraps */
			h.conn_off = (uint64_t)0 - 2 * cs + 64;
			break;
		case 2: /* the blocks overlap the header */
			h.worker_off = 0;
			break;
		case 3: /* worker blocks overlap the slots */
			h.conn_off = 4096 + ws / 2;
			break;
		case 4: /* more than the file holds */
			h.size = good.size + 4096;
			break;
		case 5: /* a size past the file, and counts to match */
			h.nworkers = 4096;
			h.conn_off = 4096 + 4096 * ws;
			h.size = h.conn_off + 4096ull * 2 * cs;
			break;
		case 6: /* slots whose count overflows 32 bits */
			h.nworkers = 65536;
			h.conn_slots = 65536;
			break;
		case 7: /* not page-aligned worker blocks */
			h.worker_off = 4104;
			h.conn_off = 4104 + ws;
			break;
		case 8: /* no owner */
			h.pid = 0;
			break;
		}
		write_shm(name, &h, sizeof(h), good.size);
		r = pc_stats_open(name);
		ck_assert_msg(!r, "crafted header %d accepted", i);
		ck_assert_msg(errno == EPROTO, "crafted header %d: errno %d", i, errno);
	}
	shm_unlink(name);
}
END_TEST

START_TEST(test_strings_terminated)
{
	static struct pc_stats_worker w;
	char a[64], d[256], peer[32];
	struct stats_seg seg;
	struct wstats ws;
	struct pc_stats_hdr *live;
	const struct pc_stats_hdr *h;
	struct pc_stats_conn c;
	struct pc_stats *r;

	memset(a, 'C', sizeof(a));
	memset(peer, 'D', sizeof(peer));
	own_seg(&seg, &ws, a, sizeof(w.st.name), peer, sizeof(peer));
	live = stats_seg_hdr(&seg);
	memset(live->comm, 'A', sizeof(live->comm));
	memset(live->devices, 'B', sizeof(live->devices));
	r = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(r);
	h = pc_stats_header(r);
	memset(a, 'A', 15);
	a[15] = 0;
	ck_assert_ptr_nonnull(memchr(h->comm, 0, sizeof(h->comm)));
	ck_assert_uint_eq(strlen(h->comm), 15);
	ck_assert_str_eq(h->comm, a);
	memset(d, 'B', 127);
	d[127] = 0;
	ck_assert_ptr_nonnull(memchr(h->devices, 0, sizeof(h->devices)));
	ck_assert_uint_eq(strlen(h->devices), 127);
	ck_assert_str_eq(h->devices, d);
	ck_assert_int_eq(pc_stats_read_worker(r, 0, &w), 0);
	ck_assert_ptr_nonnull(memchr(w.st.name, 0, sizeof(w.st.name)));
	ck_assert_uint_eq(strlen(w.st.name), sizeof(w.st.name) - 1);
	ck_assert_int_eq(pc_stats_read_conn(r, 0, &c), 0);
	ck_assert_ptr_nonnull(memchr(c.peer, 0, sizeof(c.peer)));
	ck_assert_uint_eq(strlen(c.peer), sizeof(c.peer) - 1);
	pc_stats_close(r);
	wstats_free(&ws);
	stats_seg_destroy(&seg);
}
END_TEST

START_TEST(test_fifo_and_symlink)
{
	char name[64], path[128], target[128];
	struct stats_seg seg;

	snprintf(name, sizeof(name), "pollcore.%d.901", getpid());
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	unlink(path);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	/* no writer: a blocking open would never return */
	ck_assert_ptr_null(pc_stats_open(name));
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(pc_stats_clean(name), -EPROTO);
	ck_assert(shm_exists(name));
	unlink(path);

	/* a link to a real segment is not that segment */
	ck_assert_int_eq(stats_seg_create(&seg, 1, 1, "fake0"), 0);
	snprintf(target, sizeof(target), "/dev/shm/%s", seg.name);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_ptr_null(pc_stats_open(name));
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(pc_stats_clean(name), -EPROTO);
	ck_assert(shm_exists(name));
	unlink(path);
	stats_seg_destroy(&seg);
}
END_TEST

/* --- fault 1: the tool, while the segment changes ---------------------------------------------- */

/* Whether process @pid has /dev/shm/@name open or mapped. */
static bool has_open(pid_t pid, const char *name)
{
	char path[300], buf[4096], want[128];
	struct dirent *de;
	bool found = false;
	FILE *f;
	DIR *d;

	snprintf(want, sizeof(want), "/dev/shm/%s", name);
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	while (d && !found && (de = readdir(d))) {
		char link[128];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid, de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			found = strcmp(link, want) == 0;
		}
	}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	while (f && !found && fgets(buf, sizeof(buf), f))
		found = strstr(buf, want) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* Lines of @file that start with @prefix. */
static int count_lines(const char *file, const char *prefix)
{
	char buf[1024];
	int n = 0;
	FILE *f = fopen(file, "r");

	while (f && fgets(buf, sizeof(buf), f))
		n += strncmp(buf, prefix, strlen(prefix)) == 0;
	if (f)
		fclose(f);
	return n;
}

/* Waits until the tool printed @frames frame headers or exited; true if it still runs. */
static bool wait_frames(pid_t pid, const char *out, const char *head, int frames, int *status)
{
	uint64_t end = pc_test_now_ms() + 30000; /* a safety net, not a measurement */

	while (count_lines(out, head) < frames) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return false;
		ck_assert_msg(pc_test_now_ms() < end, "pollcore-stat printed no frame %d in 30 s", frames);
		usleep(10000);
	}
	return true;
}

static pid_t run_tool(const char *out, const char *err)
{
	char pid[16];
	pid_t child = fork();

	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		snprintf(pid, sizeof(pid), "%d", getppid());
		dup2(o, 1);
		dup2(e, 2);
		execl(tool, tool, pid, "--interval", "0.05", (char *)NULL);
		_exit(127);
	}
	return child;
}

static void tool_changing_segment(bool truncate)
{
	char out[] = "/tmp/test_stat_seg.outXXXXXX", err[] = "/tmp/test_stat_seg.errXXXXXX";
	const uint64_t wsz = sizeof(struct pc_stats_worker);
	struct stats_seg seg;
	struct wstats ws;
	struct pc_stats_hdr *live;
	char head[128], line[512], buf[4096];
	int status = -1, frames, fd, n;
	pid_t child;
	FILE *f;

	if (!tool) {
		printf("SKIP: no pollcore-stat given (built without tools)\n");
		return;
	}
	close(mkstemp(out));
	close(mkstemp(err));
	own_seg(&seg, &ws, "pc-w0-fake0", 11, "10.0.0.1", 8);
	snprintf(head, sizeof(head), "%s: pid %d (test_stat_seg)", seg.name, getpid());
	child = run_tool(out, err);
	/* the tool has read the header and shown a frame: now the segment changes under it */
	ck_assert_msg(wait_frames(child, out, head, 1, &status), "pollcore-stat exited early (%#x)",
		      status);
	ck_assert(has_open(child, seg.name));
	live = stats_seg_hdr(&seg);
	fd = shm_open(seg.name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	if (truncate) {
		ck_assert_int_eq(ftruncate(fd, 4096), 0);
	} else {
		/* 64 workers, in a file long enough for them: its arrays hold one */
		ck_assert_int_eq(ftruncate(fd, (off_t)(4096 + 64 * wsz)), 0);
		live->nworkers = 64;
		live->conn_slots = 0;
		live->conn_off = 4096 + 64 * wsz;
		live->size = 4096 + 64 * wsz;
		memset(live->comm, 'A', sizeof(live->comm));
	}
	close(fd);
	frames = count_lines(out, head);
	if (wait_frames(child, out, head, frames + 2, &status)) {
		ck_assert_int_eq(kill(child, SIGINT), 0);
		ck_assert_int_eq(waitpid(child, &status, 0), child);
	}
	f = fopen(err, "r");
	n = f ? (int)fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n > 0 ? n : 0] = 0;
	if (f)
		fclose(f);
	ck_assert_msg(WIFEXITED(status), "pollcore-stat died of signal %d; stderr: %s",
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0, buf);
	if (truncate) {
		ck_assert_msg(WEXITSTATUS(status) == 1, "exit %d; stderr: %s", WEXITSTATUS(status), buf);
		snprintf(line, sizeof(line),
			 "pollcore-stat: /dev/shm/%s: shorter than its header says (truncated while read); stopped\n",
			 seg.name);
		ck_assert_str_eq(buf, line);
	} else {
		ck_assert_msg(WEXITSTATUS(status) == 0, "exit %d; stderr: %s", WEXITSTATUS(status), buf);
		ck_assert_str_eq(buf, "");
		/* every frame: its header as read at open, and one worker */
		frames = count_lines(out, head);
		ck_assert_int_ge(frames, 3);
		ck_assert_int_eq(count_lines(out, seg.name), frames);
		ck_assert_int_eq(count_lines(out, "worker "), frames);
		ck_assert_int_eq(count_lines(out, "pc-w0-fake0 "), frames);
		ck_assert_int_eq(count_lines(out, "pc-w"), frames);
		ck_assert_int_eq(count_lines(out, "?"), 0);
	}
	unlink(out);
	unlink(err);
	wstats_free(&ws);
	stats_seg_destroy(&seg);
}

START_TEST(test_tool_segment_grows)
{
	tool_changing_segment(false);
}
END_TEST

START_TEST(test_tool_segment_truncated)
{
	tool_changing_segment(true);
}
END_TEST

/* --- fault 2: names ------------------------------------------------------------------------ */

struct found {
	char name[64];
	int n;
};

static void find_cb(const char *name, int pid, void *arg)
{
	struct found *f = arg;

	(void)pid;
	if (!strcmp(name, f->name))
		f->n++;
}

START_TEST(test_squatted_names)
{
	char name[64], prefix[64];
	struct stats_seg seg;
	struct found f = { .n = 0 };
	struct stat sb;
	int n, fd;

	/* another user's files under every name of the old scheme */
	for (n = 1; n <= 1000; n++) {
		if (n == 1)
			snprintf(name, sizeof(name), "pollcore.%d", getpid());
		else
			snprintf(name, sizeof(name), "pollcore.%d.%d", getpid(), n);
		fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, "squatter", 8), 8);
		if (geteuid() == 0)
			ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
		close(fd);
	}
	ck_assert_int_eq(stats_seg_create(&seg, 1, 1, "fake0"), 0);
	snprintf(prefix, sizeof(prefix), "pollcore.%d.", getpid());
	ck_assert_int_eq(strncmp(seg.name, prefix, strlen(prefix)), 0);
	ck_assert_int_gt(atol(seg.name + strlen(prefix)), 1000);
	snprintf(f.name, sizeof(f.name), "%s", seg.name);
	ck_assert_int_ge(pc_stats_for_each(getpid(), find_cb, &f), 1001);
	ck_assert_int_eq(f.n, 1);
	for (n = 1; n <= 1000; n++) {
		char path[128];

		if (n == 1)
			snprintf(path, sizeof(path), "/dev/shm/pollcore.%d", getpid());
		else
			snprintf(path, sizeof(path), "/dev/shm/pollcore.%d.%d", getpid(), n);
		ck_assert_msg(stat(path, &sb) == 0 && sb.st_size == 8, "%s was touched", path);
		unlink(path);
	}
	stats_seg_destroy(&seg);
	ck_assert(!shm_exists(seg.name));
}
END_TEST

/*
 * A live namesake: a child's segment under pollcore.<our pid>, claiming
 * our pid with another start time, as a process that is pid <ours> in
 * another PID namespace sharing /dev/shm would leave it.
 */
START_TEST(test_live_namesake)
{
	char name[48], got[48] = "";
	struct stats_seg seg;
	struct pc_stats *r;
	uint64_t start;
	int ready[2], done[2], status;
	pid_t parent = getpid(), child;

	ck_assert_int_eq(stats_proc_start(parent, &start, NULL), 0);
	snprintf(name, sizeof(name), "pollcore.%d", parent);
	ck_assert(!shm_exists(name));
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(done), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct stats_seg mine;
		struct pc_stats_hdr *h;
		char from[128], to[128];
		char c;

		if (stats_seg_create(&mine, 1, 1, "namesake"))
			_exit(1);
		h = stats_seg_hdr(&mine);
		h->pid = parent;
		h->start_time = start + 12345;
		snprintf(from, sizeof(from), "/dev/shm/%s", mine.name);
		snprintf(to, sizeof(to), "/dev/shm/%s", name);
		if (rename(from, to))
			_exit(2);
		(void)!write(ready[1], "r", 1);
		(void)!read(done[0], &c, 1);
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	ck_assert_int_eq(read(ready[0], got, 1), 1);

	r = pc_stats_open(name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(pc_stats_header(r)->devices, "namesake");
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_ELSEWHERE);
	pc_stats_close(r);
	ck_assert_int_eq(pc_stats_clean(name), -EBUSY);
	ck_assert(shm_exists(name));
	/* our engine: a name of its own; the namesake's stays its own */
	ck_assert_int_eq(stats_seg_create(&seg, 1, 1, "fake0"), 0);
	ck_assert_str_ne(seg.name, name);
	r = pc_stats_open(name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(pc_stats_header(r)->devices, "namesake");
	pc_stats_close(r);
	r = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_LIVE);
	pc_stats_close(r);
	stats_seg_destroy(&seg);

	/* the namesake's process ends: now it is stale, and cleaned */
	ck_assert_int_eq(write(done[1], "d", 1), 1);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* its exit handler removes the name it created, not the one it was renamed to */
	ck_assert(shm_exists(name));
	r = pc_stats_open(name);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_REUSED);
	pc_stats_close(r);
	ck_assert_int_eq(pc_stats_clean(name), 0);
	ck_assert(!shm_exists(name));
	close(ready[0]);
	close(done[1]);
}
END_TEST

/*
 * A real PID namespace with its own /proc (as a container has), sharing
 * /dev/shm: its pid 1 creates pollcore.1; here, pid 1 is another process.
 */
START_TEST(test_pid_namespace)
{
	char name[48] = "";
	struct pc_stats *r;
	int ready[2], done[2], status;
	pid_t child;
	ssize_t n;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(done), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pid_t init;

		close(ready[0]);
		close(done[1]);
		if (unshare(CLONE_NEWPID | CLONE_NEWNS)) {
			(void)!write(ready[1], "SKIP", 5);
			_exit(0);
		}
		init = fork();
		if (init == 0) {
			static struct stats_seg seg;
			char c;

			if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
			    mount("proc", "/proc", "proc", 0, NULL) || getpid() != 1)
				_exit(3);
			if (stats_seg_create(&seg, 1, 1, "otherns"))
				_exit(4);
			(void)!write(ready[1], seg.name, strlen(seg.name) + 1);
			(void)!read(done[0], &c, 1);
			stats_seg_destroy(&seg);
			_exit(0);
		}
		_exit(init > 0 && waitpid(init, &status, 0) == init && WIFEXITED(status) ?
			      WEXITSTATUS(status) : 9);
	}
	close(ready[1]);
	close(done[0]);
	n = read(ready[0], name, sizeof(name) - 1);
	if (n == 5 && !strcmp(name, "SKIP")) {
		printf("SKIP: no PID namespace here (unshare: not root?)\n");
		waitpid(child, &status, 0);
		return;
	}
	ck_assert_msg(n > 0, "the namespace's pid 1 made no segment");
	ck_assert_str_eq(name, "pollcore.1");
	r = pc_stats_open(name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(pc_stats_header(r)->devices, "otherns");
	ck_assert_int_eq(pc_stats_header(r)->pid, 1);
	/* pid 1 here is not its owner, and yet its owner runs */
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_ELSEWHERE);
	pc_stats_close(r);
	ck_assert_int_eq(pc_stats_clean(name), -EBUSY);
	ck_assert(shm_exists(name));
	ck_assert_int_eq(write(done[1], "d", 1), 1);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	ck_assert(!shm_exists(name));
	close(ready[0]);
	close(done[1]);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s = suite_create("stat_seg");
	TCase *tc = tcase_create("stat_seg");

	tool = argc > 1 ? argv[1] : NULL;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_header_is_a_snapshot);
	tcase_add_test(tc, test_truncated_while_open);
	tcase_add_test(tc, test_crafted_headers);
	tcase_add_test(tc, test_strings_terminated);
	tcase_add_test(tc, test_fifo_and_symlink);
	tcase_add_test(tc, test_tool_segment_grows);
	tcase_add_test(tc, test_tool_segment_truncated);
	tcase_add_test(tc, test_squatted_names);
	tcase_add_test(tc, test_live_namesake);
	tcase_add_test(tc, test_pid_namespace);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
