// SPDX-License-Identifier: MIT
/*
 * The stats segment, read side (pollcore/stats.h): pc_stats_open() and the
 * reads of a worker's block or a connection's slot, by any process with the
 * owner's rights, and the removal of stale segments. workers/stats.c has
 * the writer's side and the seqcount rule both keep.
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

/*
 * Between a reader's pread()s: the kernel's loads of one come before the
 * loads of the next, as acquire loads would order them. ThreadSanitizer
 * sees no load the kernel makes (and warns of fences): nothing to order.
 */
#if defined(__SANITIZE_THREAD__)
#define read_fence() do { } while (0)
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define read_fence() do { } while (0)
#endif
#endif
#ifndef read_fence
#define read_fence() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* --- readers ----------------------------------------------------------------------------- */

struct pc_stats {
	int fd;				/* read with pread(), never mapped */
	struct pc_stats_hdr h;		/* checked, at open; never read again */
	char name[64];
};

uint64_t stats_read_wait_ns = 10ull * 1000 * 1000;

uint64_t pc_stats_hist_percentile(const struct pc_stats_hist *h, double p)
{
	uint64_t rank, seen = 0, low, width, v;
	unsigned int b;
	double r;

	if (!h->count)
		return 0;
	/* in doubles first: p * count may round above UINT64_MAX (a reader's data is anyone's) */
	r = p * (double)h->count + 0.999999;
	rank = !(r >= 1) ? 1 : r >= (double)h->count ? h->count : (uint64_t)r;
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

int stats_hdr_parse(const void *buf, size_t len, uint64_t file_size, struct pc_stats_hdr *out,
		    const char *name)
{
	uint64_t woff, coff, size;

	if (len < sizeof(*out)) {
		if (!len && !file_size)
			return -EAGAIN; /* created, not sized yet */
		return set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: %zu bytes, shorter than a header",
				     name, len);
	}
	memcpy(out, buf, sizeof(*out));
	if (out->magic == 0)
		return -EAGAIN;
	if (out->magic != PC_STATS_MAGIC)
		return set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: not a pollcore stats segment", name);
	if (out->version != PC_STATS_VERSION || out->hdr_size != sizeof(*out) ||
	    out->worker_size != sizeof(struct pc_stats_worker) ||
	    out->conn_size != sizeof(struct pc_stats_conn))
		return set_errorl(PC_LOG_DEBUG, -EPROTO,
				     "%s: layout version %u (sizes %u/%u/%u), this reader knows %u (%zu/%zu/%zu)",
				     name, out->version, out->hdr_size, out->worker_size, out->conn_size,
				     PC_STATS_VERSION, sizeof(*out), sizeof(struct pc_stats_worker),
				     sizeof(struct pc_stats_conn));
	if (stats_layout(out->nworkers, out->conn_slots, &woff, &coff, &size))
		return set_errorl(PC_LOG_DEBUG, -EPROTO,
				     "%s: impossible counts (%u workers, %u slots each)", name,
				     out->nworkers, out->conn_slots);
	/* only the layout the creator makes: no offset to wrap, overlap or point anywhere else */
	if (out->worker_off != woff || out->conn_off != coff || out->size != size)
		return set_errorl(PC_LOG_DEBUG, -EPROTO,
				     "%s: inconsistent header (offsets %llu/%llu, size %llu; %u workers of %u slots take %llu/%llu, %llu)",
				     name, (unsigned long long)out->worker_off,
				     (unsigned long long)out->conn_off, (unsigned long long)out->size,
				     out->nworkers, out->conn_slots, (unsigned long long)woff,
				     (unsigned long long)coff, (unsigned long long)size);
	if (size > file_size)
		return set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: %llu bytes, its header says %llu",
				     name, (unsigned long long)file_size, (unsigned long long)size);
	if (out->pid <= 0)
		return set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: no owner (pid %d)", name, out->pid);
	out->comm[sizeof(out->comm) - 1] = '\0';
	out->devices[sizeof(out->devices) - 1] = '\0';
	return 0;
}

