// SPDX-License-Identifier: MIT
/*
 * The stats segment: created by an engine, filled by its workers, read by
 * anyone with the owner's rights (pollcore/stats.h). Nothing here runs on
 * a worker's hot path but wstats_publish(), every 10 ms or so.
 *
 * Seqcounts, without fences (which ThreadSanitizer cannot model):
 *   writer (one thread):              reader (any process):
 *     seq = odd      (relaxed)          s0 = seq        (acquire)
 *     data words     (release stores)   data words      (acquire loads)
 *     seq = even     (release)          s1 = seq        (relaxed)
 *                                       consistent when s0 == s1, s0 even
 * A reader that loads a new data word synchronizes with its release
 * store, so it then sees the odd seq that preceded it and retries. On x86
 * every one of these is a plain move; the writer does it every 10 ms.
 *
 * Readers never map a segment: its owner may be anyone, and may change or
 * truncate it at any time (a mapping would SIGBUS). They pread() from a
 * descriptor into private memory: the header once, at open, checked by
 * stats_hdr_parse() (every count and offset, against the file's size) and
 * kept; each block or slot on demand, as three reads (seq, data, seq)
 * separated by acquire fences, which order the kernel's copies as the
 * acquire loads above would. A short read is -EPROTO: the file shrank.
 */
#include "stats_pvt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "log_pvt.h"

#define PAGE 4096u

uint64_t stats_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Word by word, inside a seqcount section: readers copy while the worker writes. */
static void store_words(void *dst, const void *src, size_t bytes)
{
	uint64_t *d = dst;
	const uint64_t *s = src;
	size_t i;

	for (i = 0; i < bytes / 8; i++)
		/* release: a reader that sees this word sees the odd seq before it */
		__atomic_store_n(&d[i], s[i], __ATOMIC_RELEASE);
}

/* Data words written after it are release stores (store_words()): they order it. */
static void seq_begin(uint32_t *seq)
{
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
}

static void seq_end(uint32_t *seq)
{
	/* release: the writes are visible before the even seq */
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELEASE);
}

/* --- the clock ------------------------------------------------------------------------------ */

uint64_t stats_tick_mult = 1ull << 32, stats_publish_ticks = STATS_PUBLISH_NS;
uint64_t stats_us_mult = 1000ull << 32;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
/*
 * One (CLOCK_MONOTONIC, TSC) pair: the TSC read between two clock reads,
 * the closest of a few tries; *@w is half the gap between those reads, the
 * pair's uncertainty. A thread descheduled between the two reads of a pair
 * (a vCPU under TCG can be, for milliseconds) would skew the ratio by as
 * much, and with it every deadline in ticks.
 */
static void clock_pair(uint64_t *t, uint64_t *c, uint64_t *w)
{
	uint64_t best = UINT64_MAX, a, x, b;
	int i;

	for (i = 0; i < 8 && best > 20000; i++) {
		a = stats_clock_ns(CLOCK_MONOTONIC);
		x = stats_ticks();
		b = stats_clock_ns(CLOCK_MONOTONIC);
		if (b - a < best) {
			best = b - a;
			*t = a + (b - a) / 2;
			*c = x;
		}
	}
	*w = best / 2;
}
#endif

static void clock_calibrate(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t t0, c0, w0, t1, c1, w1, lo;

	clock_pair(&t0, &c0, &w0);
	do
		clock_pair(&t1, &c1, &w1);
	while (t1 - t0 < 10000000);
	if (c1 > c0 && t1 > t0) {
		stats_tick_mult = (uint64_t)(((unsigned __int128)(t1 - t0) << 32) / (c1 - c0));
		stats_publish_ticks = (uint64_t)(((unsigned __int128)STATS_PUBLISH_NS << 32) /
						 (stats_tick_mult ? stats_tick_mult : 1));
		/*
		 * Deadlines must never fire early: their ratio takes the shortest
		 * time the pairs allow between the two TSC reads, and a further
		 * 1/1024 for the kernel's slewing of CLOCK_MONOTONIC (NTP: at most
		 * 500 ppm) against a TSC that is never slewed.
		 */
		lo = t1 - t0 > 2 * (w0 + w1) ? t1 - t0 - (w0 + w1) : (t1 - t0) / 2;
		stats_us_mult = (uint64_t)(((unsigned __int128)(c1 - c0) * 1000 << 32) / lo);
		stats_us_mult += stats_us_mult >> 10;
	}
#endif
}

