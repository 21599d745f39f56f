// SPDX-License-Identifier: MIT
/* rdma_cm private data of pollcore peers; see wire.h. */
#include "wire.h"

#include <stdio.h>
#include "log_pvt.h"

void wire_cm_fill(struct wire_cm_priv *priv, uint32_t credits, uint32_t window,
		  uint64_t credit_addr, uint32_t credit_rkey, uint32_t max_msg)
{
	*priv = (struct wire_cm_priv){
		.magic = PC_CM_MAGIC,
		.credits = credits,
		.credit_addr = credit_addr,
		.credit_rkey = credit_rkey,
		.max_msg = max_msg,
		.window = window,
		.max_large = max_msg,
		.features = PC_CM_FEATURES,
	};
}

int wire_cm_parse(const char *who, const void *data, size_t len, struct wire_cm_priv *out)
{
	struct wire_cm_priv p;
	uint32_t magic;

	if (!data || len < sizeof(magic))
		return 0;
	memcpy(&magic, data, sizeof(magic));
	if (magic != PC_CM_MAGIC)
		return 0;
	if (len < offsetof(struct wire_cm_priv, max_large))
		return set_error(-EPROTO, "%s: peer's connection parameters are invalid "
				    "(%zu bytes, %zu expected)", who, len,
				    offsetof(struct wire_cm_priv, max_large));
	/*
	 * Peers of older layouts end after max_msg/window (28 bytes) or
	 * max_large (32): what they do not send is 0 (as is the CM's
	 * padding). A part of a field is none of it.
	 */
	memset(&p, 0, sizeof(p));
	memcpy(&p, data, len >= sizeof(p) ? sizeof(p)
		   : len >= offsetof(struct wire_cm_priv, features) ? offsetof(struct wire_cm_priv, features)
		   : offsetof(struct wire_cm_priv, max_large));
	if (!p.window || p.window > WIRE_MAX_CREDITS || p.credits > p.window || !p.credit_rkey ||
	    !p.max_msg)
		return set_error(-EPROTO, "%s: peer's connection parameters are invalid "
				    "(credits %u, window %u, rkey 0x%x, max_msg %u)", who, p.credits,
				    p.window, p.credit_rkey, p.max_msg);
	*out = p;
	return 1;
}

void wire_rej_fill(struct wire_cm_rej *rej, const char *why)
{
	memset(rej, 0, sizeof(*rej));
	rej->magic = PC_REJ_MAGIC;
	snprintf(rej->why, sizeof(rej->why), "%s", why);
}

bool wire_rej_parse(const void *data, size_t len, char *out, size_t outlen)
{
	struct wire_cm_rej r;
	size_t i;

	if (!data || len < sizeof(r.magic))
		return false;
	memset(&r, 0, sizeof(r));
	memcpy(&r, data, PC_MIN(len, sizeof(r)));
	if (r.magic != PC_REJ_MAGIC)
		return false;
	for (i = 0; i + 1 < outlen && i < sizeof(r.why) && r.why[i]; i++)
		out[i] = r.why[i] >= 0x20 && r.why[i] < 0x7f ? r.why[i] : '?';
	out[i] = 0;
	return true;
}

int wire_rndv_check(const void *buf, uint32_t len, uint32_t msg_size, uint32_t max_large,
		    struct wire_rndv *out, char *why, size_t whylen)
{
	struct wire_rndv d;

	if (len != sizeof(d)) {
		snprintf(why, whylen, "rendezvous descriptor of %u bytes (%zu expected)", len,
			 sizeof(d));
		return -EPROTO;
	}
	memcpy(&d, buf, sizeof(d));
	if (d.inner > WIRE_RESPONSE) {
		snprintf(why, whylen, "rendezvous descriptor of unknown message type %u", d.inner);
		return -EPROTO;
	}
	if (d.len <= msg_size || d.len > max_large) {
		snprintf(why, whylen, "rendezvous descriptor of %u bytes, outside (%u, %u]", d.len,
			 msg_size, max_large > msg_size ? max_large : msg_size);
		return -EPROTO;
	}
	if (!d.rkey || d.addr + d.len < d.addr) {
		snprintf(why, whylen, "rendezvous descriptor with rkey 0x%x, address 0x%llx",
			 d.rkey, (unsigned long long)d.addr);
		return -EPROTO;
	}
	*out = d;
	return 0;
}

int wire_done_check(const void *buf, uint32_t len, struct wire_done *out)
{
	struct wire_done d;

	if (len != sizeof(d))
		return -EPROTO;
	memcpy(&d, buf, sizeof(d));
	if (d.status > 0)
		return -EPROTO;
	*out = d;
	return 0;
}

int wire_pack_split(const void *buf, uint32_t len, struct wire_hdr *hdrs, uint32_t *offs)
{
	const char *p = buf;
	uint32_t off = 0, n = 0;

	for (;;) {
		struct wire_hdr h;
		uint32_t rest = len - off;
		bool more;

		if (n == WIRE_PACK_MAX || rest < WIRE_HDR_LEN)
			return -EPROTO;
		memcpy(&h, p + off, sizeof(h));
		more = h.type & WIRE_MORE;
		h.type &= (uint8_t)~WIRE_MORE;
		if (h.magic != PC_WIRE_MAGIC || h.type != WIRE_ONEWAY)
			return -EPROTO;
		if (!more) {
			/* the last frame ends the receive; a lone one is no pack */
			if (h.len != rest - WIRE_HDR_LEN || n == 0)
				return -EPROTO;
		} else if (rest < 2 * WIRE_HDR_LEN || h.len > rest - 2 * WIRE_HDR_LEN ||
			   h.len % WIRE_PACK_ALIGN) {
			/* another header must fit after it, 8-byte aligned */
			return -EPROTO;
		}
		hdrs[n] = h;
		offs[n++] = off;
		if (!more)
			return (int)n;
		off += WIRE_HDR_LEN + h.len;
	}
}
