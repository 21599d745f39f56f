// SPDX-License-Identifier: MIT
/*
 * pollcore-stat - what each worker of a running pollcore process is doing,
 * read from its stats segment (/dev/shm/pollcore.<pid>; <pollcore/stats.h>)
 * without stopping or slowing it.
 *
 *   pollcore-stat PID [--interval S] [--count N]   live per-worker table
 *   pollcore-stat PID --conns                     per-connection table
 *   pollcore-stat PID --json                      one snapshot, JSON
 *   pollcore-stat --list [--json]                 pollcore processes, and stale segments
 *   pollcore-stat --clean [PID]                   remove segments whose process is gone
 *   --any-user (root only, with any of the above) also other users' segments
 *
 * A segment whose process is gone (killed), whose pid now belongs to
 * another process, or whose engine was destroyed is stale: it is reported
 * as such, never shown as live, and --clean removes it. One whose owner
 * lives but is not PID here (a namesake from another PID namespace) is not
 * shown either, and never removed. Another user's segment is not read,
 * listed or removed (--list and --clean say which they skipped) unless
 * root asks with --any-user (PC_STATS_ANY_USER); one whose mode lets group
 * or others in is never. Exit status: 0, 1 (no live segment for PID, or an
 * error), 2 (usage).
 *
 * What it shows comes from the library's private copies (pollcore/stats.h):
 * the header as read and checked at open, whatever the file holds later,
 * and each block as read when shown. A segment that shrinks while shown
 * stops the tool (exit 1), naming it.
 */
#include <pollcore/stats.h>

#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG	   "pollcore-stat"
#define MAX_SEGS   16

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " PID [--interval S] [--count N]  live per-worker table\n"
		"       " PROG " PID --conns [--count N]         per-connection table\n"
		"       " PROG " PID --json                      one snapshot as JSON\n"
		"       " PROG " --list [--json]                 pollcore processes and stale segments\n"
		"       " PROG " --clean [PID]                   remove stale segments\n"
		"       --any-user                             (root only) other users' segments too\n"
		"The worker table is refreshed every S seconds (default 1) until interrupted,\n"
		"or N times; rates are per second over the last interval, latency percentiles\n"
		"(pc_call round trips) too. Segments are /dev/shm/pollcore.<pid>[.<n>], mode 0600:\n"
		"run as the process's user. Another user's segment is skipped, even by root,\n"
		"unless root gives --any-user; one that group or others may access, always.\n");
}

#define bad_usage(...) cli_usage_error(__VA_ARGS__)

/* PC_STATS_ANY_USER with --any-user (root only), else 0 */
static unsigned int open_flags;

