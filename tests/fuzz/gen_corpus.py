#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_wire (tests/fuzz/corpus/): messages and
rdma_cm private data blobs, valid and not, in the layout of core/wire.h
(host byte order, little-endian here). Run it again after a format change
and commit the result."""
import os
import struct
import sys

WIRE_MAGIC = 0x50
CM_MAGIC = 0x50434D32
MAX_CREDITS = 1 << 14


def hdr(typ, length, req_id, magic=WIRE_MAGIC, flags=0):
    return struct.pack('<BBHIQ', magic, typ, flags, length, req_id)


def msg(typ, payload, req_id=0, **kw):
    return hdr(typ, len(payload), req_id, **kw) + payload


def cm(credits, addr, rkey, max_msg, window=64, magic=CM_MAGIC):
    return struct.pack('<IIQIII', magic, credits, addr, rkey, max_msg, window)


SEEDS = {
    # messages as received (the header plus the bytes that arrived)
    'hdr-oneway-empty': msg(0, b''),
    'hdr-oneway-48': msg(0, bytes(range(48))),
    'hdr-request-64': msg(1, b'\xa5' * 64, req_id=1),
    'hdr-response-8': msg(2, b'reply!!!', req_id=0x1122334455667788),
    'hdr-flags-set': msg(1, b'x' * 8, req_id=7, flags=0x80),
    'hdr-bad-magic': msg(0, b'y' * 8, magic=0x51),
    'hdr-rndv-32': msg(3, struct.pack('<B3xIQQII', 1, 0x99, 0x7F0012345000, 7, 70000, 0), req_id=9),
    'hdr-done-16': msg(4, struct.pack('<QiI', 7, 0, 0)),
    'hdr-abort-16': msg(5, struct.pack('<QiI', 7, 0, 0)),
    'hdr-abort-status-set': msg(5, struct.pack('<QiI', 7, -125, 0)),
    'hdr-bad-type': msg(6, b'z' * 8),
    'hdr-type-ff': msg(0xFF, b''),
    'hdr-len-long': hdr(0, 100, 0) + b'w' * 8,
    'hdr-len-short': hdr(0, 4, 0) + b'v' * 8,
    'hdr-len-huge': hdr(0, 0xFFFFFFFF, 0),
    'hdr-short-15': msg(0, b'')[:15],
    'empty': b'',
    # rdma_cm private data (rdma_cm pads it to 56 bytes on IB and RoCE)
    # (pollcore grants nothing up front: credits 0, window 64)
    'cm-valid': cm(0, 0x7F0012345000, 0x1234, 4096),
    'cm-valid-padded-56': cm(0, 0x7F0012345000, 0x1234, 4096).ljust(56, b'\0'),
    'cm-credits-up-front': cm(64, 0x7F0012345000, 0x1234, 4096),
    'cm-max-window': cm(MAX_CREDITS, 8, 1, 1, window=MAX_CREDITS),
    'cm-zero-window': cm(0, 0x1000, 0x1234, 4096, window=0),
    'cm-window-too-big': cm(0, 0x1000, 0x1234, 4096, window=MAX_CREDITS + 1),
    'cm-credits-over-window': cm(65, 0x1000, 0x1234, 4096),
    'cm-zero-rkey': cm(0, 0x1000, 0, 4096),
    'cm-zero-max-msg': cm(0, 0x1000, 0x1234, 0),
    'cm-short-27': cm(0, 0x1000, 0x1234, 4096)[:27],
    # max_large cut short (29 bytes): none of it counts
    'cm-max-large-cut-29': cm(0, 0x7F0012345000, 0x1234, 4096) + b'\x26',
    'cm-short-24-old-layout': cm(64, 0x1000, 0x1234, 4096)[:24],
    'cm-short-8-padded': cm(64, 0, 0, 0)[:8].ljust(56, b'\0'),
    'cm-other-magic': cm(64, 0x1000, 0x1234, 4096, magic=0x50434D31),
    # max_large (rendezvous to 16 MiB), then the features word (WIRE_ABORT understood)
    'cm-32-max-large': cm(0, 0x7F0012345000, 0x1234, 4096) + struct.pack('<I', 16 << 20),
    'cm-36-features': cm(0, 0x7F0012345000, 0x1234, 4096) + struct.pack('<II', 16 << 20, 1),
    'cm-features-cut-34': (cm(0, 0x7F0012345000, 0x1234, 4096) +
                           struct.pack('<II', 16 << 20, 1))[:34],
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus')
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)
    print(f'{len(SEEDS)} seeds in {out}')


if __name__ == '__main__':
    main()
