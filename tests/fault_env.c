// SPDX-License-Identifier: MIT
/* Test-only: the fault tests' server, good clients, log capture and counters; see fault_env.h. */
#include "fault_env.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t fnow_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- expectations ----------------------------------------------------------------- */

static pthread_mutex_t exp_lock = PTHREAD_MUTEX_INITIALIZER;
static char exp_buf[16384];
static size_t exp_len;
static unsigned int exp_failed;

void fexpect(bool ok, const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	if (ok)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "EXPECTATION FAILED %s:%d: %s\n", file, line, msg);
	pthread_mutex_lock(&exp_lock);
	exp_failed++;
	n = snprintf(exp_buf + exp_len, sizeof(exp_buf) - exp_len, "\n  %s:%d: %s", file, line, msg);
	if (n > 0)
		exp_len = PC_MIN(exp_len + (size_t)n, sizeof(exp_buf) - 1);
	pthread_mutex_unlock(&exp_lock);
}

void fexpect_done(void)
{
	unsigned int n;

	pthread_mutex_lock(&exp_lock);
	n = exp_failed;
	/* Check refuses messages over 8 KB (and ends the test without a verdict) */
	if (exp_len > 3000)
		snprintf(exp_buf + 2900, sizeof(exp_buf) - 2900, "\n  ... (the rest above, on stderr)");
	pthread_mutex_unlock(&exp_lock);
	ck_assert_msg(n == 0, "%u expectation(s) failed:%s", n, exp_buf);
}

int frun_one(const char *name, const TTest *test, double timeout_s)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, timeout_s);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* --- log capture --------------------------------------------------------------------- */

#define LOG_LINES 4096

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_ring[LOG_LINES][512];
static unsigned int log_n;

static void log_sink(enum pc_log_level level, const char *msg, void *arg)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };

	(void)arg;
	fprintf(stderr, "pollcore %s: %s\n", names[level], msg);
	pthread_mutex_lock(&log_lock);
	snprintf(log_ring[log_n % LOG_LINES], sizeof(log_ring[0]), "%s", msg);
	log_n++;
	pthread_mutex_unlock(&log_lock);
}

void flog_start(void)
{
	/* a failing Check test's process may end without flushing a full buffer */
	setvbuf(stdout, NULL, _IOLBF, 0);
	pc_log_set_sink(log_sink, NULL);
}

unsigned int flog_mark(void)
{
	unsigned int n;

	pthread_mutex_lock(&log_lock);
	n = log_n;
	pthread_mutex_unlock(&log_lock);
	return n;
}

static bool find_v(unsigned int since, char *out, size_t outlen, const char *first, va_list ap)
{
	const char *needles[8];
	unsigned int nn = 0, i, k;
	bool found = false;
	const char *s;

	for (s = first; s && nn < PC_ARRAY_SIZE(needles); s = va_arg(ap, const char *))
		needles[nn++] = s;
	pthread_mutex_lock(&log_lock);
	if (log_n > LOG_LINES && since < log_n - LOG_LINES)
		since = log_n - LOG_LINES;
	for (i = log_n; i-- > since && !found;) {
		const char *line = log_ring[i % LOG_LINES];

		for (k = 0; k < nn && strcasestr(line, needles[k]); k++)
			;
		if (k == nn) {
			found = true;
			if (out)
				snprintf(out, outlen, "%s", line);
		}
	}
	pthread_mutex_unlock(&log_lock);
	return found;
}

bool flog_find(char *out, size_t outlen, const char *needle, ...)
{
	va_list ap;
	bool r;

	va_start(ap, needle);
	r = find_v(0, out, outlen, needle, ap);
	va_end(ap);
	return r;
}

bool flog_find_since(unsigned int mark, char *out, size_t outlen, const char *needle, ...)
{
	va_list ap;
	bool r;

	va_start(ap, needle);
	r = find_v(mark, out, outlen, needle, ap);
	va_end(ap);
	return r;
}

/* --- payloads --------------------------------------------------------------------------- */

