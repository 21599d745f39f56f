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
	if (len < sizeof(p))
		return set_error(-EPROTO, "%s: peer's connection parameters are invalid "
				    "(%zu bytes, %zu expected)", who, len, sizeof(p));
	memcpy(&p, data, sizeof(p));
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
