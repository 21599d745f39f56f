// SPDX-License-Identifier: MIT
/*
 * pollcore-kv client: making calls and checking what they bring back (the
 * rest is in client.c, which says how the client works).
 *
 * Every call completes exactly once, in kv_done(), inside pc_app_poll() on
 * the client's thread: answered (ops, checked here), timed out, cancelled
 * or failed. A key has one call in flight at a time and travels on one
 * connection, so the client knows what the server holds: every PUT writes
 * the key's next version, and every answer is checked against the state
 * the key must be in (check()).
 */
#include "kv.h"
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

static void note(struct client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct client *cl, const char *fmt, ...)
{
	va_list ap;

	if (cl->first_err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(cl->first_err, sizeof(cl->first_err), fmt, ap);
	va_end(ap);
}

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return kv_mix(*s);
}

/* A response to flight @f: is it what the key should hold? Counts a mismatch if not. */
static void check(struct client *cl, struct flight *f, const struct pc_msg *m)
{
	struct key_state *k = &cl->ks[f->key];
	uint64_t key = cl->salt + f->key;
	uint32_t got = 0, bad;
	struct kv_hdr h;
	bool ok;

	if (m->len < sizeof(h) || (memcpy(&h, m->data, sizeof(h)), h.key != key)) {
		cl->mismatches++;
		note(cl, "key %" PRIu64 ": a response of %u bytes for another key", key, m->len);
		return;
	}
	if (h.code == KV_FULL || h.code == KV_BAD) {
		cl->errors++;
		note(cl, "key %" PRIu64 ": the server refused the request (%s)", key,
		     h.code == KV_FULL ? "shard full" : "malformed");
		return;
	}
	cl->ops++;
	switch (f->op) {
	case KV_PUT:
		ok = h.code == KV_OK;
		got = f->ver;
		break;
	case KV_DEL:
		ok = k->uncertain || h.code == (k->base ? KV_OK : KV_NOTFOUND);
		ok = ok && (h.code == KV_OK || h.code == KV_NOTFOUND);
		break;
	default: /* GET */
		if (h.code == KV_NOTFOUND) {
			ok = m->len == sizeof(h) && (!k->base || (k->uncertain && k->unc_del));
			break;
		}
		got = h.ver;
		ok = h.code == KV_OK && got && got <= k->maxver &&
		     (got == k->base || (k->uncertain && got > k->floor));
		if (!ok)
			break;
		if (h.vlen != kv_vlen(key, got) || m->len != sizeof(h) + h.vlen) {
			ok = false;
			note(cl, "key %" PRIu64 " version %u: %u bytes of value, expected %u", key,
			     got, h.vlen, kv_vlen(key, got));
			break;
		}
		bad = kv_vcheck((const uint8_t *)m->data + sizeof(h), key, got, h.vlen);
		if (bad != h.vlen) {
			ok = false;
			note(cl,
			     "key %" PRIu64 " version %u: value byte %u is 0x%02x, expected 0x%02x",
			     key, got, bad, ((const uint8_t *)m->data)[sizeof(h) + bad],
			     kv_vbyte(key, got, bad));
		}
		break;
	}
	if (!ok) {
		cl->mismatches++;
		note(cl,
		     "key %" PRIu64 ": op %u answered %u (version %u), expected version %u%s "
		     "(newest made %u)",
		     key, f->op, h.code, h.ver, k->base, k->uncertain ? " or a newer one" : "",
		     k->maxver);
	}
	/* the answer is what the server holds now */
	k->base = got;
	k->floor = k->maxver;
	k->uncertain = k->unc_del = false;
}