#define GOOD_TAG 0x444f4f47u /* "GOOD" */

struct good_hdr {
	uint32_t tag, conn, seq, len;
};

static uint8_t good_byte(uint32_t conn, uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 31 + i * 7 + conn);
}

static uint32_t good_len(uint32_t seq)
{
	return 64 + (seq * 37) % 960;
}

static uint32_t good_fill(void *data, uint32_t conn, uint32_t seq)
{
	struct good_hdr h = { GOOD_TAG, conn, seq, good_len(seq) };
	uint8_t *b = data;
	uint32_t i;

	memcpy(b, &h, sizeof(h));
	for (i = sizeof(h); i < h.len; i++)
		b[i] = good_byte(conn, seq, i);
	return h.len;
}

static bool is_good(const struct pc_msg *m)
{
	uint32_t tag;

	if (m->len < sizeof(struct good_hdr))
		return false;
	memcpy(&tag, m->data, sizeof(tag));
	return tag == GOOD_TAG;
}

/* --- the echo server -------------------------------------------------------------------- */

#define HELD_MAX 4096

static struct fsrv srv;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct frec recs[FREC_MAX];
static unsigned int nrecs, srv_ups, srv_downs;
static struct pc_msg *held[HELD_MAX];
static unsigned int nheld;

/* Under srv_lock. */
static struct frec *rec_of(uint32_t qpn)
{
	unsigned int i;

	for (i = nrecs; i-- > 0;)
		if (recs[i].qpn == qpn && !recs[i].down)
			return &recs[i];
	if (nrecs == FREC_MAX) {
		/* recycle the oldest closed record; keep the table bounded */
		for (i = 0; i < FREC_MAX && !recs[i].down; i++)
			;
		if (i == FREC_MAX)
			i = 0;
		memmove(&recs[i], &recs[i + 1], (FREC_MAX - i - 1) * sizeof(recs[0]));
		nrecs--;
	}
	memset(&recs[nrecs], 0, sizeof(recs[0]));
	recs[nrecs].qpn = qpn;
	return &recs[nrecs++];
}

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct pc_conn_info in;
	struct frec *r;
	unsigned int i, k;

	(void)arg;
	pc_conn_info(c, &in);
	pthread_mutex_lock(&srv_lock);
	r = rec_of(in.qp_num);
	if (ev == PC_CONN_UP) {
		r->up = true;
		r->raw = in.raw;
		srv_ups++;
		pthread_mutex_unlock(&srv_lock);
		return;
	}
	snprintf(r->reason, sizeof(r->reason), "%s", pc_last_error());
	r->down = true;
	srv_downs++;
	/* its held messages go back now (we are on its worker: direct) */
	for (i = k = 0; i < nheld; i++) {
		if (held[i]->conn == c)
			pc_msg_release(held[i]);
		else
			held[k++] = held[i];
	}
	nheld = k;
	pthread_mutex_unlock(&srv_lock);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	bool good = is_good(m);
	struct pc_conn_info in;
	struct frec *r;
	int rc;

	(void)arg;
	pc_conn_info(m->conn, &in);
	pthread_mutex_lock(&srv_lock);
	r = rec_of(in.qp_num);
	r->msgs++;
	if (!r->up)
		r->before_up++;
	r->bytes += m->len;
	r->max_len = PC_MAX(r->max_len, m->len);
	if (m->type == PC_MSG_RESPONSE)
		r->responses++;
	if (m->len > m->cap)
		r->over_cap++;
	if (!good && atomic_load(&srv.hold) && nheld < HELD_MAX) {
		held[nheld++] = m;
		pthread_mutex_unlock(&srv_lock);
		return;
	}
	pthread_mutex_unlock(&srv_lock);
	if (m->len > m->cap) {
		/* cannot be sent back as it is; the record says it arrived */
		pc_msg_release(m);
		return;
	}
	rc = m->type == PC_MSG_REQUEST ? pc_reply(m) : pc_send(m);
	if (rc == -EMSGSIZE || rc == -ENOBUFS)
		pc_msg_release(m);
	if (rc && rc != -ENOTCONN)
		atomic_fetch_add(&srv.echo_errors, 1);
	if (!rc && good)
		atomic_fetch_add(&srv.good_msgs, 1);
}

