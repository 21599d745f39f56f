/* SPDX-License-Identifier: MIT */
/*
 * tools/nvmf/nvme_wire.h - the NVMe and NVMe-oF/RDMA wire formats
 * pollcore-nvmf speaks, written from the NVMe Base 1.4 and NVMe over Fabrics
 * 1.1 specifications (layouts cross-checked against Linux's
 * include/linux/nvme.h and nvme-rdma.h; no code taken from them).
 *
 * Byte order: every multi-byte field on the wire is little-endian. These
 * structs declare fields in host order and are only valid on a
 * little-endian host, which the static_assert below enforces (pollcore
 * runs on x86-64 and arm64 little-endian). Fields that the spec places at
 * offsets C would not align (24-bit SGL lengths, the SMART temperature) are
 * byte arrays with accessors. Every struct's size and its key offsets are
 * asserted.
 */
#ifndef NVME_WIRE_H
#define NVME_WIRE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	      "nvme_wire.h lays out NVMe's little-endian fields in host order");

/* ---- names and sizes ---------------------------------------------------- */

#define NVME_DISC_NQN	     "nqn.2014-08.org.nvmexpress.discovery"
#define NVMF_NQN_FIELD	     256 /* an NQN field in Connect data and logs */
#define NVMF_NQN_MAX	     223 /* the longest NQN, without its NUL */
#define NVMF_TRSVCID_FIELD   32
#define NVMF_TRADDR_FIELD    256
#define NVME_NSID_ALL	     0xffffffffu
#define NVME_IDENTIFY_SIZE   4096
#define NVME_CNTLID_MIN	     1
#define NVME_CNTLID_MAX	     0xffef
#define NVME_CNTLID_DYNAMIC  0xffff /* Connect data: "any" (dynamic controller model) */
#define NVME_CHANGED_NS_MAX  1024
#define NVME_DSM_RANGES_MAX  256
#define NVMF_RDMA_PORT	     4420
#define NVME_AQ_DEPTH	     32 /* admin queue entries Linux asks for (ASQSZ) */

/* ---- opcodes ------------------------------------------------------------ */

enum nvme_admin_opc {
	NVME_ADM_GET_LOG_PAGE = 0x02,
	NVME_ADM_IDENTIFY = 0x06,
	NVME_ADM_ABORT = 0x08,
	NVME_ADM_SET_FEATURES = 0x09,
	NVME_ADM_GET_FEATURES = 0x0a,
	NVME_ADM_ASYNC_EVENT = 0x0c,
	NVME_ADM_KEEP_ALIVE = 0x18,
	NVME_OPC_FABRICS = 0x7f, /* on admin and I/O queues */
};

enum nvme_io_opc {
	NVME_IO_FLUSH = 0x00,
	NVME_IO_WRITE = 0x01,
	NVME_IO_READ = 0x02,
	NVME_IO_WRITE_ZEROES = 0x08,
	NVME_IO_DSM = 0x09,
};

/* Fabrics command type (FCTYPE, SQE byte 4) */
enum nvmf_fctype {
	NVMF_FCT_PROP_SET = 0x00,
	NVMF_FCT_CONNECT = 0x01,
	NVMF_FCT_PROP_GET = 0x04,
	NVMF_FCT_AUTH_SEND = 0x05,
	NVMF_FCT_AUTH_RECV = 0x06,
	NVMF_FCT_DISCONNECT = 0x08,
};

/* ---- status (CQE Status Field, without the phase bit) -------------------- */

/*
 * A status as SCT << 8 | SC, with NVME_DNR and NVME_MORE on top: the CQE's
 * 16-bit status word is this shifted left by one, the phase tag in bit 0
 * (always 0 over fabrics). Named NVME_SC_<what>.
 */
enum nvme_status {
	NVME_SC_SUCCESS = 0x000,
	/* generic command status (SCT 0) */
	NVME_SC_INVALID_OPCODE = 0x001,
	NVME_SC_INVALID_FIELD = 0x002,
	NVME_SC_DATA_XFER_ERROR = 0x004,
	NVME_SC_INTERNAL = 0x006,
	NVME_SC_INVALID_NS = 0x00b, /* Invalid Namespace or Format */
	NVME_SC_CMD_SEQ_ERROR = 0x00c,
	NVME_SC_SGL_DATA_LEN = 0x00f,  /* Data SGL Length Invalid */
	NVME_SC_SGL_TYPE = 0x011,      /* SGL Descriptor Type Invalid */
	NVME_SC_SGL_OFFSET = 0x016,    /* SGL Offset Invalid */
	NVME_SC_NS_WRITE_PROTECTED = 0x020, /* Namespace is Write Protected */
	NVME_SC_LBA_RANGE = 0x080,     /* LBA Out of Range */
	NVME_SC_CAP_EXCEEDED = 0x081,
	/* command specific (SCT 1) */
	NVME_SC_INVALID_QID = 0x101,
	NVME_SC_ASYNC_LIMIT = 0x105,   /* Asynchronous Event Request Limit Exceeded */
	NVME_SC_INVALID_LOG_PAGE = 0x109,
	NVME_SC_FEAT_NOT_SAVEABLE = 0x10d,
	NVME_SC_FEAT_NOT_NS = 0x10f,   /* Feature Not Namespace Specific */
	NVME_SC_CONNECT_FORMAT = 0x180, /* Connect Incompatible Format */
	NVME_SC_CONNECT_BUSY = 0x181,	/* Connect Controller Busy */
	NVME_SC_CONNECT_INVALID = 0x182, /* Connect Invalid Parameters */
	NVME_SC_CONNECT_HOST = 0x184,	 /* Connect Invalid Host */
	/* media and data integrity (SCT 2) */
	NVME_SC_WRITE_FAULT = 0x280,
	NVME_SC_READ_ERROR = 0x281, /* Unrecovered Read Error */

	NVME_MORE = 0x2000,
	NVME_DNR = 0x4000,
};

#define NVME_SC(s)  ((s) & 0xff)
#define NVME_SCT(s) (((s) >> 8) & 0x7)

