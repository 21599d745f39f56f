#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_nvmf (tests/fuzz/corpus_nvmf/): records of
[queue byte][u16 length][capsule], in the layouts of tools/nvmf/nvme_wire.h
(little-endian), each seed a short session a Linux host might start. Run it
again after a format change and commit the result."""
import os
import struct
import sys

FABRICS, PSDT_SGL = 0x7f, 0x40
FRESH, ADMIN, IO, CM = 0, 1, 2, 3
SUBNQN = b'nqn.2026-12.io.pollcore:fuzz'
HOSTNQN = b'nqn.2014-08.org.nvmexpress:uuid:fuzz'


def keyed(addr, length, key=0x1234, sub=0xf):
    return struct.pack('<Q', addr) + struct.pack('<I', length)[:3] + struct.pack('<I', key) \
        + bytes([0x40 | sub])


def offset(off, length):
    return struct.pack('<QI3xB', off, length, 0x01)


def sqe(opc, cid, nsid=0, dptr=None, cdw=(0, 0, 0, 0, 0, 0)):
    dptr = dptr if dptr is not None else keyed(0, 0, 0, 0)
    return struct.pack('<BBHIIIQ', opc, PSDT_SGL, cid, nsid, 0, 0, 0) + dptr \
        + struct.pack('<6I', *cdw)


def fabrics(fctype, cid, rest, dptr=None):
    dptr = dptr if dptr is not None else keyed(0, 0, 0, 0)
    return struct.pack('<BBHB19x', FABRICS, PSDT_SGL, cid, fctype) + dptr + rest


def connect(qid, sqsize, kato, dptr):
    return fabrics(1, 1, struct.pack('<HHHBBI12x', 0, qid, sqsize, 0, 0, kato), dptr)


def connect_data(cntlid):
    return b'\xa5' * 16 + struct.pack('<H', cntlid) + bytes(238) \
        + SUBNQN.ljust(256, b'\0') + HOSTNQN.ljust(256, b'\0') + bytes(256)


def prop(fctype, off, size, value=0):
    return fabrics(fctype, 2, struct.pack('<B3xIQ8x', size, off, value))


def rec(queue, capsule, tail=b''):
    return bytes([queue]) + struct.pack('<H', len(capsule)) + capsule + tail


def rw(opc, nsid, slba, nlb, dptr, cid=7):
    return sqe(opc, cid, nsid, dptr, (slba & 0xffffffff, slba >> 32, nlb - 1, 0, 0, 0))


CC = 1 | 6 << 16 | 4 << 20
SEEDS = {
    # the Linux host's admin bring-up on a fresh queue: Connect (data fetched
    # with RDMA READ, so it follows the record), CAP, enable, Identify
    'linux-admin-bringup':
        rec(FRESH, connect(0, 31, 5000, keyed(0x1000, 1024)), connect_data(0xffff))
        + rec(FRESH, prop(4, 0, 1)) + rec(FRESH, prop(0, 0x14, 0, CC))
        + rec(FRESH, prop(4, 0x1c, 0))
        + rec(FRESH, sqe(0x06, 3, 0, keyed(0x2000, 4096), (1, 0, 0, 0, 0, 0)))
        + rec(FRESH, sqe(0x09, 4, 0, None, (7, 3 | 3 << 16, 0, 0, 0, 0)))
        + rec(FRESH, sqe(0x09, 5, 0, None, (0x0b, 1 << 8, 0, 0, 0, 0)))
        + rec(FRESH, sqe(0x0c, 6)) + rec(FRESH, sqe(0x18, 7)),
    'admin-identify-logs':
        rec(ADMIN, sqe(0x06, 1, 1, keyed(0x2000, 4096), (0, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x06, 2, 0, keyed(0x2000, 4096), (2, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x06, 3, 1, keyed(0x2000, 4096), (3, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 4, 0xffffffff, keyed(0x2000, 512), (2 | 127 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 5, 0, keyed(0x2000, 4096), (4 | 1023 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 6, 0, keyed(0x2000, 1024), (1 | 255 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x0a, 7, 0, None, (0x0f, 0, 0, 0, 0, 0))),
    'admin-aer-events':
        rec(ADMIN, sqe(0x09, 1, 0, None, (0x0b, 1 << 8, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x0c, 2)) + rec(ADMIN, sqe(0x0c, 3)) + rec(ADMIN, sqe(0x0c, 4))
        + bytes([0xee]) + rec(ADMIN, sqe(0x09, 5, 0, None, (0x0f, 1000, 0, 0, 0, 0)))
        + bytes([0xee]) + rec(ADMIN, sqe(0x18, 6)),
    # the logs, Identify and features nvmet has too (docs/storage.md's table):
    # Firmware Slot, Commands Supported and Effects (NVM, then Zoned),
    # ANA (then groups only), CNS 06h (NVM, Zoned), Volatile Write Cache,
    # Host Identifier (16 bytes, EXHID), write protection of namespace 1 on
    # and a write refused for it, then off, and the Changed Namespace List
    'admin-logs-features-wp':
        rec(ADMIN, sqe(0x02, 1, 0xffffffff, keyed(0x2000, 512), (3 | 127 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 2, 0, keyed(0x2000, 4096), (5 | 1023 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 3, 0, keyed(0x2000, 4096), (5 | 1023 << 16, 0, 0, 0, 2 << 24, 0)))
        + rec(ADMIN, sqe(0x02, 4, 0, keyed(0x2000, 4096), (0x0c | 1023 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 5, 0, keyed(0x2000, 64), (0x0c | 1 << 8 | 15 << 16, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x06, 6, 0, keyed(0x2000, 4096), (6, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x06, 7, 0, keyed(0x2000, 4096), (6, 2 << 24, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x0a, 8, 0, None, (0x06, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x0a, 9, 0, keyed(0x2000, 16), (0x81, 1, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x09, 10, 1, None, (0x84, 1, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x0a, 11, 1, None, (0x84, 0, 0, 0, 0, 0)))
        + rec(IO, rw(0x01, 1, 0, 8, keyed(0x3000, 4096)), bytes(4096))
        + rec(ADMIN, sqe(0x09, 12, 1, None, (0x84, 0, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x09, 13, 0, None, (0x81, 1, 0, 0, 0, 0)))
        + rec(ADMIN, sqe(0x02, 14, 0, keyed(0x2000, 4096), (4 | 1023 << 16, 0, 0, 0, 0, 0))),
    'io-read-write':
        rec(IO, rw(0x01, 1, 0, 8, keyed(0x3000, 4096)), bytes(range(256)) * 16)
        + rec(IO, rw(0x02, 1, 0, 8, keyed(0x3000, 4096)))
        + rec(IO, rw(0x01, 2, 15, 1, offset(0, 4096)) + bytes(4096))
        + rec(IO, rw(0x02, 2, 16, 1, keyed(0x3000, 4096)))
        + rec(IO, rw(0x02, 1, 0, 129, keyed(0x3000, 129 * 512))),
    'io-flush-zeroes-dsm':
        rec(IO, sqe(0x00, 1, 0xffffffff))
        + rec(IO, rw(0x08, 1, 4, 4, keyed(0, 0, 0, 0)))
        + rec(IO, sqe(0x09, 2, 1, keyed(0x4000, 32), (1, 4, 0, 0, 0, 0)),
              struct.pack('<IIQ', 0, 8, 0) + struct.pack('<IIQ', 0, 4, 60))
        + rec(IO, sqe(0x09, 3, 1, offset(0, 16), (0, 4, 0, 0, 0, 0)) + struct.pack('<IIQ', 0, 8, 60)),
    'io-connect-second-queue':
        rec(FRESH, connect(2, 31, 0, offset(0, 1024)) + connect_data(1)),
    'cm-private-data':
        rec(CM, struct.pack('<HHHHH22x', 0, 0, 32, 31, 0))
        + rec(CM, struct.pack('<HHHHH22x', 0, 2, 32, 31, 0))
        + rec(CM, struct.pack('<HHHH', 1, 0, 32, 31)),
    'short-and-long-capsules':
        rec(IO, bytes(10)) + rec(ADMIN, sqe(0x18, 1)[:63]) + rec(IO, rw(0x01, 1, 0, 1, offset(0, 512))),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus_nvmf')
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