/* @len bytes at @off, all of them: 0, -EPROTO (the file is shorter now), or -errno. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPROTO;
		done += (size_t)n;
	}
	return 0;
}

/* The header of the open segment @fd, into @out, checked (stats_hdr_parse()). */
int stats_hdr_read(int fd, struct pc_stats_hdr *out, const char *name)
{
	struct pc_stats_hdr buf;	/* a page, on the stack */
	uint64_t magic;
	struct stat sb;
	ssize_t n;
	size_t len = 0;

	if (fstat(fd, &sb))
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: not a regular file", name);
	/* magic first, alone: it is stored last, and a copy of the whole may be of any order */
	if (pread_full(fd, &magic, sizeof(magic), 0) == 0) {
		if (magic == 0)
			return -EAGAIN;
		read_fence();
	}
	do {
		n = pread(fd, (char *)&buf + len, sizeof(buf) - len, (off_t)len);
		if (n > 0)
			len += (size_t)n;
	} while ((n > 0 && len < sizeof(buf)) || (n < 0 && errno == EINTR));
	if (n < 0)
		return -errno;
	return stats_hdr_parse(&buf, len, (uint64_t)sb.st_size, out, name);
}

struct pc_stats *stats_open_fd(int fd, const char *name)
{
	struct pc_stats *s = calloc(1, sizeof(*s));
	int ret = s ? stats_hdr_read(fd, &s->h, name) : -ENOMEM;

	if (ret) {
		close(fd);
		free(s);
		errno = -ret;
		return NULL;
	}
	s->fd = fd;
	snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

/* --- whose a segment is ------------------------------------------------------------------- */

/* The flags a caller gave: known, and PC_STATS_ANY_USER from root only. 0 or a negative errno. */
static int check_flags(unsigned int flags)
{
	if (flags & ~PC_STATS_ANY_USER)
		return set_errorl(PC_LOG_DEBUG, -EINVAL, "stats segment: unknown flags %#x",
				  flags & ~PC_STATS_ANY_USER);
	if ((flags & PC_STATS_ANY_USER) && geteuid() != 0)
		return set_errorl(PC_LOG_DEBUG, -EPERM,
				  "PC_STATS_ANY_USER: only root may read or clean other users' "
				  "segments (you are uid %u)",
				  (unsigned int)geteuid());
	return 0;
}

static int foreign(const char *name, uid_t owner)
{
	return set_errorl(PC_LOG_DEBUG, -EACCES,
			  "%s: another user's segment (owner uid %u, you are uid %u)", name,
			  (unsigned int)owner, (unsigned int)geteuid());
}

/*
 * Whether the open file @sb, /dev/shm/@name, may be taken for a segment:
 * the caller's own, or another user's with PC_STATS_ANY_USER (root's:
 * check_flags()); and no permission bit for group or others, which the
 * engine never sets (0600 at O_EXCL creation, umask can only take bits
 * away): such a file was changed since, or not made by an engine, and
 * others may have written it.
 */
static int check_file(const struct stat *sb, const char *name, unsigned int flags)
{
	if (sb->st_uid != geteuid() && !(flags & PC_STATS_ANY_USER))
		return foreign(name, sb->st_uid);
	if (sb->st_mode & 077)
		return set_errorl(PC_LOG_DEBUG, -EPROTO,
				  "%s: mode %04o: group or others may access it; an engine makes "
				  "its segment 0600",
				  name, (unsigned int)(sb->st_mode & 07777));
	return 0;
}

/* stats_open_existing(@name) failed: -errno, said (a link: -EPROTO; another user's: whose). */
static int open_failed(const char *name)
{
	char path[128];
	struct stat sb;
	int err = errno;

	if (err == ELOOP)
		return set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: a symbolic link, not a segment", name);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	if (err == EACCES && !lstat(path, &sb) && sb.st_uid != geteuid())
		return foreign(name, sb.st_uid);
	return set_errorl(PC_LOG_DEBUG, -err, "%s: %s", name, strerror(err));
}

struct pc_stats *pc_stats_open_flags(const char *name, unsigned int flags)
{
	struct stat sb;
	int fd, ret;