/* Connect's Invalid Parameters result: IATTR (bit 16) says SQE or data, IPO the offset */
#define NVMF_IPO_SQE(off)  ((uint32_t)(off))
#define NVMF_IPO_DATA(off) ((uint32_t)(1u << 16) | (uint32_t)(off))

/* ---- SGL descriptors --------------------------------------------------- */

/* SGL identifier byte: descriptor type in bits 7:4, subtype in 3:0 */
enum nvme_sgl_type {
	NVME_SGL_DATA = 0x0,	  /* data block */
	NVME_SGL_BIT_BUCKET = 0x1,
	NVME_SGL_SEGMENT = 0x2,
	NVME_SGL_LAST_SEGMENT = 0x3,
	NVME_SGL_KEYED = 0x4,	  /* keyed data block (RDMA) */
	NVME_SGL_TRANSPORT = 0x5, /* transport SGL data block */
};

enum nvme_sgl_subtype {
	NVME_SGL_SUB_ADDRESS = 0x0,
	NVME_SGL_SUB_OFFSET = 0x1,     /* in-capsule data, address = offset */
	NVME_SGL_SUB_INVALIDATE = 0xf, /* keyed: the host asks for SEND with Invalidate */
};

/*
 * struct nvme_sgl - a 16-byte SGL descriptor. Keyed: length is bytes 8-10
 * (24 bits), key bytes 11-14. Unkeyed: length is bytes 8-11 (32 bits).
 */
struct nvme_sgl {
	uint64_t addr;
	uint8_t len_key[7];
	uint8_t type; /* type << 4 | subtype */
};
static_assert(sizeof(struct nvme_sgl) == 16, "SGL descriptor");
static_assert(offsetof(struct nvme_sgl, type) == 15, "SGL identifier");

static inline uint32_t nvme_sgl_keyed_len(const struct nvme_sgl *s)
{
	return s->len_key[0] | (uint32_t)s->len_key[1] << 8 | (uint32_t)s->len_key[2] << 16;
}

static inline uint32_t nvme_sgl_key(const struct nvme_sgl *s)
{
	uint32_t k;

	memcpy(&k, s->len_key + 3, 4);
	return k;
}

static inline uint32_t nvme_sgl_len(const struct nvme_sgl *s)
{
	uint32_t l;

	memcpy(&l, s->len_key, 4);
	return l;
}

static inline void nvme_sgl_set_keyed(struct nvme_sgl *s, uint64_t addr, uint32_t len,
				      uint32_t key, uint8_t subtype)
{
	s->addr = addr;
	s->len_key[0] = len & 0xff;
	s->len_key[1] = (len >> 8) & 0xff;
	s->len_key[2] = (len >> 16) & 0xff;
	memcpy(s->len_key + 3, &key, 4);
	s->type = (uint8_t)(NVME_SGL_KEYED << 4 | subtype);
}

static inline void nvme_sgl_set_offset(struct nvme_sgl *s, uint64_t off, uint32_t len)
{
	s->addr = off;
	memcpy(s->len_key, &len, 4);
	memset(s->len_key + 4, 0, 3);
	s->type = NVME_SGL_DATA << 4 | NVME_SGL_SUB_OFFSET;
}

/* ---- the 64-byte submission queue entry --------------------------------- */

/* CDW0 flags: FUSE in bits 1:0, PSDT in bits 7:6 (01b: SGL, metadata buffer) */
#define NVME_FLAGS_FUSE_MASK 0x03
#define NVME_FLAGS_PSDT_MASK 0xc0
#define NVME_FLAGS_PSDT_SGL  0x40

/**
 * struct nvme_sqe - the common command format.
 * @opcode: admin, I/O or NVME_OPC_FABRICS.
 * @flags: FUSE and PSDT.
 * @cid: command identifier, echoed in the CQE.
 * @nsid: namespace; byte 4 is FCTYPE in a Fabrics command.
 * @cdw2: reserved here.
 * @cdw3: reserved here.
 * @mptr: metadata pointer (unused: no namespace has metadata).
 * @dptr: the data pointer, one SGL descriptor.
 * @cdw10: command specific.
 * @cdw11: command specific.
 * @cdw12: command specific.
 * @cdw13: command specific.
 * @cdw14: command specific.
 * @cdw15: command specific.
 */
struct nvme_sqe {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2;
	uint32_t cdw3;
	uint64_t mptr;
	struct nvme_sgl dptr;
	uint32_t cdw10;
	uint32_t cdw11;
	uint32_t cdw12;
	uint32_t cdw13;
	uint32_t cdw14;
	uint32_t cdw15;
};
static_assert(sizeof(struct nvme_sqe) == 64, "SQE");
static_assert(offsetof(struct nvme_sqe, cid) == 2, "SQE cid");
static_assert(offsetof(struct nvme_sqe, nsid) == 4, "SQE nsid");
static_assert(offsetof(struct nvme_sqe, mptr) == 16, "SQE mptr");
static_assert(offsetof(struct nvme_sqe, dptr) == 24, "SQE dptr");
static_assert(offsetof(struct nvme_sqe, cdw10) == 40, "SQE cdw10");
static_assert(offsetof(struct nvme_sqe, cdw15) == 60, "SQE cdw15");

#define NVME_SQE_FCTYPE_OFF 4 /* a Fabrics command's type, inside nsid */

static inline uint8_t nvme_sqe_fctype(const struct nvme_sqe *c)
{
	return ((const uint8_t *)c)[NVME_SQE_FCTYPE_OFF];
}

/* Read / Write / Write Zeroes: SLBA in CDW10-11; CDW12 as below */
#define NVME_RW_NLB_MASK   0xffffu    /* 0's based */
#define NVME_RW_DEAC	   (1u << 25) /* Write Zeroes: deallocate */
#define NVME_RW_DTYPE_MASK (0xfu << 20)
#define NVME_RW_PRINFO	   (0xfu << 26)
#define NVME_RW_FUA	   (1u << 30)
#define NVME_RW_LR	   (1u << 31)

