// SPDX-License-Identifier: MIT
/* rdma_cm private data of pollcore peers; see wire.h. */
#include "wire.h"

void wire_cm_fill(struct wire_cm_priv *priv, uint32_t credits, uint64_t credit_addr,
		  uint32_t credit_rkey, uint32_t max_msg)
{
	*priv = (struct wire_cm_priv){
		.magic = PC_CM_MAGIC,
		.credits = credits,
		.credit_addr = credit_addr,
		.credit_rkey = credit_rkey,
		.max_msg = max_msg,
	};
}

int wire_cm_parse(const char *who, const void *data, size_t len, struct wire_cm_priv *out)
{
	struct wire_cm_priv p;

	if (!data || len < sizeof(p))
		return 0;
	memcpy(&p, data, sizeof(p));
	if (p.magic != PC_CM_MAGIC)
		return 0;
	if (p.credits == 0 || p.credits > WIRE_MAX_CREDITS || !p.credit_rkey || !p.max_msg)
		return pc_set_error(-EPROTO, "%s: peer's connection parameters are invalid "
				    "(credits %u, rkey 0x%x, max_msg %u)", who, p.credits,
				    p.credit_rkey, p.max_msg);
	*out = p;
	return 1;
}