/*
 * Attaches the calling thread to slot 0 of @e. pc_engine_destroy() does not
 * drop a thread's attachments: an engine allocated where a destroyed one
 * was reads as attached already (-EALREADY, to the same slot 0), and a
 * thread can attach to 4 engines in its life.
 */
static void attach0(struct pc_engine *e)
{
	int ret = pc_app_attach(e, 0);

	ck_assert_msg(ret == 0 || ret == -EALREADY, "pc_app_attach: %s", pc_last_error());
}

struct fsrv *fsrv_start(const struct pc_engine_params *tweak, const char *addr)
{
	struct pc_engine_params p =
	    tweak ? *tweak : (struct pc_engine_params){.size = sizeof(struct pc_engine_params)};
	int ret;

	p.handoff = PC_HANDOFF_HANDLER;
	p.idle = PC_IDLE_HYBRID;	/* the VM's 2 vCPUs carry 4 and more workers */
	p.on_conn = srv_on_conn;
	p.on_msg = srv_on_msg;
	p.arg = &srv;
	p.no_numa = true;
	srv.e = pc_engine_create(&p);
	ck_assert_msg(srv.e, "server: %s", pc_last_error());
	ret = pc_listen(srv.e, addr, 0);
	ck_assert_msg(ret == 0, "listen on %s: %s", addr, pc_last_error());
	srv.port = pc_listen_port(srv.e);
	attach0(srv.e);
	return &srv;
}

void fsrv_stop(struct fsrv *s)
{
	if (!s->e)
		return;
	atomic_store(&s->hold, false);
	fsrv_release_held(s);
	pc_engine_destroy(s->e);
	s->e = NULL;
}

bool fsrv_rec(struct fsrv *s, uint32_t qpn, struct frec *out)
{
	unsigned int i;
	bool found = false;

	(void)s;
	pthread_mutex_lock(&srv_lock);
	/* the latest record of that QP number (numbers are reused) */
	for (i = nrecs; i-- > 0;)
		if (recs[i].qpn == qpn) {
			*out = recs[i];
			found = true;
			break;
		}
	pthread_mutex_unlock(&srv_lock);
	return found;
}

bool fsrv_wait_down(struct fsrv *s, uint32_t qpn, int ms, struct frec *out)
{
	uint64_t end = fnow_ms() + (uint64_t)ms;
	struct frec r = { 0 };

	do {
		if (fsrv_rec(s, qpn, &r) && r.down)
			break;
		usleep(5000);
	} while (fnow_ms() < end);
	if (out)
		*out = r;
	return r.down;
}

bool fsrv_wait_up(struct fsrv *s, uint32_t qpn, int ms)
{
	uint64_t end = fnow_ms() + (uint64_t)ms;
	struct frec r = { 0 };

	do {
		if (fsrv_rec(s, qpn, &r) && r.up)
			return true;
		usleep(2000);
	} while (fnow_ms() < end);
	return false;
}

void fsrv_counts(struct fsrv *s, unsigned int *up, unsigned int *down)
{
	(void)s;
	pthread_mutex_lock(&srv_lock);
	*up = srv_ups;
	*down = srv_downs;
	pthread_mutex_unlock(&srv_lock);
}

unsigned int fsrv_release_held(struct fsrv *s)
{
	struct pc_msg *mine[HELD_MAX];
	unsigned int n, i;

	(void)s;
	pthread_mutex_lock(&srv_lock);
	n = nheld;
	memcpy(mine, held, n * sizeof(held[0]));
	nheld = 0;
	pthread_mutex_unlock(&srv_lock);
	for (i = 0; i < n; i++)
		while (pc_msg_release(mine[i]) == -ENOBUFS)
			usleep(100);
	return n;
}