/* Dataset Management: CDW10 NR (0's based), CDW11 attributes */
#define NVME_DSM_NR_MASK 0xffu
#define NVME_DSM_IDR	 (1u << 0)
#define NVME_DSM_IDW	 (1u << 1)
#define NVME_DSM_AD	 (1u << 2)

/**
 * struct nvme_dsm_range - one Dataset Management range (16 bytes).
 * @cattr: context attributes (ignored).
 * @nlb: logical blocks, 1's based (unlike Read and Write).
 * @slba: first logical block.
 */
struct nvme_dsm_range {
	uint32_t cattr;
	uint32_t nlb;
	uint64_t slba;
};
static_assert(sizeof(struct nvme_dsm_range) == 16, "DSM range");

/* ---- the 16-byte completion queue entry --------------------------------- */

/**
 * struct nvme_cqe - a completion.
 * @result: command specific (Connect: cntlid; Property Get: the value).
 * @sq_head: SQ head pointer (0xffff when SQ flow control is disabled).
 * @sq_id: the queue's qid.
 * @cid: the command's identifier.
 * @status: (enum nvme_status) << 1 | phase.
 */
struct nvme_cqe {
	uint64_t result;
	uint16_t sq_head;
	uint16_t sq_id;
	uint16_t cid;
	uint16_t status;
};
static_assert(sizeof(struct nvme_cqe) == 16, "CQE");
static_assert(offsetof(struct nvme_cqe, sq_head) == 8, "CQE sq_head");
static_assert(offsetof(struct nvme_cqe, cid) == 12, "CQE cid");
static_assert(offsetof(struct nvme_cqe, status) == 14, "CQE status");

/* The status word's parts (status without phase) */
static inline uint16_t nvme_cqe_sf(const struct nvme_cqe *c)
{
	return c->status >> 1;
}

/* ---- Fabrics commands --------------------------------------------------- */

#define NVMF_CATTR_DISABLE_SQFLOW (1u << 2)

/**
 * struct nvmf_connect_cmd - Connect (FCTYPE 01h); its data is
 * struct nvmf_connect_data, 1024 bytes, through the SGL.
 * @opcode: NVME_OPC_FABRICS.
 * @flags: PSDT.
 * @cid: command identifier.
 * @fctype: NVMF_FCT_CONNECT.
 * @rsvd5: reserved.
 * @dptr: the Connect data.
 * @recfmt: record format, 0.
 * @qid: 0 for the admin queue.
 * @sqsize: 0's based.
 * @cattr: Connect attributes (bit 2: disable SQ flow control).
 * @rsvd47: reserved.
 * @kato: keep-alive timeout, ms (admin queue).
 * @rsvd52: reserved.
 */
struct nvmf_connect_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd5[19];
	struct nvme_sgl dptr;
	uint16_t recfmt;
	uint16_t qid;
	uint16_t sqsize;
	uint8_t cattr;
	uint8_t rsvd47;
	uint32_t kato;
	uint8_t rsvd52[12];
};
static_assert(sizeof(struct nvmf_connect_cmd) == 64, "Connect");
static_assert(offsetof(struct nvmf_connect_cmd, recfmt) == 40, "Connect recfmt");
static_assert(offsetof(struct nvmf_connect_cmd, qid) == 42, "Connect qid");
static_assert(offsetof(struct nvmf_connect_cmd, sqsize) == 44, "Connect sqsize");
static_assert(offsetof(struct nvmf_connect_cmd, cattr) == 46, "Connect cattr");
static_assert(offsetof(struct nvmf_connect_cmd, kato) == 48, "Connect kato");

/**
 * struct nvmf_connect_data - the 1024 bytes a Connect carries.
 * @hostid: 128-bit host identifier.
 * @cntlid: 0xffff for the admin queue; the controller's for an I/O queue.
 * @rsvd18: reserved.
 * @subnqn: NUL-terminated.
 * @hostnqn: NUL-terminated.
 * @rsvd768: reserved.
 */
struct nvmf_connect_data {
	uint8_t hostid[16];
	uint16_t cntlid;
	uint8_t rsvd18[238];
	char subnqn[NVMF_NQN_FIELD];
	char hostnqn[NVMF_NQN_FIELD];
	uint8_t rsvd768[256];
};
static_assert(sizeof(struct nvmf_connect_data) == 1024, "Connect data");
static_assert(offsetof(struct nvmf_connect_data, cntlid) == 16, "Connect data cntlid");
static_assert(offsetof(struct nvmf_connect_data, subnqn) == 256, "Connect data subnqn");
static_assert(offsetof(struct nvmf_connect_data, hostnqn) == 512, "Connect data hostnqn");

/* Property Get/Set: ATTRIB bits 2:0 give the size */
#define NVMF_PROP_SIZE_MASK 0x7
#define NVMF_PROP_SIZE_4    0
#define NVMF_PROP_SIZE_8    1

/**
 * struct nvmf_prop_cmd - Property Get (FCTYPE 04h) and Set (00h).
 * @opcode: NVME_OPC_FABRICS.
 * @flags: PSDT.
 * @cid: command identifier.
 * @fctype: NVMF_FCT_PROP_GET or NVMF_FCT_PROP_SET.
 * @rsvd5: reserved.
 * @attrib: size, NVMF_PROP_SIZE_4 or _8.
 * @rsvd41: reserved.
 * @offset: the property's offset (NVME_REG_*).
 * @value: Set only: the value.
 * @rsvd56: reserved.
 */
struct nvmf_prop_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd5[35];
	uint8_t attrib;
	uint8_t rsvd41[3];
	uint32_t offset;
	uint64_t value;
	uint8_t rsvd56[8];
};
static_assert(sizeof(struct nvmf_prop_cmd) == 64, "Property Get/Set");
static_assert(offsetof(struct nvmf_prop_cmd, attrib) == 40, "Property attrib");
static_assert(offsetof(struct nvmf_prop_cmd, offset) == 44, "Property offset");
static_assert(offsetof(struct nvmf_prop_cmd, value) == 48, "Property value");

