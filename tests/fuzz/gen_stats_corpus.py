#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_stats (tests/fuzz/corpus_stats/).

Inputs as fuzz_stats.c reads them: byte 0 odd, a segment built by the
harness (byte 1: workers % 4, byte 2: slots % 5) and 6-byte edits
(op % 4: 0 byte, 1 header word, 2 length, 3 open here); byte 0 even, the
raw file. Header word indexes are offsets / 4 (pollcore/stats.h)."""
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus_stats')


def word(idx, value):          # op 1: header word idx = value
    return bytes([1, idx]) + struct.pack('<I', value)


def length(n):                 # op 2: the file's length
    return bytes([2]) + struct.pack('<I', n)[:3] + b'\0\0'


def byte(off, v):              # op 0: one byte
    return bytes([0]) + struct.pack('<I', off)[:3] + bytes([v, 0])


OPEN = bytes([3, 0, 0, 0, 0, 0])
seeds = {
    'valid-1w-2s': b'\x01\x01\x02',
    'valid-3w-4s': b'\x01\x03\x04',
    'valid-0w': b'\x01\x00\x00',
    'truncated-after-open': b'\x01\x01\x02' + OPEN + length(4096),
    'shrunk-into-block': b'\x01\x02\x01' + OPEN + length(4096 + 100),
    'nworkers-grown-after-open': b'\x01\x01\x02' + OPEN + word(6, 64),  # nworkers
    'nworkers-4096': b'\x01\x01\x02' + word(6, 4096),
    'worker-off-wraps': b'\x01\x01\x00' + word(10, 0xfffff000) + word(11, 0xffffffff),
    'conn-off-wraps': b'\x01\x01\x02' + word(12, 0xffffff00) + word(13, 0xffffffff),
    'size-past-file': b'\x01\x01\x02' + word(8, 1 << 30),
    'comm-unterminated': b'\x01\x01\x02' + b''.join(word(20 + i, 0x41414141) for i in range(4)),
    'devices-unterminated': b'\x01\x01\x02' + b''.join(word(24 + i, 0x42424242) for i in range(32)),
    'odd-seq': b'\x01\x01\x02' + byte(4096, 1),
    'odd-slot-seq': b'\x01\x01\x02' + OPEN + byte(4096 + 12288, 3),
    'pid-zero': b'\x01\x01\x02' + word(14, 0),
    'no-magic': b'\x01\x01\x02' + word(0, 0) + word(1, 0),
    'version-2': b'\x01\x01\x02' + word(2, 2),
    'empty-file': b'\x01\x01\x02' + length(0),
    'raw-empty': b'\x00',
    'raw-short': b'\x00' + b'pollcore',
    'raw-magic-short': b'\x00' + struct.pack('<Q', 0x706f6c6c636f7265) + bytes(100),
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(data)
print(f'{len(seeds)} seeds in {OUT}', file=sys.stderr)