unsigned int fsrv_held(struct fsrv *s)
{
	unsigned int n;

	(void)s;
	pthread_mutex_lock(&srv_lock);
	n = nheld;
	pthread_mutex_unlock(&srv_lock);
	return n;
}

static void count_conn(struct pc_conn *c, void *arg)
{
	(void)c;
	(*(unsigned int *)arg)++;
}

unsigned int fengine_conns(struct pc_engine *e)
{
	unsigned int n = 0;

	pc_engine_for_each_conn(e, count_conn, &n);
	return n;
}

/* --- good clients ------------------------------------------------------------------------- */

static struct fcli cli;

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct fgood *g = pc_conn_user(c);

	(void)arg;
	if (ev != PC_CONN_DOWN || !g)
		return;
	snprintf(g->reason, sizeof(g->reason), "%s", pc_last_error());
	atomic_store(&g->down, true);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	struct fgood *g = pc_conn_user(m->conn);
	const uint8_t *b = m->data;
	struct good_hdr h;
	uint32_t i;
	bool ok;

	(void)arg;
	ok = is_good(m) && g;
	if (ok) {
		memcpy(&h, b, sizeof(h));
		ok = h.conn == g->id && h.seq == atomic_load(&g->next) && h.len == m->len &&
		     h.len == good_len(h.seq);
		for (i = sizeof(h); ok && i < m->len; i++)
			ok = b[i] == good_byte(h.conn, h.seq, i);
		atomic_store(&g->next, h.seq + 1);
	}
	if (g) {
		if (!ok)
			atomic_fetch_add(&g->bad, 1);
		atomic_fetch_add(&g->recv, 1);
	}
	pc_msg_release(m);
}

/* Sends on every good connection with fewer than `window` messages in flight. */
static void *flow_main(void *arg)
{
	struct fcli *c = arg;
	unsigned int i, n;

	ck_assert_int_eq(pc_app_attach(c->e, 1), 0);
	while (!atomic_load(&c->stop)) {
		bool busy = false;

		n = atomic_load(&c->n);
		for (i = 0; i < n; i++) {
			struct fgood *g = &c->g[i];
			struct pc_msg *m;
			uint32_t seq = atomic_load(&g->sent);
			int rc;

			if (atomic_load(&g->down) || atomic_load(&g->stopped) ||
			    seq - atomic_load(&g->recv) >= c->window)
				continue;
			m = pc_msg_alloc(g->conn);
			if (!m)
				continue;
			m->len = good_fill(m->data, g->id, seq);
			rc = pc_send(m);
			if (rc == 0) {
				atomic_fetch_add(&g->sent, 1);
				busy = true;
			} else if (rc == -ENOTCONN) {
				atomic_store(&g->stopped, true);
			} else {
				pc_msg_release(m);
			}
		}
		if (!busy)
			usleep(200);
	}
	return NULL;
}

struct fcli *fcli_start(const char *const *devices)
{
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = devices,
		.app_threads = 2,
		.idle = PC_IDLE_HYBRID,
		.on_conn = cli_on_conn,
		.on_msg = cli_on_msg,
		.no_numa = true,
	};

	/* the previous run's handles (pc_connect()'s references) */
	for (unsigned int i = 0; i < atomic_load(&cli.n); i++)
		pc_conn_put(cli.g[i].conn);
	memset(&cli, 0, sizeof(cli));
	cli.window = 16;
	cli.e = pc_engine_create(&p);
	ck_assert_msg(cli.e, "client: %s", pc_last_error());
	attach0(cli.e);
	atomic_store(&cli.running, true);
	ck_assert_int_eq(pthread_create(&cli.flow, NULL, flow_main, &cli), 0);
	return &cli;
}

int fcli_add(struct fcli *c, const char *addr, uint16_t port, int timeout_ms)
{
	unsigned int i = atomic_load(&c->n);
	struct fgood *g = &c->g[i];
	struct pc_conn_info in;

	ck_assert_uint_lt(i, FGOOD_MAX);
	memset(g, 0, sizeof(*g));
	g->id = i;
	g->conn = pc_connect(c->e, addr, port, -1, timeout_ms, g);
	if (!g->conn)
		return -errno;
	pc_conn_info(g->conn, &in);
	g->qpn = in.qp_num;
	snprintf(g->device, sizeof(g->device), "%s", in.device);
	/* publishes the connection to the flow thread */
	atomic_store(&c->n, i + 1);
	return (int)i;
}

