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
 */
#include "stats_pvt.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u

static uint64_t clock_ns(clockid_t id)
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

static void load_words(void *dst, const void *src, size_t bytes)
{
	uint64_t *d = dst;
	const uint64_t *s = src;
	size_t i;

	for (i = 0; i < bytes / 8; i++)
		/* acquire: pairs with store_words(); the seq re-read cannot move above it */
		d[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE);
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
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
/*
 * One (CLOCK_MONOTONIC, TSC) pair: the TSC read between two clock reads,
 * the closest of a few tries. A thread descheduled between the two reads
 * of a pair (a vCPU under TCG can be, for milliseconds) would skew the
 * ratio by as much, and with it every deadline in ticks.
 */
static void clock_pair(uint64_t *t, uint64_t *c)
{
	uint64_t best = UINT64_MAX, a, x, b;
	int i;

	for (i = 0; i < 8 && best > 20000; i++) {
		a = clock_ns(CLOCK_MONOTONIC);
		x = stats_ticks();
		b = clock_ns(CLOCK_MONOTONIC);
		if (b - a < best) {
			best = b - a;
			*t = a + (b - a) / 2;
			*c = x;
		}
	}
}
#endif

static void clock_calibrate(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t t0, c0, t1, c1;

	clock_pair(&t0, &c0);
	do
		clock_pair(&t1, &c1);
	while (t1 - t0 < 10000000);
	if (c1 > c0 && t1 > t0) {
		stats_tick_mult = (uint64_t)(((unsigned __int128)(t1 - t0) << 32) / (c1 - c0));
		stats_publish_ticks = (uint64_t)(((unsigned __int128)STATS_PUBLISH_NS << 32) /
						 (stats_tick_mult ? stats_tick_mult : 1));
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

static void segs_register(void)
{
	atexit(segs_at_exit);
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

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* The pid that a segment's name carries (pollcore.<pid>[.<n>]); 0 if it is not one. */
static int name_pid(const char *name, unsigned int *engine)
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
	if (*end || pid > INT32_MAX || n > 1000)
		return 0;
	if (engine)
		*engine = (unsigned int)n;
	return (int)pid;
}

/* Whether the process @pid runs (zombies do not count). */
static bool pid_runs(int pid, const uint64_t *start, bool *reused)
{
	uint64_t t;
	char st = 0;
	int ret = stats_proc_start(pid, &t, &st);

	*reused = false;
	if (ret == -ENOENT || ret == -ESRCH)
		return false;
	if (ret) /* no /proc: ask the kernel whether the pid exists at all */
		return kill(pid, 0) == 0 || errno != ESRCH;
	if (start && t != *start) {
		*reused = true;
		return false;
	}
	return st != 'Z' && st != 'X';
}

/*
 * @name exists: whether it is stale, i.e. may be taken over. Ours (an
 * engine of this process) or being created is not.
 */
static bool name_stale(const char *name)
{
	int ret = pc_stats_clean(name);

	return ret == 0 || ret == -ENOENT;
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

int stats_seg_create(struct stats_seg *seg, unsigned int nworkers, unsigned int conn_slots,
		     const char *devices)
{
	size_t woff = PAGE, coff = woff + (size_t)nworkers * sizeof(struct pc_stats_worker);
	size_t size = align_up(coff + (size_t)nworkers * conn_slots * sizeof(struct pc_stats_conn),
			       PAGE);
	struct pc_stats_hdr *h;
	unsigned int n;
	int fd = -1, tries = 0;
	void *base;

	memset(seg, 0, sizeof(*seg));
	for (n = 1; n <= 1000; n++) {
		if (n == 1)
			snprintf(seg->name, sizeof(seg->name), PC_STATS_PREFIX "%d", getpid());
		else
			snprintf(seg->name, sizeof(seg->name), PC_STATS_PREFIX "%d.%u", getpid(), n);
		/* 0600: the counters are the owner's; umask can only take bits away */
		fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST)
			return pc_set_error(-errno, "stats segment /dev/shm/%s: %s", seg->name,
					    strerror(errno));
		/* a dead process with our pid left it: take it over (cleaned), once */
		if (name_stale(seg->name) && tries++ < 3)
			n--;
	}
	if (fd < 0)
		return pc_set_error(-EEXIST, "stats segment: no free name for pid %d", getpid());
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)size)) {
		int err = -errno;

		close(fd);
		shm_unlink(seg->name);
		return pc_set_error(err, "stats segment /dev/shm/%s: %s", seg->name,
				    strerror(-err));
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		int err = -errno;

		shm_unlink(seg->name);
		return pc_set_error(err, "stats segment /dev/shm/%s: mmap of %zu bytes: %s",
				    seg->name, size, strerror(-err));
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
	h->created_ns = clock_ns(CLOCK_REALTIME);
	fill_comm(h->comm, sizeof(h->comm));
	snprintf(h->devices, sizeof(h->devices), "%s", devices ? devices : "");
	h->engine = n;
	/* release: a reader that sees the magic sees the header */
	__atomic_store_n(&h->magic, PC_STATS_MAGIC, __ATOMIC_RELEASE);
	seg->base = base;
	seg->size = size;
	segs_add(seg);
	return 0;
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

/* --- readers ----------------------------------------------------------------------------- */

struct pc_stats {
	const struct pc_stats_hdr *h;
	size_t size;
	char name[64];
};

uint64_t pc_stats_hist_percentile(const struct pc_stats_hist *h, double p)
{
	uint64_t rank, seen = 0, low, width, v;
	unsigned int b;

	if (!h->count)
		return 0;
	rank = (uint64_t)(p * (double)h->count + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (b = 0; b < PC_STATS_HIST_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen >= rank)
			break;
	}
	if (b == PC_STATS_HIST_BUCKETS)
		return h->max_ns;
	low = pc_stats_hist_low(b, &width);
	v = low + width / 2;
	return v > h->max_ns ? h->max_ns : v;
}

static int header_check(const struct pc_stats_hdr *h, size_t file_size, const char *name)
{
	uint64_t need;

	if (h->version != PC_STATS_VERSION || h->hdr_size != sizeof(*h) ||
	    h->worker_size != sizeof(struct pc_stats_worker) ||
	    h->conn_size != sizeof(struct pc_stats_conn))
		return pc_set_errorl(PC_LOG_DEBUG, -EPROTO,
				     "%s: layout version %u (sizes %u/%u/%u), this reader knows %u (%zu/%zu/%zu)",
				     name, h->version, h->hdr_size, h->worker_size, h->conn_size,
				     PC_STATS_VERSION, sizeof(*h), sizeof(struct pc_stats_worker),
				     sizeof(struct pc_stats_conn));
	need = h->conn_off + (uint64_t)h->nworkers * h->conn_slots * sizeof(struct pc_stats_conn);
	if (h->size > file_size || h->worker_off < sizeof(*h) ||
	    h->worker_off + (uint64_t)h->nworkers * sizeof(struct pc_stats_worker) > h->conn_off ||
	    need > h->size || h->nworkers > 4096)
		return pc_set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: inconsistent header (size %llu, file %zu)",
				     name, (unsigned long long)h->size, file_size);
	return 0;
}

struct pc_stats *pc_stats_open(const char *name)
{
	struct stat sb = { 0 };
	struct pc_stats *s;
	uint64_t magic;
	void *base;
	int fd, ret;

	if (strchr(name, '/')) {
		errno = EINVAL;
		return NULL;
	}
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	ret = fstat(fd, &sb) ? errno : 0;
	if (ret || (size_t)sb.st_size < sizeof(struct pc_stats_hdr)) {
		close(fd);
		/* too short: being created (ftruncate comes first), or not ours */
		errno = sb.st_size == 0 ? EAGAIN : ret ? ret : EPROTO;
		return NULL;
	}
	base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return NULL;
	/* acquire: pairs with the release in stats_seg_create() */
	magic = __atomic_load_n(&((const struct pc_stats_hdr *)base)->magic, __ATOMIC_ACQUIRE);
	ret = magic == PC_STATS_MAGIC ? header_check(base, (size_t)sb.st_size, name)
	      : magic == 0	      ? -EAGAIN
				      : pc_set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: not a pollcore stats segment", name);
	s = ret ? NULL : calloc(1, sizeof(*s));
	if (!s) {
		munmap(base, (size_t)sb.st_size);
		errno = ret ? -ret : ENOMEM;
		return NULL;
	}
	s->h = base;
	s->size = (size_t)sb.st_size;
	snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

void pc_stats_close(struct pc_stats *s)
{
	if (!s)
		return;
	munmap((void *)s->h, s->size);
	free(s);
}

const struct pc_stats_hdr *pc_stats_header(const struct pc_stats *s)
{
	return s->h;
}

enum pc_stats_owner pc_stats_owner(const struct pc_stats *s)
{
	bool reused;

	/* acquire: pairs with the release in stats_seg_destroy() and at exit */
	if (__atomic_load_n(&s->h->state, __ATOMIC_ACQUIRE) != PC_STATS_STATE_LIVE)
		return PC_STATS_OWNER_CLOSED;
	if (pid_runs(s->h->pid, s->h->start_time ? &s->h->start_time : NULL, &reused))
		return PC_STATS_OWNER_LIVE;
	return reused ? PC_STATS_OWNER_REUSED : PC_STATS_OWNER_DEAD;
}

/* Waits a little for a writer in its section; false once @deadline passed. */
static bool reader_backoff(unsigned int *spins, uint64_t deadline)
{
	if (++*spins < 64)
		return true;
	if (clock_ns(CLOCK_MONOTONIC) > deadline)
		return false;
	sched_yield();
	return true;
}

/*
 * A consistent copy of @len bytes at @src, guarded by the seqcount at its
 * start; 0, or -EAGAIN when the writer stayed in its section for 10 ms.
 */
static int seq_read(const void *src, void *out, size_t len)
{
	const uint32_t *seq = src;
	uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + 10ull * 1000 * 1000;
	unsigned int spins = 0;
	uint32_t s0, s1;

	do {
		/* acquire: pairs with the release in seq_end() */
		s0 = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
		if (s0 & 1)
			continue;
		/* the copy is of acquire loads: seq cannot be read again before it */
		load_words(out, src, len);
		s1 = __atomic_load_n(seq, __ATOMIC_RELAXED);
		if (s0 == s1) {
			*(uint32_t *)out = s0;
			return 0;
		}
	} while (reader_backoff(&spins, deadline));
	return -EAGAIN;
}

int pc_stats_read_worker(const struct pc_stats *s, unsigned int idx, struct pc_stats_worker *out)
{
	if (idx >= s->h->nworkers)
		return -EINVAL;
	return seq_read((const struct pc_stats_worker *)((const char *)s->h + s->h->worker_off) + idx,
			out, sizeof(*out));
}

int pc_stats_read_conn(const struct pc_stats *s, unsigned int slot, struct pc_stats_conn *out)
{
	int ret;

	if (slot >= s->h->nworkers * s->h->conn_slots)
		return -EINVAL;
	ret = seq_read((const struct pc_stats_conn *)((const char *)s->h + s->h->conn_off) + slot, out,
		       sizeof(*out));
	return ret ? ret : out->state == PC_STATS_CONN_FREE ? -ENOENT : 0;
}

int pc_stats_for_each(int pid, void (*fn)(const char *name, int pid, void *arg), void *arg)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	int n = 0, p;

	if (!d)
		return pc_set_error(-errno, "/dev/shm: %s", strerror(errno));
	while ((de = readdir(d))) {
		p = name_pid(de->d_name, NULL);
		if (!p || (pid && p != pid))
			continue;
		fn(de->d_name, p, arg);
		n++;
	}
	closedir(d);
	return n;
}

int pc_stats_clean(const char *name)
{
	struct pc_stats *s;
	bool reused, live;
	int pid = name_pid(name, NULL);

	if (!pid)
		return pc_set_errorl(PC_LOG_DEBUG, -EINVAL, "%s is not a pollcore stats segment name",
				     name);
	s = pc_stats_open(name);
	if (s) {
		live = pc_stats_owner(s) == PC_STATS_OWNER_LIVE;
		pc_stats_close(s);
	} else if (errno == EAGAIN || errno == EPROTO) {
		/* half created, or another layout: stale only if the pid in its name is gone */
		live = pid_runs(pid, NULL, &reused);
	} else {
		return -errno;
	}
	if (live)
		return -EBUSY;
	return shm_unlink(name) ? -errno : 0;
}