/* ---- properties (controller registers) ---------------------------------- */

enum nvme_reg {
	NVME_REG_CAP = 0x00,  /* 8 bytes */
	NVME_REG_VS = 0x08,   /* 4 bytes */
	NVME_REG_CC = 0x14,   /* 4 bytes */
	NVME_REG_CSTS = 0x1c, /* 4 bytes */
	NVME_REG_NSSR = 0x20, /* 4 bytes (unsupported) */
};

#define NVME_CAP_MQES(v)    ((uint64_t)(v) & 0xffff) /* 0's based */
#define NVME_CAP_CQR	    (1ull << 16)
#define NVME_CAP_TO(v)	    ((uint64_t)(v) << 24) /* 500 ms units */
#define NVME_CAP_CSS_NVM    (1ull << 37)
#define NVME_VS(maj, min, ter) ((uint32_t)(maj) << 16 | (uint32_t)(min) << 8 | (ter))

#define NVME_CC_EN	      (1u << 0)
#define NVME_CC_CSS(cc)	      (((cc) >> 4) & 0x7)
#define NVME_CC_MPS(cc)	      (((cc) >> 7) & 0xf)
#define NVME_CC_AMS(cc)	      (((cc) >> 11) & 0x7)
#define NVME_CC_SHN(cc)	      (((cc) >> 14) & 0x3)
#define NVME_CC_IOSQES(cc)    (((cc) >> 16) & 0xf)
#define NVME_CC_IOCQES(cc)    (((cc) >> 20) & 0xf)
#define NVME_CC_WRITABLE      0x00fffff1u /* EN, CSS, MPS, AMS, SHN, IOSQES, IOCQES */
#define NVME_CC_SHN_NORMAL    1u
#define NVME_CC_SHN_ABRUPT    2u
#define NVME_CC_IOSQES_NVM    6 /* 64-byte SQEs */
#define NVME_CC_IOCQES_NVM    4 /* 16-byte CQEs */

#define NVME_CSTS_RDY	     (1u << 0)
#define NVME_CSTS_CFS	     (1u << 1)
#define NVME_CSTS_SHST_MASK  (3u << 2)
#define NVME_CSTS_SHST_CMPLT (2u << 2)

/* ---- admin command fields ----------------------------------------------- */

enum nvme_cns {
	NVME_CNS_NS = 0x00,
	NVME_CNS_CTRL = 0x01,
	NVME_CNS_NS_ACTIVE_LIST = 0x02,
	NVME_CNS_NS_DESC_LIST = 0x03,
	NVME_CNS_CS_CTRL = 0x06, /* I/O Command Set specific Identify Controller */
};

/* Identify CDW11 bits 31:24, Get Log Page CDW14 bits 31:24: the command set */
#define NVME_CSI(cdw)	(((cdw) >> 24) & 0xff)
#define NVME_CSI_NVM	0x00

enum nvme_log_id {
	NVME_LOG_ERROR = 0x01,
	NVME_LOG_SMART = 0x02,
	NVME_LOG_FW_SLOT = 0x03,
	NVME_LOG_CHANGED_NS = 0x04,
	NVME_LOG_CMD_EFFECTS = 0x05,
	NVME_LOG_ANA = 0x0c,
	NVME_LOG_DISCOVERY = 0x70,
};

/* Get Log Page CDW10: LID 7:0, LSP 14:8, RAE 15, NUMDL 31:16; CDW11 NUMDU 15:0 */
#define NVME_LOG_LSP(cdw10) (((cdw10) >> 8) & 0x7f)
#define NVME_LOG_RAE	    (1u << 15)
#define NVME_ANA_LSP_RGO    (1u << 0) /* ANA log: return groups only, no NSIDs */

enum nvme_feat_id {
	NVME_FEAT_VOLATILE_WC = 0x06,
	NVME_FEAT_NUM_QUEUES = 0x07,
	NVME_FEAT_ASYNC_EVENT = 0x0b,
	NVME_FEAT_KATO = 0x0f,
	NVME_FEAT_HOST_ID = 0x81,	/* 16 bytes of data with EXHID (CDW11 bit 0) */
	NVME_FEAT_WRITE_PROTECT = 0x84, /* per namespace: CDW11 bits 2:0 */
};

#define NVME_FEAT_HOST_ID_EXHID (1u << 0)
#define NVME_FEAT_HOST_ID_LEN	16
enum nvme_wp_state {
	NVME_WP_NONE = 0,
	NVME_WP_ON = 1,
	NVME_WP_UNTIL_POWER_CYCLE = 2,
	NVME_WP_PERMANENT = 3,
};
#define NVME_WP_MASK 0x7u

/* Set Features CDW10 bit 31: save; Get Features CDW10 bits 10:8: select */
#define NVME_FEAT_SAVE	     (1u << 31)
#define NVME_FEAT_SEL(cdw10) (((cdw10) >> 8) & 0x7)
enum { NVME_SEL_CURRENT = 0, NVME_SEL_DEFAULT = 1, NVME_SEL_SAVED = 2, NVME_SEL_CAPS = 3 };
#define NVME_FEAT_CAP_SAVEABLE	 (1u << 0)
#define NVME_FEAT_CAP_NS	 (1u << 1) /* namespace specific */
#define NVME_FEAT_CAP_CHANGEABLE (1u << 2)

/* Asynchronous events: completion DW0 = type | info << 8 | log page << 16 */
enum nvme_aer_type { NVME_AER_ERROR = 0, NVME_AER_SMART = 1, NVME_AER_NOTICE = 2 };
enum nvme_aer_notice { NVME_AER_NOTICE_NS_CHANGED = 0x00, NVME_AER_NOTICE_DISC_CHANGED = 0xf0 };
#define NVME_AEC_SMART_MASK	0xffu
#define NVME_AEC_NS_ATTR	(1u << 8)
#define NVME_AEC_DISC_CHANGE	(1u << 31)