bool fcli_wait_recv(struct fcli *c, unsigned int i, unsigned int n, int ms)
{
	uint64_t end = fnow_ms() + (uint64_t)ms;

	while (atomic_load(&c->g[i].recv) < n && fnow_ms() < end)
		usleep(2000);
	return atomic_load(&c->g[i].recv) >= n;
}

void fcli_stop(struct fcli *c)
{
	if (atomic_exchange(&c->running, false)) {
		atomic_store(&c->stop, true);
		pthread_join(c->flow, NULL);
	}
}

void fcli_finish(struct fcli *c, bool may_close)
{
	unsigned int i, n = atomic_load(&c->n);
	uint64_t end;

	fcli_stop(c);
	end = fnow_ms() + 60000;
	for (i = 0; i < n; i++) {
		struct fgood *g = &c->g[i];

		while (!atomic_load(&g->down) && atomic_load(&g->recv) < atomic_load(&g->sent) &&
		       fnow_ms() < end)
			usleep(2000);
		printf("good conn %u (%s qp 0x%x): sent %u, echoed %u, bad %u%s%s\n", i, g->device,
		       g->qpn, atomic_load(&g->sent), atomic_load(&g->recv), atomic_load(&g->bad),
		       atomic_load(&g->down) ? ", DOWN: " : "", atomic_load(&g->down) ? g->reason : "");
		EXPECT(atomic_load(&g->bad) == 0, "good conn %u: %u echoes corrupted or out of order",
		       i, atomic_load(&g->bad));
		if (!may_close)
			EXPECT(!atomic_load(&g->down), "good conn %u (%s qp 0x%x) went DOWN: %s", i,
			       g->device, g->qpn, g->reason);
		if (!atomic_load(&g->down))
			EXPECT(atomic_load(&g->recv) == atomic_load(&g->sent),
			       "good conn %u (%s qp 0x%x): %u sent, %u echoed within 60 s", i,
			       g->device, g->qpn, atomic_load(&g->sent), atomic_load(&g->recv));
		else
			EXPECT(atomic_load(&g->recv) <= atomic_load(&g->sent),
			       "good conn %u: more echoes (%u) than sends (%u)", i,
			       atomic_load(&g->recv), atomic_load(&g->sent));
	}
}

/* --- resources -------------------------------------------------------------------------- */

static long field_after(const char *line, const char *name)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), " %s ", name);
	p = strstr(line, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

void fres_sample(struct fres *r, const char *device)
{
	char line[512], key[80];
	struct dirent *d;
	DIR *dir;
	FILE *f;
	long pages = 0;

	memset(r, 0, sizeof(*r));
	r->qp = r->mr = r->cm_id = r->pd = r->cq = r->srq = -1;
	dir = opendir("/proc/self/fd");
	while (dir && (d = readdir(dir)))
		if (d->d_name[0] != '.')
			r->fds++;
	if (dir) {
		closedir(dir);
		r->fds--;	/* the directory's own fd */
	}
	f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%*s %ld", &pages) == 1)
			r->rss_kb = (unsigned long)pages * (unsigned long)(sysconf(_SC_PAGESIZE) / 1024);
		fclose(f);
	}
	if (!device)
		return;
	/* e.g. "0: rxe0: pd 3 cq 5 qp 4 cm_id 3 mr 10 ctx 2 srq 1" */
	f = popen("rdma resource show 2>/dev/null", "r");
	snprintf(key, sizeof(key), ": %s: ", device);
	while (f && fgets(line, sizeof(line), f)) {
		if (!strstr(line, key))
			continue;
		r->qp = field_after(line, "qp");
		r->mr = field_after(line, "mr");
		r->cm_id = field_after(line, "cm_id");
		r->pd = field_after(line, "pd");
		r->cq = field_after(line, "cq");
		r->srq = field_after(line, "srq");
	}
	if (f)
		pclose(f);
}