void stats_clock_init(void)
{
	pthread_once(&clock_once, clock_calibrate);
}

/* --- /proc ----------------------------------------------------------------------------- */

int stats_proc_start(int pid, uint64_t *start, char *state)
{
	char path[64], buf[1024], *p, *end;
	unsigned int field;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	/* comm, field 2, is in parentheses and may hold anything: count from the last ')' */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EPROTO;
	p += 2;
	if (state)
		*state = *p;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EPROTO;
		p++;
	}
	*start = strtoull(p, &end, 10);
	return end == p ? -EPROTO : 0;
}

/* --- the process's segments, removed at exit ------------------------------------------- */

static pthread_mutex_t segs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t segs_once = PTHREAD_ONCE_INIT;
static struct stats_seg *segs;

/* exit() or return from main: a process that dies normally leaves no segment behind. */
static void segs_at_exit(void)
{
	struct stats_seg *s;

	pthread_mutex_lock(&segs_lock);
	for (s = segs; s; s = s->next) {
		struct pc_stats_hdr *h = stats_seg_hdr(s);

		/* a forked child inherits the list and the mapping, not the segment */
		if (h->pid != getpid())
			continue;
		/* release: readers that see CLOSED see the last publishes too */
		__atomic_store_n(&h->state, PC_STATS_STATE_CLOSED, __ATOMIC_RELEASE);
		shm_unlink(s->name);
	}
	/* the workers may still be running: the mappings stay until the process ends */
	pthread_mutex_unlock(&segs_lock);
}

/*
 * fork(): the child shares the descriptors' open files, and with them the
 * lock that says the owner lives. It closes its copies, so the lock goes
 * when the owner ends, whatever its children do. (Its mapping holds
 * another open file of the segment, without the lock: see stats_seg_create().)
 */
static void segs_prefork(void)
{
	pthread_mutex_lock(&segs_lock);
}

static void segs_postfork_parent(void)
{
	pthread_mutex_unlock(&segs_lock);
}

static void segs_postfork_child(void)
{
	struct stats_seg *s;

	for (s = segs; s; s = s->next)
		if (s->fd >= 0) {
			close(s->fd);
			s->fd = -1;
		}
	pthread_mutex_unlock(&segs_lock);
}

static void segs_register(void)
{
	atexit(segs_at_exit);
	pthread_atfork(segs_prefork, segs_postfork_parent, segs_postfork_child);
}

static void segs_add(struct stats_seg *seg)
{
	pthread_once(&segs_once, segs_register);
	pthread_mutex_lock(&segs_lock);
	seg->next = segs;
	segs = seg;
	pthread_mutex_unlock(&segs_lock);
}

static void segs_del(struct stats_seg *seg)
{
	struct stats_seg **pp;

	pthread_mutex_lock(&segs_lock);
	for (pp = &segs; *pp; pp = &(*pp)->next)
		if (*pp == seg) {
			*pp = seg->next;
			break;
		}
	pthread_mutex_unlock(&segs_lock);
}

/* --- creating and removing ------------------------------------------------------------- */

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* The pid that a segment's name carries (pollcore.<pid>[.<n>], n >= 2); 0 if it is not one. */
int stats_name_pid(const char *name, unsigned int *engine)
{
	const char *p = name + sizeof(PC_STATS_PREFIX) - 1;
	unsigned long pid, n = 1;
	char *end;

	if (strncmp(name, PC_STATS_PREFIX, sizeof(PC_STATS_PREFIX) - 1) || *p < '1' || *p > '9')
		return 0;
	pid = strtoul(p, &end, 10);
	if (*end == '.') {
		p = end + 1;
		if (*p < '1' || *p > '9')
			return 0;
		n = strtoul(p, &end, 10);
	}
	if (*end || pid > INT32_MAX || n > INT32_MAX)
		return 0;
	if (engine)
		*engine = (unsigned int)n;
	return (int)pid;
}