/* What to do about a segment refused as another user's (pc_last_error() said whose). */
static const char *foreign_hint(bool clean)
{
	if (geteuid() != 0)
		return "; run as its owner";
	return clean ? "; --clean --any-user removes it when stale" : "; --any-user reads it";
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *owner_str(enum pc_stats_owner o)
{
	switch (o) {
	case PC_STATS_OWNER_LIVE: return "live";
	case PC_STATS_OWNER_DEAD: return "stale: the process is gone";
	case PC_STATS_OWNER_REUSED: return "stale: the pid belongs to another process now";
	case PC_STATS_OWNER_ELSEWHERE:
		return "live elsewhere: its owner is not this pid here (another PID namespace)";
	default: return "stale: the engine was destroyed";
	}
}

/* --- segments of a process ------------------------------------------------------------------ */

struct seg {
	char name[64];
	struct pc_stats *s;
	const struct pc_stats_hdr *h;
	enum pc_stats_owner owner;
	struct pc_stats_worker *cur, *prev;	/* nworkers each (of the header read at open) */
	bool *have;				/* per worker: cur read, prev valid */
	bool broken;				/* a read found the file truncated */
};

struct names {
	char name[MAX_SEGS][64];
	int n;
};

static void collect(const char *name, int pid, void *arg)
{
	struct names *ns = arg;

	(void)pid;
	if (ns->n < MAX_SEGS)
		snprintf(ns->name[ns->n++], sizeof(ns->name[0]), "%s", name);
}

static int cmp_names(const void *a, const void *b)
{
	/* pollcore.<pid> first, then .2, .3, ...: shorter names first, then by text */
	size_t la = strlen(a), lb = strlen(b);

	return la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
}

static void seg_close(struct seg *g)
{
	pc_stats_close(g->s);
	free(g->cur);
	free(g->prev);
	free(g->have);
	memset(g, 0, sizeof(*g));
}

/*
 * Worker blocks, zeroed, at their declared alignment (a page): calloc's
 * would do for the bytes, but copies of the type may assume it (UBSan
 * reported every access as misaligned).
 */
static struct pc_stats_worker *workers_alloc(unsigned int n)
{
	size_t len = (size_t)n * sizeof(struct pc_stats_worker);
	struct pc_stats_worker *w = aligned_alloc(_Alignof(struct pc_stats_worker), len);

	if (w)
		memset(w, 0, len);
	return w;
}

/*
 * Opens every segment of @pid into @g; returns how many, stale ones
 * included (owner says); @found: how many names there were, each one
 * refused said why on stderr.
 */
static int open_pid(int pid, struct seg *g, int *found)
{
	struct names ns = { .n = 0 };
	int i, n = 0;

	if (pc_stats_for_each(pid, collect, &ns) < 0) {
		fprintf(stderr, PROG ": %s\n", pc_last_error());
		return -1;
	}
	qsort(ns.name, (size_t)ns.n, sizeof(ns.name[0]), cmp_names);
	*found = ns.n;
	for (i = 0; i < ns.n; i++) {
		struct seg *x = &g[n];

		x->s = pc_stats_open_flags(ns.name[i], open_flags);
		if (!x->s) {
			if (errno == EACCES || errno == EPROTO)
				fprintf(stderr, PROG ": /dev/shm/%s%s\n", pc_last_error(),
					errno == EACCES ? foreign_hint(false) : "");
			else
				fprintf(stderr, PROG ": /dev/shm/%s: %s\n", ns.name[i],
					errno == EAGAIN ? "being created" : strerror(errno));
			continue;
		}
		snprintf(x->name, sizeof(x->name), "%s", ns.name[i]);
		x->h = pc_stats_header(x->s);
		x->owner = pc_stats_owner(x->s);
		x->cur = workers_alloc(x->h->nworkers ? x->h->nworkers : 1);
		x->prev = workers_alloc(x->h->nworkers ? x->h->nworkers : 1);
		x->have = calloc(x->h->nworkers ? x->h->nworkers : 1, sizeof(*x->have));
		if (!x->cur || !x->prev || !x->have) {
			seg_close(x);
			fprintf(stderr, PROG ": out of memory\n");
			continue;
		}
		n++;
	}
	return n;
}

/* Says why each stale segment is not shown; returns the number of live ones. */
static int report_stale(struct seg *g, int n, int pid)
{
	int i, live = 0;

	for (i = 0; i < n; i++) {
		if (g[i].owner == PC_STATS_OWNER_LIVE) {
			live++;
			continue;
		}
		if (g[i].owner == PC_STATS_OWNER_ELSEWHERE)
			fprintf(stderr, PROG ": /dev/shm/%s: %s (pid %d); not shown\n", g[i].name,
				owner_str(g[i].owner), pid);
		else
			fprintf(stderr, PROG ": /dev/shm/%s: %s (pid %d); not shown; remove it with "
				"'" PROG " --clean %d'\n", g[i].name, owner_str(g[i].owner), pid, pid);
	}
	return live;
}

/* Says why a segment can no longer be read; 1, the exit status. */
static int seg_broken(const struct seg *g)
{
	(void)g;
	fprintf(stderr, PROG ": /dev/shm/%s; stopped\n", pc_last_error());
	return 1;
}

/*
 * Reads every worker of @g (as many as its header said at open; the
 * arrays hold that many); rotates the previous reading into prev.
 */
static void seg_sample(struct seg *g)
{
	unsigned int k;

	for (k = 0; k < g->h->nworkers && !g->broken; k++) {
		struct pc_stats_worker w;
		int ret = pc_stats_read_worker(g->s, k, &w);

		if (ret == -EPROTO)
			g->broken = true;
		if (ret)
			continue; /* keep the last good one */
		if (g->have[k])
			g->prev[k] = g->cur[k];
		g->cur[k] = w;
		g->have[k] = true;
	}
}

/* --- the worker table --------------------------------------------------------------------- */

static const char *human(double v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else if (v < 1e4)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1e6)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else if (v < 1e9)
		snprintf(buf, len, "%.2fM", v / 1e6);
	else
		snprintf(buf, len, "%.2fG", v / 1e9);
	return buf;
}

