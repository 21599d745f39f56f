// SPDX-License-Identifier: MIT
/*
 * unit suite (test doc_figures): prints "name value" for every figure that
 * docs/ (its .md files) states about the code, taken from the code itself: the
 * engine's defaults as params_normalise() in workers/engine.c applies them
 * (that file is compiled into this program; the rest of the library comes
 * from its static archives), the constants of the public and private
 * headers, and the sizes of the structures named. tests/test_doc_figures.py
 * compares each with the figure a doc marks with <!-- fig: NAME -->, and
 * adds the few constants that live in .c files (their #define lines).
 */
#include "../workers/engine.c"

#include <pollcore/poller.h>
#include <pollcore/stats.h>

#include "conn.h"
#include "idle_pvt.h"
#include "stats_pvt.h"
#include "wire.h"

static void on_msg(struct pc_msg *m, void *arg)
{
	(void)m;
	(void)arg;
}

#define U(name, v) printf("%s %llu\n", name, (unsigned long long)(v))
#define S(name, v) printf("%s %s\n", name, v)

static const char *idle_name(enum pc_idle i)
{
	return i == PC_IDLE_AUTO ? "PC_IDLE_AUTO" : i == PC_IDLE_BUSY ? "PC_IDLE_BUSY" : "PC_IDLE_HYBRID";
}

int main(void)
{
	struct pc_engine_params p = { .size = sizeof(p), .on_msg = on_msg };
	uint32_t buf;

	if (params_normalise(&p)) {
		fprintf(stderr, "doc_figures: params_normalise: %s\n", pc_last_error());
		return 1;
	}
	/* the engine's defaults (docs write them as "default.FIELD") */
	U("default.workers_per_device", p.workers_per_device);
	U("default.app_threads", p.app_threads);
	U("default.msg_size", p.msg_size);
	U("default.rx_bufs", p.rx_bufs);
	U("default.tx_bufs", p.tx_bufs);
	U("default.raw_bufs", p.raw_bufs);
	U("default.srq_depth", p.srq_depth);
	U("default.srq_watermark", p.srq_watermark);
	U("default.sq_depth", p.sq_depth);
	U("default.max_inline", p.max_inline);
	U("default.signal_every", p.signal_every);
	U("default.poll_batch", p.poll_batch);
	U("default.window", p.window);
	U("default.min_window", p.min_window);
	U("default.ring_size", p.ring_size);
	U("default.max_conns_per_worker", p.max_conns_per_worker);
	U("default.max_unanswered", p.max_unanswered);
	U("default.max_calls", p.max_calls);
	U("default.max_msg_size_mib", p.max_msg_size >> 20);
	U("default.large_pool_size_mib", p.large_pool_size >> 20);
	U("default.idle_spins", p.idle_spins);
	U("default.idle_spin_us", p.idle_spin_us);
	S("default.idle", idle_name(p.idle));
	U("default.grant_delay_us", p.grant_delay_us);
	U("default.grant_delay_ms", p.grant_delay_us / 1000);
	U("default.keepalive_ms", p.keepalive_ms);
	U("default.keepalive_s", p.keepalive_ms / 1000);
	U("PC_WINDOW_DEFAULT", PC_WINDOW_DEFAULT);
	U("PC_MAX_MSG_DEFAULT_MIB", PC_MAX_MSG_DEFAULT >> 20);
	U("PC_RAW_DEPTH_DEFAULT", PC_RAW_DEPTH_DEFAULT);
	U("PC_WORKER_MAX_POLLERS", PC_WORKER_MAX_POLLERS);
	U("PC_CONNECT_DATA_MAX", PC_CONNECT_DATA_MAX);
	U("PC_ACCEPT_DATA_MAX", PC_ACCEPT_DATA_MAX);
	U("PC_REJECT_DATA_MAX", PC_REJECT_DATA_MAX);
	/* a worker's buffers: msg_size + the header, rounded to a cache line, rx + tx */
	buf = (p.msg_size + WIRE_HDR_LEN + PC_CACHELINE - 1) / PC_CACHELINE * PC_CACHELINE;
	printf("default.worker_buffers_mb %.1f\n",
	       (double)buf * (p.rx_bufs + p.tx_bufs) / 1e6);
	U("default.sq_slots_kib", p.sq_depth * 8 / 1024);

	/* the wire */
	U("wire.header_bytes", sizeof(struct wire_hdr));
	U("WIRE_MAX_CREDITS", WIRE_MAX_CREDITS);
	U("WIRE_RNDV_MAX", WIRE_RNDV_MAX);
	U("wire.cm_private_bytes", sizeof(struct wire_cm_priv));
	U("wire.pack_max", WIRE_PACK_MAX);

	/* rendezvous */
	U("rndv.block_kib", (1u << RNDV_MIN_SHIFT) >> 10);
	U("RNDV_ZC_SLOTS", RNDV_ZC_SLOTS);
	U("RNDV_OLDEST_LIMITS", RNDV_OLDEST_LIMITS);

	/* the worker */
	U("sizeof.conn", sizeof(struct conn));
	U("worker.qpn_cache", PC_ARRAY_SIZE(((struct pc_worker *)0)->cache));
	U("HOUSEKEEP_TURNS", HOUSEKEEP_TURNS);
	U("IDLE_CLOCK_TURNS", IDLE_CLOCK_TURNS);
	U("idle.spin_cap_mult", IDLE_SPIN_CAP_MULT);
	U("idle.spin_cap_us", IDLE_SPIN_CAP_US);
	U("SUBMIT_BURST", SUBMIT_BURST);
	U("KA_BUSY_TURNS", KA_BUSY_TURNS);
	U("KA_IDLE_TURNS", KA_IDLE_TURNS);

	/* the stats segment */
	U("PC_STATS_VERSION", PC_STATS_VERSION);
	U("stats.max_workers", STATS_MAX_WORKERS);
	U("stats.max_slots_log2", __builtin_ctz(STATS_MAX_SLOTS));
	U("stats.publish_ms", STATS_PUBLISH_NS / 1000000);
	U("stats.publish_turns", STATS_PUBLISH_TURNS);
	U("stats.hist_exact", 1u << PC_STATS_HIST_SUB_BITS);
	U("stats.hist_per_octave", 1u << (PC_STATS_HIST_SUB_BITS - 1));
	U("stats.hist_top_log2", PC_STATS_HIST_SUB_BITS + PC_STATS_HIST_OCTAVES);
	U("stats.hist_buckets", PC_STATS_HIST_BUCKETS);
	return 0;
}