/* ---- Identify Controller (CNS 01h), 4096 bytes -------------------------- */

#define NVME_CTRL_CMIC_MULTI_CTRL (1u << 1)
#define NVME_CTRL_CMIC_ANA	  (1u << 3) /* ANA reporting */
#define NVME_CTRL_CTRATT_HID128	  (1u << 0)
#define NVME_CTRL_FRMW_SLOT1_RO	  (1u << 0)
#define NVME_CTRL_FRMW_SLOTS(n)	  ((n) << 1)
#define NVME_CTRL_LPA_CMD_EFFECTS (1u << 1) /* Commands Supported and Effects log */
#define NVME_CTRL_LPA_EXT_DATA	  (1u << 2) /* Get Log Page: NUMDU and LPO */
#define NVME_CTRL_ANACAP_OPTIMIZED (1u << 0) /* reports the Optimized state */
#define NVME_CTRL_NWPC_WP	  (1u << 0) /* No Write Protect and Write Protect */
#define NVME_CTRL_ONCS_DSM	  (1u << 2)
#define NVME_CTRL_ONCS_WZEROES	  (1u << 3)
#define NVME_CTRL_VWC_PRESENT	  (1u << 0)
#define NVME_CTRL_VWC_FLUSH_ALL	  (3u << 1) /* Flush with NSID FFFFFFFFh supported */
#define NVME_CTRL_SGLS_SUPPORTED  (1u << 0) /* 01b: SGLs, no alignment required */
#define NVME_CTRL_SGLS_KEYED	  (1u << 2)
#define NVME_CTRL_SGLS_OFFSET	  (1u << 20)
enum nvme_cntrltype { NVME_CTRL_IO = 1, NVME_CTRL_DISC = 2 };

/**
 * struct nvme_id_ctrl - Identify Controller. Only what a Linux host reads
 * is named; every reserved or unsupported field stays zero.
 */
struct nvme_id_ctrl {
	uint16_t vid;
	uint16_t ssvid;
	char sn[20];  /* ASCII, space padded */
	char mn[40];  /* ASCII, space padded */
	char fr[8];   /* ASCII, space padded */
	uint8_t rab;
	uint8_t ieee[3];
	uint8_t cmic;
	uint8_t mdts; /* 2^mdts * 4 KiB (CAP.MPSMIN = 0) */
	uint16_t cntlid;
	uint32_t ver;
	uint32_t rtd3r;
	uint32_t rtd3e;
	uint32_t oaes;
	uint32_t ctratt;
	uint8_t rsvd100[11];
	uint8_t cntrltype;
	uint8_t fguid[16];
	uint16_t crdt[3];
	uint8_t rsvd134[122];
	uint16_t oacs;
	uint8_t acl;
	uint8_t aerl; /* 0's based */
	uint8_t frmw;
	uint8_t lpa;
	uint8_t elpe; /* 0's based */
	uint8_t npss;
	uint8_t avscc;
	uint8_t apsta;
	uint16_t wctemp;
	uint16_t cctemp;
	uint8_t rsvd270[50];
	uint16_t kas; /* 100 ms units */
	uint8_t rsvd322[20];
	uint8_t anatt; /* ANA transition time, seconds */
	uint8_t anacap;
	uint32_t anagrpmax;
	uint32_t nanagrpid;
	uint32_t pels;
	uint8_t rsvd356[156];
	uint8_t sqes;
	uint8_t cqes;
	uint16_t maxcmd;
	uint32_t nn;
	uint16_t oncs;
	uint16_t fuses;
	uint8_t fna;
	uint8_t vwc;
	uint16_t awun;
	uint16_t awupf;
	uint8_t nvscc;
	uint8_t nwpc;
	uint16_t acwu;
	uint8_t rsvd534[2];
	uint32_t sgls;
	uint32_t mnan;
	uint8_t rsvd544[224];
	char subnqn[NVMF_NQN_FIELD];
	uint8_t rsvd1024[768];
	uint32_t ioccsz; /* 16-byte units: SQE + in-capsule data */
	uint32_t iorcsz; /* 16-byte units */
	uint16_t icdoff;
	uint8_t fcatt;
	uint8_t msdbd;
	uint16_t ofcs;
	uint8_t dctype;
	uint8_t rsvd1807[241];
	uint8_t psd[1024];
	uint8_t vs[1024];
};
static_assert(sizeof(struct nvme_id_ctrl) == NVME_IDENTIFY_SIZE, "Identify Controller");
static_assert(offsetof(struct nvme_id_ctrl, sn) == 4, "id_ctrl sn");
static_assert(offsetof(struct nvme_id_ctrl, mn) == 24, "id_ctrl mn");
static_assert(offsetof(struct nvme_id_ctrl, fr) == 64, "id_ctrl fr");
static_assert(offsetof(struct nvme_id_ctrl, mdts) == 77, "id_ctrl mdts");
static_assert(offsetof(struct nvme_id_ctrl, cntlid) == 78, "id_ctrl cntlid");
static_assert(offsetof(struct nvme_id_ctrl, ver) == 80, "id_ctrl ver");
static_assert(offsetof(struct nvme_id_ctrl, oaes) == 92, "id_ctrl oaes");
static_assert(offsetof(struct nvme_id_ctrl, cntrltype) == 111, "id_ctrl cntrltype");
static_assert(offsetof(struct nvme_id_ctrl, oacs) == 256, "id_ctrl oacs");
static_assert(offsetof(struct nvme_id_ctrl, aerl) == 259, "id_ctrl aerl");
static_assert(offsetof(struct nvme_id_ctrl, elpe) == 262, "id_ctrl elpe");
static_assert(offsetof(struct nvme_id_ctrl, frmw) == 260, "id_ctrl frmw");
static_assert(offsetof(struct nvme_id_ctrl, lpa) == 261, "id_ctrl lpa");
static_assert(offsetof(struct nvme_id_ctrl, kas) == 320, "id_ctrl kas");
static_assert(offsetof(struct nvme_id_ctrl, anatt) == 342, "id_ctrl anatt");
static_assert(offsetof(struct nvme_id_ctrl, anacap) == 343, "id_ctrl anacap");
static_assert(offsetof(struct nvme_id_ctrl, anagrpmax) == 344, "id_ctrl anagrpmax");
static_assert(offsetof(struct nvme_id_ctrl, nanagrpid) == 348, "id_ctrl nanagrpid");
static_assert(offsetof(struct nvme_id_ctrl, sqes) == 512, "id_ctrl sqes");
static_assert(offsetof(struct nvme_id_ctrl, maxcmd) == 514, "id_ctrl maxcmd");
static_assert(offsetof(struct nvme_id_ctrl, nn) == 516, "id_ctrl nn");
static_assert(offsetof(struct nvme_id_ctrl, oncs) == 520, "id_ctrl oncs");
static_assert(offsetof(struct nvme_id_ctrl, vwc) == 525, "id_ctrl vwc");
static_assert(offsetof(struct nvme_id_ctrl, nwpc) == 531, "id_ctrl nwpc");
static_assert(offsetof(struct nvme_id_ctrl, sgls) == 536, "id_ctrl sgls");
static_assert(offsetof(struct nvme_id_ctrl, mnan) == 540, "id_ctrl mnan");
static_assert(offsetof(struct nvme_id_ctrl, subnqn) == 768, "id_ctrl subnqn");
static_assert(offsetof(struct nvme_id_ctrl, ioccsz) == 1792, "id_ctrl ioccsz");
static_assert(offsetof(struct nvme_id_ctrl, iorcsz) == 1796, "id_ctrl iorcsz");
static_assert(offsetof(struct nvme_id_ctrl, icdoff) == 1800, "id_ctrl icdoff");
static_assert(offsetof(struct nvme_id_ctrl, msdbd) == 1803, "id_ctrl msdbd");
static_assert(offsetof(struct nvme_id_ctrl, psd) == 2048, "id_ctrl psd");