static void us_str(uint64_t ns, bool any, char *buf, size_t len)
{
	if (!any)
		snprintf(buf, len, "-");
	else if (ns < 100000)
		snprintf(buf, len, "%.1f", (double)ns / 1e3);
	else
		snprintf(buf, len, "%.0f", (double)ns / 1e3);
}

/* The interval's histogram: cur minus prev. */
static void hist_delta(const struct pc_stats_hist *cur, const struct pc_stats_hist *prev,
		       struct pc_stats_hist *d)
{
	unsigned int b;

	d->count = cur->count - prev->count;
	d->sum_ns = cur->sum_ns - prev->sum_ns;
	d->max_ns = cur->max_ns;
	for (b = 0; b < PC_STATS_HIST_BUCKETS; b++)
		d->bucket[b] = cur->bucket[b] - prev->bucket[b];
}

static void print_header_line(const struct seg *g)
{
	uint64_t up = (real_ns() - g->h->created_ns) / 1000000000ull;

	printf("%s: pid %d (%s), engine %u on %s, %u worker%s, up %" PRIu64 ":%02" PRIu64
	       ":%02" PRIu64 "\n",
	       g->name, g->h->pid, g->h->comm, g->h->engine, g->h->devices, g->h->nworkers,
	       g->h->nworkers == 1 ? "" : "s", up / 3600, up / 60 % 60, up % 60);
}

static void print_workers(struct seg *g)
{
	static struct pc_stats_hist d;
	uint64_t now = mono_ns();
	unsigned int k, s;

	print_header_line(g);
	printf("%-16s %6s %8s %6s %8s %8s %8s %6s %8s %8s %5s %6s %8s %6s %5s %8s %8s %8s\n",
	       "worker", "idle", "loops/s", "empty%", "cqe/s", "rx/s", "tx/s", "WR/db", "srq/s", "refill/s",
	       "lowwm", "cstall", "ringfull", "sleep%", "conns", "p50us", "p99us", "p99.9us");
	for (k = 0; k < g->h->nworkers; k++) {
		const struct pc_stats_worker *c = &g->cur[k], *p = &g->prev[k];
		const struct pc_worker_stats *a = &c->st, *b = &p->st;
		char r[8][16], lat[3][16];
		double dt;
		uint64_t polls, dbs;

		if (!g->have[k] || !c->publishes) {
			printf("%-16s (not started)\n", a->name[0] ? a->name : "?");
			continue;
		}
		dt = (double)(c->publish_ns - p->publish_ns) / 1e9;
		if (!p->publishes || dt <= 0) {
			/* one reading so far (or none newer): totals only */
			printf("%-16s (waiting for a second reading; %" PRIu64 " loops, %" PRIu64
			       " rx, %" PRIu64 " tx so far)\n",
			       a->name, a->loops, a->rx_msgs, a->tx_msgs);
			continue;
		}
		polls = a->polls - b->polls;
		dbs = a->doorbells - b->doorbells;
		hist_delta(&c->rpc, &p->rpc, &d);
		us_str(pc_stats_hist_percentile(&d, 0.5), d.count, lat[0], sizeof(lat[0]));
		us_str(pc_stats_hist_percentile(&d, 0.99), d.count, lat[1], sizeof(lat[1]));
		us_str(pc_stats_hist_percentile(&d, 0.999), d.count, lat[2], sizeof(lat[2]));
		printf("%-16s %6s %8s %6.1f %8s %8s %8s %6.1f %8s %8s %5" PRIu64 " %6" PRIu64
		       " %8" PRIu64 " %6.1f %5u %8s %8s %8s\n",
		       a->name, a->busy_poll ? "busy" : "hybrid", human((double)(a->loops - b->loops) / dt, r[0], 16),
		       polls ? 100.0 * (double)(a->empty_polls - b->empty_polls) / (double)polls : 0.0,
		       human((double)(a->completions - b->completions) / dt, r[1], 16),
		       human((double)(a->rx_msgs - b->rx_msgs) / dt, r[2], 16),
		       human((double)(a->tx_msgs - b->tx_msgs) / dt, r[3], 16),
		       dbs ? (double)(a->wrs_posted - b->wrs_posted) / (double)dbs : 0.0,
		       human((double)(a->srq_posted - b->srq_posted) / dt, r[4], 16),
		       human((double)(a->srq_doorbells - b->srq_doorbells) / dt, r[5], 16),
		       a->srq_limit_events - b->srq_limit_events, a->credit_stalls - b->credit_stalls,
		       (a->handoff_full + a->submit_full) - (b->handoff_full + b->submit_full),
		       100.0 * (double)(a->sleep_ns - b->sleep_ns) / 1e9 / dt, a->conns, lat[0],
		       lat[1], lat[2]);
		if (now > c->publish_ns + 3000000000ull)
			printf("%-16s   ! no update for %.1f s: the worker is stuck in a handler, or stopped\n",
			       "", (double)(now - c->publish_ns) / 1e9);
	}
	/* failed completions, by status, since the start */
	for (k = 0; k < g->h->nworkers; k++) {
		const struct pc_stats_worker *c = &g->cur[k];
		bool any = false;

		for (s = 1; s < PC_STATS_WC_STATUSES; s++) {
			if (!c->wc_status[s])
				continue;
			if (!any)
				printf("%-16s WC errors since start:", c->st.name);
			printf("%s %s %" PRIu64, any ? "," : "", ibv_wc_status_str((enum ibv_wc_status)s),
			       c->wc_status[s]);
			any = true;
		}
		if (any)
			printf("\n");
	}
	/* the application's pollers (pollcore/poller.h), on workers that have had any */
	for (k = 0; k < g->h->nworkers; k++) {
		const struct pc_worker_stats *a = &g->cur[k].st;

		if (g->have[k] && (a->poller_work || a->poller_errors || a->wakeups_poller))
			printf("%-16s pollers since start: work %" PRIu64 ", errors %" PRIu64
			       ", fd wakeups %" PRIu64 "\n",
			       a->name, a->poller_work, a->poller_errors, a->wakeups_poller);
	}
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = sig;
}

