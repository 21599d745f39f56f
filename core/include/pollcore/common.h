/* SPDX-License-Identifier: MIT */
/*
 * pollcore/common.h - compiler helpers, error and logging conventions.
 *
 * Conventions used by every pollcore component:
 *  - functions return 0 or a negative errno; constructors return NULL and
 *    set errno;
 *  - verbs' positive errno values are converted at the boundary with
 *    pc_neg_errno();
 *  - nothing on the hot path allocates, locks or makes a syscall other than
 *    the post/poll calls themselves.
 */
#ifndef POLLCORE_COMMON_H
#define POLLCORE_COMMON_H

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PC_CACHELINE 64

/*
 * Marks what libpollcore exports: the library is built with
 * -fvisibility=hidden, so everything else stays inside it.
 */
#define PC_API __attribute__((visibility("default")))

#define pc_likely(x)   __builtin_expect(!!(x), 1)
#define pc_unlikely(x) __builtin_expect(!!(x), 0)
#define pc_always_inline inline __attribute__((always_inline))
/* out of the hot path: error and rare branches, kept from bloating their caller */
#define pc_noinline __attribute__((noinline))
#define pc_cold __attribute__((noinline, cold))
#define pc_cache_aligned __attribute__((aligned(PC_CACHELINE)))
#define pc_printf(a, b) __attribute__((format(printf, a, b)))
#define pc_unused __attribute__((unused))

#define PC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PC_MAX(a, b) ((a) > (b) ? (a) : (b))

/**
 * pc_container_of - owner of an embedded member.
 * @ptr: pointer to the member.
 * @type: type of the owner.
 * @member: name of the member inside @type.
 */
#define pc_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/**
 * pc_is_pow2 - whether @x is a non-zero power of two.
 * @x: value to test.
 *
 * Return: non-zero when @x is a power of two.
 */
static inline int pc_is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/**
 * pc_align_pow2 - round @x up to the next power of two.
 * @x: value, at most 2^63.
 *
 * Return: the smallest power of two >= @x (1 for 0).
 */
static inline uint64_t pc_align_pow2(uint64_t x)
{
	return x <= 1 ? 1 : 1ULL << (64 - __builtin_clzll(x - 1));
}

/**
 * pc_neg_errno - convert a verbs-style return value to a negative errno.
 * @ret: value returned by a verbs or rdma_cm call: 0, a positive errno
 *       (ibv_post_*, ibv_modify_*) or -1 with errno set (rdma_cm, most
 *       ibv_* constructors' callers).
 *
 * Return: 0 or a negative errno (never -1 unless errno is EPERM).
 */
static inline int pc_neg_errno(int ret)
{
	if (ret == 0)
		return 0;
	if (ret > 0)
		return -ret;
	return errno ? -errno : -EIO;
}

/**
 * pc_version - the library's version string, e.g. "0.1.0".
 *
 * Return: a static string.
 */
PC_API const char *pc_version(void);

enum pc_log_level {
	PC_LOG_ERR = 0,
	PC_LOG_WARN,
	PC_LOG_INFO,
	PC_LOG_DEBUG,
};

/**
 * pc_log_fn - type of a log sink.
 * @level: severity.
 * @msg: formatted message, without trailing newline.
 * @arg: opaque argument given to pc_log_set_sink().
 */
typedef void (*pc_log_fn)(enum pc_log_level level, const char *msg, void *arg);

/**
 * pc_log_set_sink - route pollcore's log lines to @fn.
 * @fn: sink, or NULL to restore the default (stderr).
 * @arg: passed to @fn.
 *
 * Call before any other thread uses pollcore. Not thread-safe.
 */
PC_API void pc_log_set_sink(pc_log_fn fn, void *arg);

/**
 * pc_log_set_level - drop messages less severe than @level.
 * @level: threshold; default PC_LOG_INFO, or PC_LOG_LEVEL from the
 *         environment (0-3).
 *
 * Any thread.
 */
PC_API void pc_log_set_level(enum pc_log_level level);

/**
 * pc_log - format and emit one log line.
 * @level: severity.
 * @fmt: printf format.
 *
 * Any thread; not for the per-message hot path (it formats a string).
 */
PC_API void pc_log(enum pc_log_level level, const char *fmt, ...) pc_printf(2, 3);

#define pc_err(...)   pc_log(PC_LOG_ERR, __VA_ARGS__)
#define pc_warn(...)  pc_log(PC_LOG_WARN, __VA_ARGS__)
#define pc_info(...)  pc_log(PC_LOG_INFO, __VA_ARGS__)
#define pc_debug(...) pc_log(PC_LOG_DEBUG, __VA_ARGS__)

/**
 * pc_last_error - the last error message pollcore formatted on this thread.
 *
 * Every failing pollcore call that returns a negative errno also leaves a
 * human-readable explanation here (naming device, port, GID index, QP
 * number and work-completion status where they apply).
 *
 * Return: a thread-local string, valid until the next pollcore call on
 * this thread; "" when there is none.
 */
PC_API const char *pc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* POLLCORE_COMMON_H */
