/* SPDX-License-Identifier: MIT */
/*
 * Test-only: the stage of the fault tests (test_hostile, test_churn,
 * test_device_faults, test_least_access).
 *
 *  - fsrv: a pollcore echo server in handler mode that keeps, per QP number,
 *    what its application saw (messages, RESPONSEs, len > cap) and its DOWN,
 *    with pc_last_error() on the worker at that moment as the reason. It
 *    can hold the messages of every peer but the good clients (to exhaust
 *    credits and buffers on purpose).
 *  - fgood: well-behaved pollcore client connections, fed by a flow thread
 *    with numbered, patterned messages; every echo is checked byte for
 *    byte and for order.
 *  - flog: every pollcore log line, kept for searching (and still printed).
 *  - EXPECT(): a failed expectation is recorded and the test goes on, so one
 *    run reports every defect it meets; fexpect_done() fails the test with
 *    the list.
 *  - fres: the process's fds and RSS and the device's QP and MR counts.
 *
 * One fsrv, one client engine and one flow thread per test process (Check
 * forks a process per test). Their workers sleep when idle (PC_IDLE_HYBRID):
 * in the VM two vCPUs carry all the workers of both sides.
 */
#ifndef PC_FAULT_ENV_H
#define PC_FAULT_ENV_H

#include <pollcore/engine.h>

#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

uint64_t fnow_ms(void);

/* --- expectations ----------------------------------------------------------------- */

#define EXPECT(cond, ...) fexpect(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
void fexpect(bool ok, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Fails the running Check test when any expectation failed, listing them. */
void fexpect_done(void);

/* Runs @test alone as suite and case @name with a timeout of @timeout_s; main()'s return value. */
int frun_one(const char *name, const TTest *test, double timeout_s);

/* --- log capture --------------------------------------------------------------------- */

void flog_start(void);
/* The latest captured line containing every one of the NULL-terminated needles (case-insensitive). */
bool flog_find(char *out, size_t outlen, const char *needle, ...);
/* Lines captured so far (a mark for flog_find_since()). */
unsigned int flog_mark(void);
bool flog_find_since(unsigned int mark, char *out, size_t outlen, const char *needle, ...);

/* --- the echo server -------------------------------------------------------------------- */

#define FREC_MAX 256

/* What the server saw of one connection, by its QP number. */
struct frec {
	uint32_t qpn;
	bool raw, up, down;
	char reason[512];	/* pc_last_error() on the worker when DOWN was delivered */
	uint32_t msgs;		/* delivered to the application */
	uint32_t before_up;	/* of which before its UP */
	uint64_t bytes;
	uint32_t responses;	/* of type PC_MSG_RESPONSE (the server never calls) */
	uint32_t over_cap;	/* delivered with len > cap */
	uint32_t max_len;
};

struct fsrv {
	struct pc_engine *e;
	uint16_t port;
	atomic_bool hold;		/* hold every message but the good clients' */
	atomic_ulong good_msgs;		/* good clients' messages echoed */
	atomic_ulong echo_errors;	/* pc_send/pc_reply failures other than -ENOTCONN */
};

/*
 * Starts the echo server on @addr (NULL: pc_test_addr()) with @tweak's
 * sizes (msg_size, rx_bufs, window, ...) and devices; callbacks, handler
 * mode and no_numa are set here. The calling thread attaches to its slot 0.
 */
struct fsrv *fsrv_start(const struct pc_engine_params *tweak, const char *addr);
void fsrv_stop(struct fsrv *s);
/* A copy of the record of server QP @qpn; false when the server never saw it. */
bool fsrv_rec(struct fsrv *s, uint32_t qpn, struct frec *out);
/* Waits up to @ms for the DOWN of server QP @qpn. */
bool fsrv_wait_down(struct fsrv *s, uint32_t qpn, int ms, struct frec *out);
/* Waits up to @ms for the UP of server QP @qpn. */
bool fsrv_wait_up(struct fsrv *s, uint32_t qpn, int ms);
/* UP and DOWN events so far. */
void fsrv_counts(struct fsrv *s, unsigned int *up, unsigned int *down);
/* Releases every held message (main thread); returns how many. */
unsigned int fsrv_release_held(struct fsrv *s);
unsigned int fsrv_held(struct fsrv *s);
/* Live connections (pc_engine_for_each_conn). */
unsigned int fengine_conns(struct pc_engine *e);

/* --- good clients ------------------------------------------------------------------------- */

#define FGOOD_MAX 16

struct fgood {
	struct pc_conn *conn;
	uint32_t id;
	uint32_t qpn;		/* the client's QP */
	char device[64];
	atomic_uint sent, recv, bad, next;
	atomic_bool down;
	atomic_bool stopped;	/* the flow stops sending on it */
	char reason[512];	/* pc_last_error() on the client worker at DOWN */
};

struct fcli {
	struct pc_engine *e;
	struct fgood g[FGOOD_MAX];
	atomic_uint n;
	pthread_t flow;
	atomic_bool stop, running;
	unsigned int window;	/* messages in flight per connection */
};

/* A client engine on @devices (NULL: the test device); the caller attaches to slot 0. */
struct fcli *fcli_start(const char *const *devices);
/* Connects one more good connection and starts feeding it. Returns its index or -errno. */
int fcli_add(struct fcli *c, const char *addr, uint16_t port, int timeout_ms);
/* Waits until good connection @i received at least @n echoes; false on timeout. */
bool fcli_wait_recv(struct fcli *c, unsigned int i, unsigned int n, int ms);
/*
 * Stops the flow, waits for every echo of the connections still up, and
 * checks them (EXPECT): all echoed, none corrupted or out of order, and,
 * unless @may_close, none closed.
 */
void fcli_finish(struct fcli *c, bool may_close);
void fcli_stop(struct fcli *c);

/* --- resources -------------------------------------------------------------------------- */

struct fres {
	unsigned int fds;
	unsigned long rss_kb;
	long qp, mr, cm_id, pd, cq, srq;	/* the device's, from `rdma resource show`; -1 unknown */
};

void fres_sample(struct fres *r, const char *device);
/* hw_counters/<name> of @device port 1, or -1. */
long long fhw_counter(const char *device, const char *name);

/* Runs a shell command; returns its exit status (or -1), output appended to stderr. */
int fsh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Runs a shell command in a process group of its own for at most @secs.
 * Returns its exit status, or -ETIMEDOUT after printing where each process
 * of the group sleeps in the kernel (fdump_kstacks()) and killing the group,
 * without waiting for it: a process blocked in the kernel may never exit.
 */
int fsh_within(int secs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints state, wchan and kernel stack (/proc/PID/task/TID/stack) of every thread of @pid. */
void fdump_kstack(pid_t pid);
/* fdump_kstack() of every process in process group @pgid, or that descends from @pgid. */
void fdump_kstacks(pid_t pgid);

#endif /* PC_FAULT_ENV_H */