enum pid_is stats_pid_lookup(int pid, const uint64_t *start)
{
	uint64_t t;
	char st = 0;
	int ret = stats_proc_start(pid, &t, &st);

	if (ret == -ENOENT || ret == -ESRCH)
		return PID_ABSENT;
	if (ret) /* no /proc: ask the kernel whether the pid exists at all */
		return kill(pid, 0) == 0 || errno != ESRCH ? PID_RUNS : PID_ABSENT;
	if (start && t != *start)
		return PID_REUSED;
	/*
	 * The leader shows 'Z' as soon as it exits, while its other threads
	 * may still be exiting and hold the segment's lock.
	 */
	return st == 'Z' || st == 'X' ? PID_EXITED : PID_RUNS;
}

int stats_layout(uint32_t nworkers, uint32_t conn_slots, uint64_t *worker_off, uint64_t *conn_off,
		 uint64_t *size)
{
	uint64_t slots = (uint64_t)nworkers * conn_slots;

	if (nworkers > STATS_MAX_WORKERS || slots > STATS_MAX_SLOTS)
		return -E2BIG;
	*worker_off = PAGE;
	*conn_off = PAGE + (uint64_t)nworkers * sizeof(struct pc_stats_worker);
	*size = align_up(*conn_off + slots * sizeof(struct pc_stats_conn), PAGE);
	return 0;
}