/* ---- Identify Namespace (CNS 00h), 4096 bytes --------------------------- */

#define NVME_NS_NMIC_SHARED (1u << 0)
#define NVME_NS_DLFEAT_ZEROES 0x1u    /* deallocated blocks read as zeroes */
#define NVME_NS_DLFEAT_WZ_DEAC (1u << 3) /* Write Zeroes may deallocate */
#define NVME_NS_NSATTR_WP (1u << 0) /* write protected */

/**
 * struct nvme_lbaf - an LBA format.
 * @ms: metadata bytes per block.
 * @lbads: log2 of the block size.
 * @rp: relative performance.
 */
struct nvme_lbaf {
	uint16_t ms;
	uint8_t lbads;
	uint8_t rp;
};

/**
 * struct nvme_id_ns - Identify Namespace (NVM command set).
 */
struct nvme_id_ns {
	uint64_t nsze;
	uint64_t ncap;
	uint64_t nuse;
	uint8_t nsfeat;
	uint8_t nlbaf; /* 0's based */
	uint8_t flbas;
	uint8_t mc;
	uint8_t dpc;
	uint8_t dps;
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint8_t dlfeat;
	uint16_t nawun;
	uint16_t nawupf;
	uint16_t nacwu;
	uint16_t nabsn;
	uint16_t nabo;
	uint16_t nabspf;
	uint16_t noiob;
	uint8_t nvmcap[16];
	uint8_t rsvd64[28];
	uint32_t anagrpid;
	uint8_t rsvd96[3];
	uint8_t nsattr;
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nguid[16];
	uint8_t eui64[8];
	struct nvme_lbaf lbaf[64];
	uint8_t rsvd384[3712];
};
static_assert(sizeof(struct nvme_id_ns) == NVME_IDENTIFY_SIZE, "Identify Namespace");
static_assert(offsetof(struct nvme_id_ns, nsfeat) == 24, "id_ns nsfeat");
static_assert(offsetof(struct nvme_id_ns, flbas) == 26, "id_ns flbas");
static_assert(offsetof(struct nvme_id_ns, dlfeat) == 33, "id_ns dlfeat");
static_assert(offsetof(struct nvme_id_ns, nvmcap) == 48, "id_ns nvmcap");
static_assert(offsetof(struct nvme_id_ns, anagrpid) == 92, "id_ns anagrpid");
static_assert(offsetof(struct nvme_id_ns, nsattr) == 99, "id_ns nsattr");
static_assert(offsetof(struct nvme_id_ns, nguid) == 104, "id_ns nguid");
static_assert(offsetof(struct nvme_id_ns, lbaf) == 128, "id_ns lbaf");

/* ---- namespace identification descriptor (CNS 03h) ---------------------- */

enum nvme_nidt { NVME_NIDT_EUI64 = 1, NVME_NIDT_NGUID = 2, NVME_NIDT_UUID = 3, NVME_NIDT_CSI = 4 };

/**
 * struct nvme_ns_desc - header of one descriptor; @nidl bytes of NID follow.
 * @nidt: identifier type.
 * @nidl: identifier length.
 * @rsvd: reserved.
 */
struct nvme_ns_desc {
	uint8_t nidt;
	uint8_t nidl;
	uint16_t rsvd;
};
static_assert(sizeof(struct nvme_ns_desc) == 4, "NS identification descriptor");

/* ---- log pages ---------------------------------------------------------- */

/**
 * struct nvme_err_entry - Error Information log entry (64 bytes).
 * @error_count: unique, increasing, never 0 for a valid entry.
 * @sqid: queue of the failed command.
 * @cid: its command identifier.
 * @status: its CQE status word (status << 1, phase 0).
 * @pel: parameter error location (0xffff: not given).
 * @lba: first failing LBA.
 * @nsid: its namespace.
 * @vs: vendor specific.
 * @trtype: transport type.
 * @rsvd30: reserved.
 * @cs: command specific.
 * @ttsi: transport type specific.
 * @rsvd42: reserved.
 */