	if (!*name || strchr(name, '/')) {
		errno = EINVAL;
		return NULL;
	}
	ret = check_flags(flags);
	if (!ret) {
		fd = stats_open_existing(name);
		if (fd < 0) {
			ret = open_failed(name);
		} else {
			/* the file opened, not the name: nothing can swap it in between */
			ret = fstat(fd, &sb) ? -errno : check_file(&sb, name, flags);
			if (!ret)
				return stats_open_fd(fd, name);
			close(fd);
		}
	}
	errno = -ret;
	return NULL;
}

struct pc_stats *pc_stats_open(const char *name)
{
	return pc_stats_open_flags(name, 0);
}

void pc_stats_close(struct pc_stats *s)
{
	if (!s)
		return;
	close(s->fd);
	free(s);
}

const struct pc_stats_hdr *pc_stats_header(const struct pc_stats *s)
{
	return &s->h;
}

/* Whether a process holds the segment's lock (its owner, alive; in any PID namespace). */
static bool lock_held(int fd)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
		return false;
	}
	/* EWOULDBLOCK; or we cannot tell, and then it must not look stale */
	return true;
}

enum pc_stats_owner pc_stats_owner(const struct pc_stats *s)
{
	enum pid_is where;
	uint32_t state;

	if (pread_full(s->fd, &state, sizeof(state), offsetof(struct pc_stats_hdr, state)) ||
	    state != PC_STATS_STATE_LIVE)
		return PC_STATS_OWNER_CLOSED;
	/* acquire: pairs with the release in stats_seg_destroy() and at exit */
	read_fence();
	where = stats_pid_lookup(s->h.pid, s->h.start_time ? &s->h.start_time : NULL);
	if (where == PID_RUNS)
		return PC_STATS_OWNER_LIVE;
	if (where == PID_EXITED) /* its exiting threads may hold the lock yet */
		return PC_STATS_OWNER_DEAD;
	/* not the pid here, and yet held: a namesake from another PID namespace */
	if (lock_held(s->fd))
		return PC_STATS_OWNER_ELSEWHERE;
	return where == PID_REUSED ? PC_STATS_OWNER_REUSED : PC_STATS_OWNER_DEAD;
}

/* Waits a little for a writer in its section; false once @deadline passed. */
static bool reader_backoff(unsigned int *spins, uint64_t deadline)
{
	if (++*spins < 64)
		return true;
	if (stats_clock_ns(CLOCK_MONOTONIC) > deadline)
		return false;
	sched_yield();
	return true;
}

/*
 * A consistent copy of the @len bytes at @off, guarded by the seqcount at
 * their start; 0, -EAGAIN when the writer stayed in its section for
 * stats_read_wait_ns, -EPROTO when the file no longer holds them.
 */
static int seq_pread(int fd, uint64_t off, void *out, size_t len)
{
	uint64_t deadline = stats_clock_ns(CLOCK_MONOTONIC) + stats_read_wait_ns;
	unsigned int spins = 0;
	uint32_t s0, s1;
	int ret;

	do {
		ret = pread_full(fd, &s0, sizeof(s0), off);
		if (ret)
			return ret;
		/* the data is read after the seq (as after an acquire load) */
		read_fence();
		if (s0 & 1)
			continue;
		ret = pread_full(fd, out, len, off);
		if (ret)
			return ret;
		/* and the seq again after the data */
		read_fence();
		ret = pread_full(fd, &s1, sizeof(s1), off);
		if (ret)
			return ret;
		if (s0 == s1) {
			*(uint32_t *)out = s0;
			return 0;
		}
	} while (reader_backoff(&spins, deadline));
	return -EAGAIN;
}

static int short_file(const struct pc_stats *s)
{
	return set_errorl(PC_LOG_DEBUG, -EPROTO,
			     "%s: shorter than its header says (truncated while read)", s->name);
}