static void fill_comm(char *comm, size_t len)
{
	FILE *f = fopen("/proc/self/comm", "re");

	comm[0] = '\0';
	if (f) {
		if (fgets(comm, (int)len, f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
}


/* Opens an existing @name without following a link or blocking on a FIFO. */
int stats_open_existing(const char *name)
{
	return shm_open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
}

enum name_use {
	NAME_FREED,	/* gone, or a stale segment of ours, removed: try it again */
	NAME_OURS,	/* another engine of this process has it: the next <n> */
	NAME_OTHER,	/* anything else: left alone; a name nobody can guess */
};

/* @name exists (O_EXCL said so): what it is. */
static enum name_use name_use(const char *name)
{
	static struct pc_stats_hdr h;	/* under create_lock */
	uint64_t start = 0;
	int fd = stats_open_existing(name), ret;

	if (fd < 0)
		return errno == ENOENT ? NAME_FREED : NAME_OTHER;
	/* ours only (never another user's), and only with no owner alive anywhere */
	ret = stats_clean_fd(fd, name, 0);
	if (ret == -EBUSY && !stats_hdr_read(fd, &h, name) && h.pid == getpid() &&
	    !stats_proc_start(getpid(), &start, NULL) && h.start_time == start) {
		close(fd);
		return NAME_OURS;
	}
	close(fd);
	return ret == 0 || ret == -ENOENT ? NAME_FREED : NAME_OTHER;
}

/* O_EXCL: a new file or -EEXIST; locked before anyone can see anything in it. */
static int create_name(const char *name)
{
	/* 0600: the counters are the owner's; umask can only take bits away */
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	/* a reader testing the lock holds LOCK_SH for a moment: wait that out */
	while (flock(fd, LOCK_EX)) {
		int err = -errno;

		if (err == -EINTR)
			continue;
		close(fd);
		shm_unlink(name);
		return err;
	}
	return fd;
}

/* Above the names of engine ordinals, unpredictable: no other user can take it first. */
static unsigned int random_suffix(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)stats_clock_ns(CLOCK_MONOTONIC) ^ ((uint32_t)getpid() << 16);
	return 1001 + r % (INT32_MAX - 1001);
}

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

/* A name for the segment, created (@fd) and locked; @engine: its ordinal. */
static int seg_name(struct stats_seg *seg, unsigned int *engine)
{
	unsigned int n, taken = 0, tries = 0;
	int fd = -EEXIST;

	for (n = 1; n <= 1000; n++) {
		if (n == 1)
			snprintf(seg->name, sizeof(seg->name), PC_STATS_PREFIX "%d", getpid());
		else
			snprintf(seg->name, sizeof(seg->name), PC_STATS_PREFIX "%d.%u", getpid(), n);
		fd = create_name(seg->name);
		if (fd != -EEXIST)
			break;
		switch (name_use(seg->name)) {
		case NAME_FREED:
			if (tries++ < 3)
				n--;
			continue;
		case NAME_OURS:
			continue;
		case NAME_OTHER:
			break;
		}
		/* someone else's: say so, and take a name no one can have taken first */
		pc_warn("stats segment: /dev/shm/%s is not this process's (another user's file, a live "
			"namesake in another PID namespace, or not a segment): left alone", seg->name);
		for (taken = 0; taken < 16; taken++) {
			snprintf(seg->name, sizeof(seg->name), PC_STATS_PREFIX "%d.%u", getpid(),
				 random_suffix());
			fd = create_name(seg->name);
			if (fd != -EEXIST)
				break;
		}
		if (fd >= 0)
			pc_warn("stats segment: using /dev/shm/%s instead", seg->name);
		break;
	}
	*engine = n;
	if (fd == -EEXIST)
		return set_error(-EEXIST, "stats segment: no free name for pid %d", getpid());
	if (fd < 0)
		return set_error(fd, "stats segment /dev/shm/%s: %s", seg->name, strerror(-fd));
	return fd;
}

int stats_seg_create(struct stats_seg *seg, unsigned int nworkers, unsigned int conn_slots,
		     const char *devices)
{
	uint64_t woff, coff, size;
	struct pc_stats_hdr *h;
	struct stat a, b;
	unsigned int n;
	int fd, mfd, ret;
	void *base;

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	ret = stats_layout(nworkers, conn_slots, &woff, &coff, &size);
	if (ret)
		return set_error(ret, "stats segment: %u workers of %u connection slots: more than %u slots",
				    nworkers, conn_slots, STATS_MAX_SLOTS);
	pthread_mutex_lock(&create_lock);
	fd = seg_name(seg, &n);
	pthread_mutex_unlock(&create_lock);
	if (fd < 0)
		return fd;
	/*
	 * The mapping gets an open file of its own: a mapping keeps its file
	 * open, and a forked child keeps the mapping; the lock must not stay
	 * with it (segs_postfork_child() closes the child's @fd).
	 */
	mfd = -1;
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)size) ||
	    (mfd = shm_open(seg->name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0)) < 0 || fstat(fd, &a) ||
	    fstat(mfd, &b) || (a.st_ino != b.st_ino && (errno = EEXIST))) {
		ret = -errno;
		goto fail;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	close(mfd);
	if (base == MAP_FAILED) {
		ret = -errno;
		mfd = -1;
		shm_unlink(seg->name);
		close(fd);
		return set_error(ret, "stats segment /dev/shm/%s: mmap of %llu bytes: %s",
				    seg->name, (unsigned long long)size, strerror(-ret));
	}
	h = base;
	h->version = PC_STATS_VERSION;
	h->hdr_size = sizeof(*h);
	h->worker_size = sizeof(struct pc_stats_worker);
	h->conn_size = sizeof(struct pc_stats_conn);
	h->nworkers = nworkers;
	h->conn_slots = conn_slots;
	h->size = size;
	h->worker_off = woff;
	h->conn_off = coff;
	h->pid = getpid();
	h->state = PC_STATS_STATE_LIVE;
	if (stats_proc_start(h->pid, &h->start_time, NULL))
		h->start_time = 0;
	h->created_ns = stats_clock_ns(CLOCK_REALTIME);
	fill_comm(h->comm, sizeof(h->comm));
	snprintf(h->devices, sizeof(h->devices), "%s", devices ? devices : "");
	h->engine = n;
	/* release: a reader that sees the magic sees the header */
	__atomic_store_n(&h->magic, PC_STATS_MAGIC, __ATOMIC_RELEASE);
	seg->base = base;
	seg->size = size;
	seg->fd = fd;
	segs_add(seg);
	return 0;

fail:
	if (mfd >= 0)
		close(mfd);
	shm_unlink(seg->name);
	close(fd);
	return set_error(ret, "stats segment /dev/shm/%s: %s", seg->name, strerror(-ret));
}