/* Sleeps @ns unless interrupted. */
static void nap(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (!stop && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* --- the connection table ------------------------------------------------------------------- */

static const char *conn_state_str(uint32_t s)
{
	switch (s) {
	case PC_STATS_CONN_ATTACHED: return "attached";
	case PC_STATS_CONN_UP: return "up";
	case PC_STATS_CONN_DRAINING: return "closing";
	case PC_STATS_CONN_DOWN: return "down";
	default: return "?";
	}
}

static void print_conns(struct seg *g)
{
	unsigned int slot, nslots = g->h->nworkers * g->h->conn_slots, shown = 0;	/* < 2^24 */
	uint64_t now = mono_ns();

	print_header_line(g);
	printf("%5s %6s %8s %-8s %-28s %9s %9s %11s %11s %6s %7s %7s %8s %5s %7s %4s %5s %8s %6s %4s "
	       "%8s\n",
	       "slot", "worker", "qp", "state", "peer", "msgs_out", "msgs_in", "bytes_out",
	       "bytes_in", "cstall", "sqstall", "backlog", "inflight", "held", "dropped", "rnr",
	       "retry", "timeouts", "cancel", "late", "age_s");
	for (slot = 0; slot < nslots; slot++) {
		struct pc_stats_conn c;
		char peer[48];
		int ret;

		ret = pc_stats_read_conn(g->s, slot, &c);
		if (ret == -EPROTO) {
			g->broken = true;
			return;
		}
		if (ret)
			continue;
		snprintf(peer, sizeof(peer), "%s%s%u", c.peer, c.raw ? " raw:" : ":", c.peer_port);
		printf("%5u %6u %#8x %-8s %-28s %9" PRIu64 " %9" PRIu64 " %11" PRIu64 " %11" PRIu64
		       " %6" PRIu64 " %7" PRIu64 " %7u %8u %5u %7" PRIu64 " %4" PRIu64 " %5" PRIu64
		       " %8" PRIu64 " %6" PRIu64 " %4" PRIu64 " %8.1f\n",
		       slot, c.worker, c.qp_num, conn_state_str(c.state), peer, c.msgs_sent,
		       c.msgs_recv, c.bytes_sent, c.bytes_recv, c.credit_stalls, c.sq_stalls,
		       c.backlog, c.inflight_req, c.held, c.msgs_dropped, c.rnr_errors,
		       c.retry_errors, c.call_timeouts, c.call_cancels, c.late_responses,
		       now > c.since_ns ? (double)(now - c.since_ns) / 1e9 : 0.0);
		shown++;
	}
	if (!shown)
		printf("(no connections)\n");
}

static int run_table(struct seg *g, int n, int pid, double interval, long count, bool conns)
{
	bool tty = isatty(STDOUT_FILENO);
	uint64_t step = (uint64_t)(interval * 1e9);
	long frame;
	int i;

	for (i = 0; i < n; i++) {
		seg_sample(&g[i]);
		if (g[i].broken)
			return seg_broken(&g[i]);
	}
	for (frame = 0; !stop && (count <= 0 || frame < count); frame++) {
		/* the worker table needs two readings: the first frame comes one interval later */
		if (!conns || frame)
			nap(step);
		if (stop)
			break;
		if (tty && count != 1)
			printf("\033[H\033[2J");
		else if (frame)
			printf("\n");
		for (i = 0; i < n; i++) {
			g[i].owner = pc_stats_owner(g[i].s);
			if (g[i].owner != PC_STATS_OWNER_LIVE) {
				fprintf(stderr, PROG ": /dev/shm/%s: %s (pid %d)\n", g[i].name,
					owner_str(g[i].owner), pid);
				return 1;
			}
			seg_sample(&g[i]);
			if (g[i].broken)
				return seg_broken(&g[i]);
			if (conns)
				print_conns(&g[i]);
			else
				print_workers(&g[i]);
			if (g[i].broken)
				return seg_broken(&g[i]);
		}
		fflush(stdout);
	}
	return 0;
}

/* --- JSON ---------------------------------------------------------------------------------- */

static void json_worker(const struct pc_stats_worker *w, unsigned int idx, uint64_t now)
{
	const struct pc_worker_stats *st = &w->st;
	const char *sep = "";
	unsigned int s;

	printf("{\"index\": %u, \"name\": ", idx);
	cli_json_str(st->name);
	printf(", \"pu\": %d, \"numa_node\": %d, \"publishes\": %" PRIu64 ", \"age_ms\": %.1f, "
	       "\"counters\": {",
	       st->pu, st->numa_node, w->publishes,
	       now > w->publish_ns ? (double)(now - w->publish_ns) / 1e6 : 0.0);
#define X(f)                                                       \
	printf("%s\"" #f "\": %" PRIu64, sep, (uint64_t)st->f); \
	sep = ", ";
	PC_WORKER_STATS_FIELDS(X, X)
#undef X
	printf("}, \"wc_errors_by_status\": {");
	sep = "";
	for (s = 1; s < PC_STATS_WC_STATUSES; s++) {
		if (!w->wc_status[s])
			continue;
		printf("%s", sep);
		cli_json_str(ibv_wc_status_str((enum ibv_wc_status)s));
		printf(": %" PRIu64, w->wc_status[s]);
		sep = ", ";
	}
	printf("}, \"rpc_latency_ns\": {\"count\": %" PRIu64 ", \"mean\": %" PRIu64
	       ", \"p50\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"p999\": %" PRIu64
	       ", \"max\": %" PRIu64 "}}",
	       w->rpc.count, w->rpc.count ? w->rpc.sum_ns / w->rpc.count : 0,
	       pc_stats_hist_percentile(&w->rpc, 0.5), pc_stats_hist_percentile(&w->rpc, 0.99),
	       pc_stats_hist_percentile(&w->rpc, 0.999), w->rpc.max_ns);
}

static void json_conns(struct seg *g, uint64_t now)
{
	unsigned int slot, nslots = g->h->nworkers * g->h->conn_slots;
	const char *sep = "";

	printf("\"conns\": [");
	for (slot = 0; slot < nslots; slot++) {
		struct pc_stats_conn c;
		int ret = pc_stats_read_conn(g->s, slot, &c);

		if (ret == -EPROTO) {
			g->broken = true;
			break;
		}
		if (ret)
			continue;
		printf("%s{\"slot\": %u, \"worker\": %u, \"qp_num\": %u, \"state\": \"%s\", \"peer\": ",
		       sep, slot, c.worker, c.qp_num, conn_state_str(c.state));
		cli_json_str(c.peer);
		printf(", \"peer_port\": %u, \"raw\": %s, \"passive\": %s, \"age_ms\": %.1f, "
		       "\"msgs_sent\": %" PRIu64 ", \"msgs_recv\": %" PRIu64 ", \"bytes_sent\": %" PRIu64
		       ", \"bytes_recv\": %" PRIu64 ", \"credit_stalls\": %" PRIu64
		       ", \"sq_stalls\": %" PRIu64 ", \"msgs_dropped\": %" PRIu64
		       ", \"rnr_errors\": %" PRIu64 ", \"retry_errors\": %" PRIu64
		       ", \"call_timeouts\": %" PRIu64 ", \"call_cancels\": %" PRIu64
		       ", \"late_responses\": %" PRIu64
		       ", \"backlog\": %u, \"inflight_req\": %u, \"held\": %u}",
		       c.peer_port, c.raw ? "true" : "false", c.passive ? "true" : "false",
		       now > c.since_ns ? (double)(now - c.since_ns) / 1e6 : 0.0, c.msgs_sent,
		       c.msgs_recv, c.bytes_sent, c.bytes_recv, c.credit_stalls, c.sq_stalls,
		       c.msgs_dropped, c.rnr_errors, c.retry_errors, c.call_timeouts,
		       c.call_cancels, c.late_responses, c.backlog, c.inflight_req, c.held);
		sep = ", ";
	}
	printf("]");
}

static void json_seg_head(const struct seg *g)
{
	printf("{\"name\": ");
	cli_json_str(g->name);
	printf(", \"pid\": %d, \"engine\": %u, \"comm\": ", g->h->pid, g->h->engine);
	cli_json_str(g->h->comm);
	printf(", \"devices\": ");
	cli_json_str(g->h->devices);
	printf(", \"state\": \"%s\", \"reason\": ",
	       g->owner == PC_STATS_OWNER_LIVE	    ? "live"
	       : g->owner == PC_STATS_OWNER_ELSEWHERE ? "elsewhere"
						    : "stale");
	cli_json_str(owner_str(g->owner));
	printf(", \"start_time\": %" PRIu64 ", \"created_ns\": %" PRIu64
	       ", \"nworkers\": %u, \"conn_slots\": %u",
	       g->h->start_time, g->h->created_ns, g->h->nworkers, g->h->conn_slots);
}

/* One snapshot of every segment of the process; stale ones carry no counters. */
static int run_json(struct seg *g, int n, int pid)
{
	uint64_t now = mono_ns();
	unsigned int k;
	int i, live = 0;

	printf("{\"pid\": %d, \"segments\": [", pid);
	for (i = 0; i < n; i++) {
		printf("%s", i ? ", " : "");
		json_seg_head(&g[i]);
		if (g[i].owner != PC_STATS_OWNER_LIVE) {
			printf("}");
			continue;
		}
		live++;
		seg_sample(&g[i]);
		if (g[i].broken) {
			printf("}]}\n");
			return seg_broken(&g[i]);
		}
		printf(", \"workers\": [");
		for (k = 0; k < g[i].h->nworkers; k++) {
			printf("%s", k ? ", " : "");
			json_worker(&g[i].cur[k], k, now);
		}
		printf("], ");
		json_conns(&g[i], now);
		printf("}");
		if (g[i].broken) {
			printf("]}\n");
			return seg_broken(&g[i]);
		}
	}
	printf("]}\n");
	return live ? 0 : 1;
}

/* --- --list and --clean -------------------------------------------------------------------- */

/* The uid that owns /dev/shm/@name, or -1. */
static long shm_owner(const char *name)
{
	char path[128];
	struct stat sb;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	return lstat(path, &sb) ? -1 : (long)sb.st_uid;
}

static int run_list(bool json)
{
	struct names ns = { .n = 0 };
	char skipped[MAX_SEGS][256];
	int i, live = 0, nskipped = 0;
	uint64_t now = real_ns();

	if (pc_stats_for_each(0, collect, &ns) < 0) {
		fprintf(stderr, PROG ": %s\n", pc_last_error());
		return 1;
	}
	qsort(ns.name, (size_t)ns.n, sizeof(ns.name[0]), cmp_names);
	if (json)
		printf("[");
	else
		printf("%-8s %-6s %-16s %-16s %7s %6s %9s  %s\n", "PID", "ENGINE", "COMMAND",
		       "DEVICES", "WORKERS", "CONNS", "UP_S", "STATE (segment)");
	for (i = 0; i < ns.n; i++) {
		struct pc_stats *s = pc_stats_open_flags(ns.name[i], open_flags);
		const struct pc_stats_hdr *h;
		enum pc_stats_owner o;
		unsigned int k, conns = 0;

		if (!s && errno == EACCES) {
			/* another user's: not parsed, not shown; said below the table */
			if (json) {
				printf("%s{\"name\": ", i ? ", " : "");
				cli_json_str(ns.name[i]);
				printf(", \"state\": \"skipped\", \"owner_uid\": %ld, \"reason\": ",
				       shm_owner(ns.name[i]));
				cli_json_str(pc_last_error());
				printf("}");
			} else {
				snprintf(skipped[nskipped++], sizeof(skipped[0]), "skipped /dev/shm/%s%s",
					 pc_last_error(), foreign_hint(false));
			}
			continue;
		}
		if (!s) {
			const char *why = errno == EAGAIN ? "being created"
					  : errno == EPROTO ? pc_last_error()
							    : strerror(errno);

			if (json) {
				printf("%s{\"name\": ", i ? ", " : "");
				cli_json_str(ns.name[i]);
				printf(", \"state\": \"unreadable\", \"reason\": ");
				cli_json_str(why);
				printf("}");
			} else {
				printf("%-8s %-6s %-16s %-16s %7s %6s %9s  unreadable: %s (%s)\n", "?", "?",
				       "?", "?", "?", "?", "?", why, ns.name[i]);
			}
			continue;
		}
		h = pc_stats_header(s);
		o = pc_stats_owner(s);
		if (o == PC_STATS_OWNER_LIVE) {
			live++;
			for (k = 0; k < h->nworkers; k++) {
				struct pc_stats_worker w;

				if (!pc_stats_read_worker(s, k, &w))
					conns += w.st.conns;
			}
		}
		if (json) {
			struct seg g = { .s = s, .h = h, .owner = o };

			snprintf(g.name, sizeof(g.name), "%s", ns.name[i]);
			printf("%s", i ? ", " : "");
			json_seg_head(&g);
			printf(", \"conns\": %u}", conns);
		} else {
			char nc[16] = "-";

			if (o == PC_STATS_OWNER_LIVE)
				snprintf(nc, sizeof(nc), "%u", conns);
			printf("%-8d %-6u %-16s %-16s %7u %6s %9.0f  %s (%s)\n", h->pid, h->engine,
			       h->comm, h->devices, h->nworkers, nc,
			       (double)(now - h->created_ns) / 1e9, owner_str(o), ns.name[i]);
		}
		pc_stats_close(s);
	}
	if (json)
		printf("]\n");
	else if (!ns.n)
		printf("(no pollcore stats segment in /dev/shm)\n");
	for (i = 0; i < nskipped; i++)
		printf("%s\n", skipped[i]);
	return 0;
}

static int run_clean(int pid)
{
	struct names ns = { .n = 0 };
	int i, ret, status = 0;

	if (pc_stats_for_each(pid, collect, &ns) < 0) {
		fprintf(stderr, PROG ": %s\n", pc_last_error());
		return 1;
	}
	for (i = 0; i < ns.n; i++) {
		ret = pc_stats_clean_flags(ns.name[i], open_flags);
		if (!ret)
			printf("removed /dev/shm/%s (stale)\n", ns.name[i]);
		else if (ret == -EBUSY)
			printf("kept /dev/shm/%s: its process runs\n", ns.name[i]);
		else if (ret == -EACCES)
			printf("kept /dev/shm/%s%s\n", pc_last_error(), foreign_hint(true));
		else if (ret == -EPROTO)
			printf("kept /dev/shm/%s: not a pollcore stats segment of this version, or "
			       "not one to trust (%s)\n",
			       ns.name[i], pc_last_error());
		else if (ret == -EAGAIN)
			printf("kept /dev/shm/%s: not complete (being created)\n", ns.name[i]);
		else if (ret != -ENOENT) {
			fprintf(stderr, PROG ": /dev/shm/%s: %s\n", ns.name[i], strerror(-ret));
			status = 1;
		}
	}
	if (!ns.n && pid)
		printf("no pollcore stats segment of pid %d in /dev/shm\n", pid);
	else if (!ns.n)
		printf("no pollcore stats segment in /dev/shm\n");
	return status;
}

/* --- main ---------------------------------------------------------------------------------- */

static int parse_pid(const char *s, int *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s < '1' || *s > '9' || *end || errno || v > INT32_MAX)
		return -1;
	*pid = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'n'},
	    {"conns", no_argument, NULL, 'c'},	    {"json", no_argument, NULL, 'j'},
	    {"list", no_argument, NULL, 'l'},	    {"clean", no_argument, NULL, 'C'},
	    {"any-user", no_argument, NULL, 'A'},   {"help", no_argument, NULL, 'h'},
	    {0},
	};
	static struct seg segs[MAX_SEGS];
	struct sigaction sa = { .sa_handler = on_signal };
	bool conns = false, json = false, list = false, clean = false, any_user = false;
	double interval = 1.0;
	long count = 0;
	char *end;
	int c, pid = 0, n, i, ret, found = 0;

	cli_init(PROG, usage);
	while ((c = getopt_long(argc, argv, "i:n:cjlCh", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			interval = strtod(optarg, &end);
			if (*end || !(interval >= 0.05 && interval <= 3600))
				return bad_usage("--interval: '%s' is not a number of seconds from 0.05 to 3600",
						 optarg);
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*end || count < 1)
				return bad_usage("--count: '%s' is not a number from 1", optarg);
			break;
		case 'c':
			conns = true;
			break;
		case 'j':
			json = true;
			break;
		case 'l':
			list = true;
			break;
		case 'C':
			clean = true;
			break;
		case 'A':
			any_user = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return bad_usage("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc && parse_pid(argv[optind], &pid))
		return bad_usage("'%s' is not a process id", argv[optind]);
	if (optind + (optind < argc) < argc)
		return bad_usage("unexpected argument '%s'", argv[optind + 1]);
	if (list + clean > 1 || ((list || clean) && (conns || count)) || (list && pid))
		return bad_usage("--list and --clean go alone (--clean may name a PID)");
	if (any_user && !pid && !list && !clean)
		return bad_usage("--any-user goes with PID, --list or --clean");
	if (any_user && geteuid() != 0) {
		fprintf(stderr, PROG ": --any-user: only root may read other users' segments (you are "
			"uid %u)\n", (unsigned int)geteuid());
		return 1;
	}
	open_flags = any_user ? PC_STATS_ANY_USER : 0;
	if (list)
		return run_list(json);
	if (clean)
		return run_clean(pid);
	if (!pid)
		return bad_usage("missing PID (or --list)");
	if (json && (conns || count))
		return bad_usage("--json prints one snapshot of everything: no --conns or --count");

	n = open_pid(pid, segs, &found);
	if (n < 0)
		return 1;
	if (n == 0) {
		/* each one found was refused, saying why */
		if (!found)
			fprintf(stderr, PROG ": no pollcore stats segment for pid %d in /dev/shm "
				"(not a pollcore process)\n", pid);
		return 1;
	}
	if (json) {
		ret = run_json(segs, n, pid);
		if (ret)
			report_stale(segs, n, pid);
	} else if (!report_stale(segs, n, pid)) {
		ret = 1;
	} else {
		/* stale ones were reported: keep the live ones only */
		int live = 0;

		for (i = 0; i < n; i++) {
			if (segs[i].owner == PC_STATS_OWNER_LIVE)
				segs[live++] = segs[i];
			else
				seg_close(&segs[i]);
		}
		n = live;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		ret = run_table(segs, n, pid, interval, count ? count : conns ? 1 : 0, conns);
	}
	for (i = 0; i < n; i++)
		seg_close(&segs[i]);
	return ret;
}