long long fhw_counter(const char *device, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", device, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

int fsh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fprintf(stderr, "+ %s\n", cmd);
	fflush(stderr);
	rc = system(cmd);
	return rc == -1 ? -1 : WEXITSTATUS(rc);
}

int fsh_within(int secs, const char *fmt, ...)
{
	uint64_t end = fnow_ms() + (uint64_t)secs * 1000;
	char cmd[512];
	va_list ap;
	pid_t pid;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fprintf(stderr, "+ %s   (within %d s)\n", cmd, secs);
	fflush(stderr);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		setpgid(0, 0);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	do {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		usleep(20000);
	} while (fnow_ms() < end);
	fprintf(stderr, "fsh_within: '%s' still running after %d s; where it sleeps:\n", cmd, secs);
	fdump_kstacks(pid);
	kill(-pid, SIGKILL);
	return -ETIMEDOUT;
}

/* Field @n (1-based, after the comm) of /proc/@pid/stat, or -1. */
static long stat_field(const char *dir, unsigned int n)
{
	char path[300], buf[1024], *p;
	unsigned int i;
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stat", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')'))) {
		/* field 3 is the state; numbers from field 4 (ppid), 5 (pgrp) */
		for (i = 3, p += 2; i < n && p; i++)
			p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
		if (p)
			v = n == 3 ? *p : strtol(p, NULL, 10);
	}
	fclose(f);
	return v;
}

static void cat_indented(const char *path, const char *indent)
{
	char line[256];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "%s%s", indent, line);
	fclose(f);
}

void fdump_kstack(pid_t pid)
{
	char dir[64], path[400], comm[64] = "?", wchan[128] = "";
	struct dirent *d;
	DIR *tasks;
	FILE *f;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	tasks = opendir(dir);
	if (!tasks) {
		fprintf(stderr, "  pid %d: gone\n", (int)pid);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "r");
	if (f) {
		size_t n = fread(comm, 1, sizeof(comm) - 1, f), i;

		comm[n] = 0;
		for (i = 0; n && i < n - 1; i++)
			if (!comm[i])
				comm[i] = ' ';
		fclose(f);
	}
	while ((d = readdir(tasks))) {
		char tdir[96];

		if (d->d_name[0] == '.' || strlen(d->d_name) > 16)
			continue;
		snprintf(tdir, sizeof(tdir), "%s/%.16s", dir, d->d_name);
		snprintf(path, sizeof(path), "%s/wchan", tdir);
		wchan[0] = 0;
		f = fopen(path, "r");
		if (f) {
			if (!fgets(wchan, sizeof(wchan), f))
				wchan[0] = 0;
			fclose(f);
		}
		fprintf(stderr, "  pid %d tid %s (%s): state %c, wchan %s\n", (int)pid, d->d_name,
			comm, (int)stat_field(tdir, 3), wchan[0] ? wchan : "-");
		snprintf(path, sizeof(path), "%s/stack", tdir);
		cat_indented(path, "      ");
	}
	closedir(tasks);
}

/* Whether @pid is in group @pgid or descends from @pgid. */
static bool in_tree(pid_t pid, pid_t pgid)
{
	char dir[64];
	unsigned int depth;

	for (depth = 0; pid > 1 && depth < 64; depth++) {
		snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
		if (pid == pgid || stat_field(dir, 5) == pgid)
			return true;
		pid = (pid_t)stat_field(dir, 4);
	}
	return false;
}

void fdump_kstacks(pid_t pgid)
{
	struct dirent *d;
	DIR *proc = opendir("/proc");

	while (proc && (d = readdir(proc))) {
		pid_t pid = (pid_t)atoi(d->d_name);

		if (pid > 0 && in_tree(pid, pgid))
			fdump_kstack(pid);
	}
	if (proc)
		closedir(proc);
}