void stats_seg_destroy(struct stats_seg *seg)
{
	struct pc_stats_hdr *h = stats_seg_hdr(seg);

	if (!h)
		return;
	segs_del(seg);
	/* release: pairs with the acquire in pc_stats_owner() */
	__atomic_store_n(&h->state, PC_STATS_STATE_CLOSED, __ATOMIC_RELEASE);
	shm_unlink(seg->name);
	munmap(seg->base, seg->size);
	seg->base = NULL;
	/* the lock goes last: until then, no one else takes the name over */
	if (seg->fd >= 0)
		close(seg->fd);
	seg->fd = -1;
}

/* --- a worker's side --------------------------------------------------------------------- */

int wstats_init(struct wstats *ws, struct pc_stats_worker *blk, struct pc_stats_conn *slots,
		uint32_t nslots)
{
	uint32_t i;

	memset(ws, 0, sizeof(*ws));
	ws->hist_lo = PC_STATS_HIST_BUCKETS;
	if (!blk)
		return 0;
	ws->free_slots = malloc((size_t)nslots * sizeof(*ws->free_slots));
	if (!ws->free_slots)
		return -ENOMEM;
	/* lowest first: a few connections touch few pages */
	for (i = 0; i < nslots; i++)
		ws->free_slots[i] = nslots - 1 - i;
	ws->nfree = nslots;
	ws->slots = slots;
	ws->blk = blk;
	/* first touch, on this thread: the block's pages come from its NUMA node */
	memset(blk, 0, sizeof(*blk));
	return 0;
}

void wstats_free(struct wstats *ws)
{
	free(ws->free_slots);
	ws->free_slots = NULL;
	ws->blk = NULL;
}

void wstats_publish(struct wstats *ws, const struct pc_worker_stats *st, uint64_t now)
{
	struct pc_stats_worker *b = ws->blk;
	struct pc_stats_hist *h;

	ws->next_publish = stats_ticks() + stats_publish_ticks;
	if (!b)
		return;
	h = &b->rpc;
	seq_begin(&b->seq);
	ws->publishes++;
	store_words(&b->publishes, &ws->publishes, sizeof(uint64_t));
	store_words(&b->publish_ns, &now, sizeof(uint64_t));
	store_words(&b->st, st, sizeof(*st));
	store_words(b->wc_status, ws->wc_status, sizeof(ws->wc_status));
	store_words(&h->count, &ws->rpc.count, sizeof(uint64_t));
	store_words(&h->sum_ns, &ws->rpc.sum_ns, sizeof(uint64_t));
	store_words(&h->max_ns, &ws->rpc.max_ns, sizeof(uint64_t));
	/* only the buckets that changed: latencies cluster in a few */
	if (ws->hist_lo <= ws->hist_hi)
		store_words(&h->bucket[ws->hist_lo], &ws->rpc.bucket[ws->hist_lo],
			    (ws->hist_hi - ws->hist_lo + 1) * sizeof(uint64_t));
	seq_end(&b->seq);
	ws->hist_lo = PC_STATS_HIST_BUCKETS;
	ws->hist_hi = 0;
}

struct pc_stats_conn *wstats_slot_open(struct wstats *ws, const struct pc_stats_conn *id)
{
	const struct pc_stats_conn tmp = *id;
	struct pc_stats_conn *s;

	if (!ws->nfree)
		return NULL;
	s = &ws->slots[ws->free_slots[--ws->nfree]];
	seq_begin(&s->seq);
	/* identity and zeroed counters; the word of seq and state is written apart */
	/* release: as store_words(), a reader that sees it sees the odd seq */
	__atomic_store_n(&s->state, tmp.state, __ATOMIC_RELEASE);
	store_words((char *)s + 8, (const char *)&tmp + 8, sizeof(*s) - 8);
	seq_end(&s->seq);
	return s;
}

void wstats_slot_close(struct wstats *ws, struct pc_stats_conn *slot)
{
	seq_begin(&slot->seq);
	/* release: as store_words(), a reader that sees it sees the odd seq */
	__atomic_store_n(&slot->state, PC_STATS_CONN_FREE, __ATOMIC_RELEASE);
	seq_end(&slot->seq);
	ws->free_slots[ws->nfree++] = (uint32_t)(slot - ws->slots);
}