struct nvme_err_entry {
	uint64_t error_count;
	uint16_t sqid;
	uint16_t cid;
	uint16_t status;
	uint16_t pel;
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs;
	uint8_t trtype;
	uint8_t rsvd30[2];
	uint64_t cs;
	uint16_t ttsi;
	uint8_t rsvd42[22];
};
static_assert(sizeof(struct nvme_err_entry) == 64, "Error log entry");
static_assert(offsetof(struct nvme_err_entry, status) == 12, "err status");
static_assert(offsetof(struct nvme_err_entry, nsid) == 24, "err nsid");

/**
 * struct nvme_smart_log - SMART / Health Information (512 bytes). The
 * 128-bit counters are little-endian byte arrays (nvme_u128_set()).
 */
struct nvme_smart_log {
	uint8_t critical_warning;
	uint8_t temperature[2]; /* Kelvin, unaligned */
	uint8_t avail_spare;
	uint8_t spare_thresh;
	uint8_t percent_used;
	uint8_t endu_grp_crit;
	uint8_t rsvd7[25];
	uint8_t data_units_read[16]; /* 1000 x 512 bytes, rounded up */
	uint8_t data_units_written[16];
	uint8_t host_reads[16];
	uint8_t host_writes[16];
	uint8_t ctrl_busy_time[16];
	uint8_t power_cycles[16];
	uint8_t power_on_hours[16];
	uint8_t unsafe_shutdowns[16];
	uint8_t media_errors[16];
	uint8_t num_err_log_entries[16];
	uint8_t rsvd192[320];
};
static_assert(sizeof(struct nvme_smart_log) == 512, "SMART log");
static_assert(offsetof(struct nvme_smart_log, data_units_read) == 32, "smart dur");
static_assert(offsetof(struct nvme_smart_log, host_writes) == 80, "smart hw");
static_assert(offsetof(struct nvme_smart_log, num_err_log_entries) == 176, "smart errs");

static inline void nvme_u128_set(uint8_t dst[16], uint64_t v)
{
	memcpy(dst, &v, 8);
	memset(dst + 8, 0, 8);
}

static inline uint64_t nvme_u128_low(const uint8_t src[16])
{
	uint64_t v;

	memcpy(&v, src, 8);
	return v;
}

/* Changed Namespace List: up to 1024 NSIDs, or NVME_NSID_ALL first if more changed */
struct nvme_changed_ns_log {
	uint32_t nsid[NVME_CHANGED_NS_MAX];
};
static_assert(sizeof(struct nvme_changed_ns_log) == 4096, "Changed NS list");

/**
 * struct nvme_fw_slot_log - Firmware Slot Information (512 bytes).
 * @afi: active firmware info: bits 2:0 the active slot, 6:4 the slot
 *       activated at the next reset (0: none given).
 * @rsvd1: reserved.
 * @frs: the firmware revision in slots 1-7 (ASCII, space padded; zero: empty).
 * @rsvd64: reserved.
 */
struct nvme_fw_slot_log {
	uint8_t afi;
	uint8_t rsvd1[7];
	char frs[7][8];
	uint8_t rsvd64[448];
};
static_assert(sizeof(struct nvme_fw_slot_log) == 512, "Firmware Slot log");
static_assert(offsetof(struct nvme_fw_slot_log, frs) == 8, "fw frs1");

/* Commands Supported and Effects: per opcode, CSUPP and the effects */
#define NVME_CMD_EFFECTS_CSUPP (1u << 0) /* supported */
#define NVME_CMD_EFFECTS_LBCC  (1u << 1) /* may change logical block content */

/**
 * struct nvme_effects_log - Commands Supported and Effects (4096 bytes).
 * @acs: admin commands, by opcode.
 * @iocs: I/O commands of the command set asked for (CSI), by opcode.
 * @rsvd2048: reserved.
 */
struct nvme_effects_log {
	uint32_t acs[256];
	uint32_t iocs[256];
	uint8_t rsvd2048[2048];
};
static_assert(sizeof(struct nvme_effects_log) == 4096, "Commands Supported and Effects log");
static_assert(offsetof(struct nvme_effects_log, iocs) == 1024, "effects iocs");

enum nvme_ana_state { NVME_ANA_OPTIMIZED = 0x01 };

/**
 * struct nvme_ana_hdr - Asymmetric Namespace Access log header (16 bytes);
 * @ngrps group descriptors follow.
 * @chgcnt: change count.
 * @ngrps: group descriptors.
 * @rsvd10: reserved.
 */
struct nvme_ana_hdr {
	uint64_t chgcnt;
	uint16_t ngrps;
	uint8_t rsvd10[6];
};
static_assert(sizeof(struct nvme_ana_hdr) == 16, "ANA log header");

/**
 * struct nvme_ana_desc - one ANA group descriptor (32 bytes); @nnsids
 * 4-byte NSIDs follow it.
 * @grpid: the group, 1 and up.
 * @nnsids: NSIDs listed (0 with RGO).
 * @chgcnt: change count.
 * @state: enum nvme_ana_state.
 * @rsvd17: reserved.
 */
struct nvme_ana_desc {
	uint32_t grpid;
	uint32_t nnsids;
	uint64_t chgcnt;
	uint8_t state;
	uint8_t rsvd17[15];
};
static_assert(sizeof(struct nvme_ana_desc) == 32, "ANA group descriptor");
static_assert(offsetof(struct nvme_ana_desc, state) == 16, "ANA state");

/* ---- discovery log page (LID 70h) --------------------------------------- */

enum nvmf_trtype { NVMF_TRTYPE_RDMA = 1 };
enum nvmf_adrfam { NVMF_ADRFAM_IPV4 = 1, NVMF_ADRFAM_IPV6 = 2 };
enum nvmf_subtype { NVMF_SUBTYPE_DISC = 1, NVMF_SUBTYPE_NVME = 2, NVMF_SUBTYPE_CURR_DISC = 3 };
enum nvmf_treq { NVMF_TREQ_NOT_SPECIFIED = 0, NVMF_TREQ_REQUIRED = 1, NVMF_TREQ_NOT_REQUIRED = 2 };
enum nvmf_rdma_qptype { NVMF_RDMA_QPTYPE_CONNECTED = 1 };
enum nvmf_rdma_prtype { NVMF_RDMA_PRTYPE_NOT_SPECIFIED = 1 };
enum nvmf_rdma_cms { NVMF_RDMA_CMS_RDMA_CM = 1 };