/* The completion of every call: inside pc_app_poll(), on this thread. */
static void kv_done(struct pc_msg *m, int status, void *arg)
{
	struct flight *f = arg;
	struct cconn *x = f->x;
	struct client *cl = x->cl;
	struct key_state *k = &cl->ks[f->key];
	struct kv_hdr h;

	if (!f->busy) {
		cl->duplicates++;
		note(cl, "a call completed twice (status %d)", status);
		pc_msg_release(m);
		return;
	}
	f->busy = false;
	k->busy = false;
	x->free_fl[x->nfree++] = (uint32_t)(f - x->fl);
	cl->inflight--;
	if (!status) {
		check(cl, f, m);
		pc_msg_release(m);
		return;
	}
	if (status == -ETIMEDOUT)
		cl->timeouts++;
	else if (status == -ECANCELED)
		cl->cancelled++;
	else {
		cl->errors++;
		note(cl, "a call ended with %s", strerror(-status));
	}
	/* the request comes back as it was sent */
	memcpy(&h, m->data, m->len >= sizeof(h) ? sizeof(h) : 0);
	if (m->len < sizeof(h) || h.key != cl->salt + f->key || h.code != f->op) {
		cl->mismatches++;
		note(cl, "a failed call gave back a request that is not the one sent");
	}
	if (f->op != KV_GET)
		k->uncertain = true;
	if (f->op == KV_DEL)
		k->unc_del = true;
	pc_msg_release(m);
}

/* Makes one call on @x; false when @x can take no more now. */
bool kv_issue(struct client *cl, struct cconn *x)
{
	struct key_state *k = NULL;
	struct flight *f;
	struct pc_msg *m;
	struct kv_hdr h = {0};
	uint32_t ki = 0, i, r;
	uint64_t id;
	int ret;

	if (!x->nfree || !x->nkeys || x->dead)
		return false;
	for (i = 0; i < 8; i++) {
		ki = x->keys[rnd(&x->rng) % x->nkeys];
		k = &cl->ks[ki];
		if (!k->busy)
			break;
	}
	if (k->busy)
		return false; /* unlucky; another turn */
	cl->allocs++;
	m = pc_msg_alloc(x->conn);
	if (!m) {
		if (errno == ENOBUFS) {
			/* the slot's stock of send buffers is empty: calls ending fill it */
			cl->enobufs++;
			return false;
		}
		cl->refused++;
		note(cl, "pc_msg_alloc: %s", strerror(errno));
		x->dead = true;
		return false;
	}
	r = (uint32_t)(rnd(&x->rng) % 100);
	h.code = r < 50 ? KV_GET : r < 85 ? KV_PUT : KV_DEL;
	h.key = cl->salt + ki;
	if (h.code == KV_PUT) {
		h.ver = k->maxver + 1;
		h.vlen = kv_vlen(h.key, h.ver);
		kv_vfill((uint8_t *)m->data + sizeof(h), h.key, h.ver, h.vlen);
	}
	memcpy(m->data, &h, sizeof(h));
	m->len = (uint32_t)sizeof(h) + h.vlen;
	f = &x->fl[x->free_fl[--x->nfree]];
	*f = (struct flight){.x = x, .key = ki, .ver = h.ver, .op = h.code, .busy = true};
	/* beyond the window the call waits in the engine, its deadline running: never refused */
	ret = pc_call(m, kv_done, f, (uint64_t)cl->timeout_ms * 1000, &id);
	if (ret) {
		f->busy = false;
		x->nfree++;
		cl->eagain += ret == -EAGAIN;
		cl->refused++;
		note(cl, "pc_call: %s (%s)", strerror(-ret), pc_last_error());
		x->dead = ret == -ENOTCONN;
		if (ret != -ENOTCONN)
			pc_msg_release(m);
		return false;
	}
	cl->calls++;
	cl->inflight++;
	k->busy = true;
	if (h.code == KV_PUT)
		k->maxver = h.ver;
	cl->gets += h.code == KV_GET;
	cl->puts += h.code == KV_PUT;
	cl->dels += h.code == KV_DEL;
	if (h.code == KV_GET && cl->cancel_every && cl->gets % cl->cancel_every == 0) {
		/* on purpose: it ends -ECANCELED, or answered if the response won */
		ret = pc_call_cancel(x->conn, id);
		cl->cancels += !ret;
		cl->cancel_fail += !!ret;
	}
	return true;
}