int pc_stats_read_worker(const struct pc_stats *s, unsigned int idx, struct pc_stats_worker *out)
{
	int ret;

	if (idx >= s->h.nworkers)
		return -EINVAL;
	ret = seq_pread(s->fd, s->h.worker_off + (uint64_t)idx * sizeof(*out), out, sizeof(*out));
	if (ret == -EPROTO)
		return short_file(s);
	out->st.name[sizeof(out->st.name) - 1] = '\0';
	return ret;
}

int pc_stats_read_conn(const struct pc_stats *s, unsigned int slot, struct pc_stats_conn *out)
{
	int ret;

	if ((uint64_t)slot >= (uint64_t)s->h.nworkers * s->h.conn_slots)
		return -EINVAL;
	ret = seq_pread(s->fd, s->h.conn_off + (uint64_t)slot * sizeof(*out), out, sizeof(*out));
	if (ret == -EPROTO)
		return short_file(s);
	if (ret)
		return ret;
	out->peer[sizeof(out->peer) - 1] = '\0';
	return out->state == PC_STATS_CONN_FREE ? -ENOENT : 0;
}

int pc_stats_for_each(int pid, void (*fn)(const char *name, int pid, void *arg), void *arg)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	int n = 0, p;

	if (!d)
		return set_error(-errno, "/dev/shm: %s", strerror(errno));
	while ((de = readdir(d))) {
		p = stats_name_pid(de->d_name, NULL);
		if (!p || (pid && p != pid))
			continue;
		fn(de->d_name, p, arg);
		n++;
	}
	closedir(d);
	return n;
}

/*
 * @fd is open on @name: removes @name if it is a stale segment. Never one
 * whose lock a process holds (its owner lives, in this PID namespace or
 * another), whose pid here is its owner, that is not a complete segment
 * of this layout, that group or others may access, or, unless @flags has
 * PC_STATS_ANY_USER (checked by the caller), that is another user's. The
 * remover holds the lock while it unlinks, and unlinks only the file it
 * checked: two that clean at once, or one that cleans while an engine
 * takes the name over, cannot remove a live segment.
 */
int stats_clean_fd(int fd, const char *name, unsigned int flags)
{
	struct pc_stats_hdr *h = calloc(1, sizeof(*h));
	struct stat sb, now;
	char path[128];
	int ret;

	if (!h)
		return -ENOMEM;
	if (fstat(fd, &sb)) {
		ret = -errno;
	} else if (!S_ISREG(sb.st_mode)) {
		ret = set_errorl(PC_LOG_DEBUG, -EPROTO, "%s: not a regular file", name);
	} else if ((ret = check_file(&sb, name, flags))) {
		/* -EACCES: another user's, not asked for; -EPROTO: others may access it */
	} else if (flock(fd, LOCK_EX | LOCK_NB)) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
	} else if ((ret = stats_hdr_read(fd, h, name))) {
		/* -EPROTO: not a segment (left alone); -EAGAIN: half created */
	} else if (h->state == PC_STATS_STATE_LIVE &&
		   stats_pid_lookup(h->pid, h->start_time ? &h->start_time : NULL) == PID_RUNS) {
		ret = -EBUSY;
	} else {
		snprintf(path, sizeof(path), "/dev/shm/%s", name);
		if (lstat(path, &now) || now.st_ino != sb.st_ino || now.st_dev != sb.st_dev)
			ret = -ENOENT; /* already replaced by another: not ours to remove */
		else
			ret = shm_unlink(name) ? -errno : 0;
	}
	free(h);
	return ret;
}

int pc_stats_clean_flags(const char *name, unsigned int flags)
{
	int fd, ret;

	ret = check_flags(flags);
	if (ret)
		return ret;
	if (!stats_name_pid(name, NULL))
		return set_errorl(PC_LOG_DEBUG, -EINVAL, "%s is not a pollcore stats segment name",
				     name);
	fd = stats_open_existing(name);
	if (fd < 0)
		return open_failed(name);
	/* another user's only for root, on purpose (check_flags()), and only when clearly stale */
	ret = stats_clean_fd(fd, name, flags);
	close(fd);
	return ret;
}

int pc_stats_clean(const char *name)
{
	return pc_stats_clean_flags(name, 0);
}