/**
 * struct nvmf_disc_hdr - discovery log header (1024 bytes); entries follow.
 * @genctr: generation counter, changes whenever the log does.
 * @numrec: number of entries.
 * @recfmt: 0.
 * @rsvd18: reserved.
 */
struct nvmf_disc_hdr {
	uint64_t genctr;
	uint64_t numrec;
	uint16_t recfmt;
	uint8_t rsvd18[1006];
};
static_assert(sizeof(struct nvmf_disc_hdr) == 1024, "discovery log header");

/**
 * struct nvmf_rdma_tsas - the RDMA transport specific address subtype.
 * @qptype: NVMF_RDMA_QPTYPE_CONNECTED.
 * @prtype: provider type.
 * @cms: NVMF_RDMA_CMS_RDMA_CM.
 * @rsvd3: reserved.
 * @pkey: partition key (InfiniBand only).
 * @rsvd10: reserved.
 */
struct nvmf_rdma_tsas {
	uint8_t qptype;
	uint8_t prtype;
	uint8_t cms;
	uint8_t rsvd3[5];
	uint16_t pkey;
	uint8_t rsvd10[246];
};
static_assert(sizeof(struct nvmf_rdma_tsas) == 256, "RDMA TSAS");

/**
 * struct nvmf_disc_entry - one discovery log entry (1024 bytes).
 * @trtype: NVMF_TRTYPE_RDMA.
 * @adrfam: NVMF_ADRFAM_*.
 * @subtype: NVMF_SUBTYPE_*.
 * @treq: transport requirements.
 * @portid: the port.
 * @cntlid: NVME_CNTLID_DYNAMIC.
 * @asqsz: admin max SQ size.
 * @eflags: entry flags.
 * @rsvd12: reserved.
 * @trsvcid: the port number, ASCII, NUL padded.
 * @rsvd64: reserved.
 * @subnqn: NUL terminated.
 * @traddr: the address, ASCII, NUL padded.
 * @tsas: RDMA specifics.
 */
struct nvmf_disc_entry {
	uint8_t trtype;
	uint8_t adrfam;
	uint8_t subtype;
	uint8_t treq;
	uint16_t portid;
	uint16_t cntlid;
	uint16_t asqsz;
	uint16_t eflags;
	uint8_t rsvd12[20];
	char trsvcid[NVMF_TRSVCID_FIELD];
	uint8_t rsvd64[192];
	char subnqn[NVMF_NQN_FIELD];
	char traddr[NVMF_TRADDR_FIELD];
	struct nvmf_rdma_tsas tsas;
};
static_assert(sizeof(struct nvmf_disc_entry) == 1024, "discovery log entry");
static_assert(offsetof(struct nvmf_disc_entry, portid) == 4, "disc portid");
static_assert(offsetof(struct nvmf_disc_entry, asqsz) == 8, "disc asqsz");
static_assert(offsetof(struct nvmf_disc_entry, trsvcid) == 32, "disc trsvcid");
static_assert(offsetof(struct nvmf_disc_entry, subnqn) == 256, "disc subnqn");
static_assert(offsetof(struct nvmf_disc_entry, traddr) == 512, "disc traddr");
static_assert(offsetof(struct nvmf_disc_entry, tsas) == 768, "disc tsas");

/* ---- NVMe/RDMA rdma_cm private data ------------------------------------- */

enum nvmf_rdma_cm_status {
	NVMF_RDMA_CM_INVALID_LEN = 0x01,
	NVMF_RDMA_CM_INVALID_RECFMT = 0x02,
	NVMF_RDMA_CM_INVALID_QID = 0x03,
	NVMF_RDMA_CM_INVALID_HSQSIZE = 0x04,
	NVMF_RDMA_CM_INVALID_HRQSIZE = 0x05,
	NVMF_RDMA_CM_NO_RSC = 0x06,
};

/**
 * struct nvmf_rdma_cm_req - the host's connect request private data.
 * @recfmt: 0.
 * @qid: 0 for the admin queue.
 * @hrqsize: host receive queue size (entries).
 * @hsqsize: host send queue size, 0's based (the Connect's sqsize).
 * @cntlid: NVMe-oF 1.1; Linux leaves it 0 (reserved).
 * @rsvd10: reserved.
 */
struct nvmf_rdma_cm_req {
	uint16_t recfmt;
	uint16_t qid;
	uint16_t hrqsize;
	uint16_t hsqsize;
	uint16_t cntlid;
	uint8_t rsvd10[22];
};
static_assert(sizeof(struct nvmf_rdma_cm_req) == 32, "rdma_cm request private data");
static_assert(offsetof(struct nvmf_rdma_cm_req, hsqsize) == 6, "cm hsqsize");
static_assert(offsetof(struct nvmf_rdma_cm_req, cntlid) == 8, "cm cntlid");

/**
 * struct nvmf_rdma_cm_rep - the target's accept private data.
 * @recfmt: 0.
 * @crqsize: controller receive queue size (entries).
 * @rsvd4: reserved.
 */
struct nvmf_rdma_cm_rep {
	uint16_t recfmt;
	uint16_t crqsize;
	uint8_t rsvd4[28];
};
static_assert(sizeof(struct nvmf_rdma_cm_rep) == 32, "rdma_cm accept private data");

/**
 * struct nvmf_rdma_cm_rej - the target's reject private data.
 * @recfmt: 0.
 * @sts: enum nvmf_rdma_cm_status.
 */
struct nvmf_rdma_cm_rej {
	uint16_t recfmt;
	uint16_t sts;
};
static_assert(sizeof(struct nvmf_rdma_cm_rej) == 4, "rdma_cm reject private data");

#endif /* NVME_WIRE_H */
