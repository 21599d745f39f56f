#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""nvmf_probe.py: which admin commands, Identify CNS values, log pages and
features an NVMe controller answers; and the comparison of two controllers
against docs/storage.md's table.

  nvmf_probe.py sweep /dev/nvmeX > OUT
      Sends every admin opcode, Identify CNS, Get Log Page LID and Get/Set
      Features FID to the controller (the kernel's NVME_IOCTL_ADMIN_CMD,
      which `nvme admin-passthru` uses) and prints one line per probe,
      "KEY: STATUS" (STATUS the CQE's status field in hex, 0000 answered,
      or the errno name), sorted. KEYs:
        opc OOh                  0000 when the opcode is implemented (any
                                 status but Invalid Command Opcode), else
                                 that status
        id CCh csi C             Identify CNS CCh (00h-3Fh; CSI C, 0 or 2)
                                 with NSID 1, 0 or FFFFFFFFh, 4096 bytes
        log LLh ns all|0|1       Get Log Page LID LLh with that NSID, 512
                                 bytes or, if that fails other than with
                                 Invalid Field, Invalid Namespace or Invalid
                                 Log Page, 4096
        log 05h csi 2 ns all     Commands Supported and Effects of the
                                 Zoned Namespace command set
        get FFh / set FFh        Get / Set Features FID FFh with NSID 0, or
                                 1 if 0 is an Invalid Namespace; no data, or
                                 when the status is Data SGL Length Invalid,
                                 16 bytes (CDW11 bit 0 set, as Host
                                 Identifier needs), 512, 4096. Set writes
                                 the value Get read (0 when Get failed), so
                                 nothing changes.
      Skipped: Asynchronous Event Request (0Ch: held until an event; the
      kernel's host keeps some outstanding anyway) and Fabrics (7Fh).

  nvmf_probe.py compare KERNEL.txt POLLCORE.txt TABLE.md
      Compares two sweeps (nvmet's, pollcore-nvmf's) with the table between
      "<!-- nvmf-admin-table -->" and "<!-- /nvmf-admin-table -->" in
      TABLE.md. Each row's second column names probe keys in backticks; its
      third column starts with "answered" or "not answered" for nvmet, its
      fourth for pollcore-nvmf. Fails (exit 1, each reason printed) when
        - a key nvmet or pollcore-nvmf answers is in no row;
        - a row's verdict is not what the sweep found, for either target
          (so a refusal of what nvmet answers is in the table, with its
          reason, or the comparison fails);
        - a row names a key that no sweep probed.
      Prints the comparison, key by key.
Exit status: 0, 1 (a failure, said on stderr), 2 (usage).
"""
import errno
import fcntl
import os
import re
import struct
import sys

# struct nvme_passthru_cmd (linux/nvme_ioctl.h), 72 bytes
CMD = struct.Struct('<BBHIIIQQII6III')
NVME_IOCTL_ADMIN_CMD = (3 << 30) | (CMD.size << 16) | (ord('N') << 8) | 0x41
TIMEOUT_MS = 15000

SC_INVALID_OPCODE = 0x01
SC_INVALID_FIELD = 0x02
SC_INVALID_NS = 0x0b
SC_SGL_DATA_LEN = 0x0f
SC_INVALID_LOG_PAGE = 0x109
NSID_ALL = 0xffffffff
NS_NAMES = {NSID_ALL: 'all', 0: '0', 1: '1'}


class Ctrl:
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)

    def admin(self, opc, nsid=0, cdw10=0, cdw11=0, cdw12=0, cdw13=0, cdw14=0, length=0):
        """Returns (status, result, data): status the CQE's status field
        (DNR and More included) or an errno name."""
        buf = bytearray(max(length, 1))
        addr = 0
        if length:
            # the buffer's address: ctypes is the one way to get it in the stdlib
            import ctypes
            cbuf = (ctypes.c_char * length).from_buffer(buf)
            addr = ctypes.addressof(cbuf)
        cmd = bytearray(CMD.pack(opc, 0, 0, nsid, 0, 0, 0, addr, 0, length,
                                 cdw10, cdw11, cdw12, cdw13, cdw14, 0, TIMEOUT_MS, 0))
        try:
            rc = fcntl.ioctl(self.fd, NVME_IOCTL_ADMIN_CMD, cmd, True)
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno)), 0, b''
        finally:
            if length:
                del cbuf
        result = CMD.unpack(bytes(cmd))[-1]
        return rc, result, bytes(buf[:length])


def st(s):
    return s if isinstance(s, str) else '%04x' % s


def sc(s):
    """Status code and type without DNR/More, or None for an errno."""
    return None if isinstance(s, str) else s & 0x7ff


def sweep(path):
    c = Ctrl(path)
    out = {}

    # opcodes: implemented unless Invalid Command Opcode
    for opc in range(256):
        if opc in (0x0c, 0x7f):
            continue
        s, _, _ = c.admin(opc)
        out['opc %02xh' % opc] = st(s) if sc(s) in (None, SC_INVALID_OPCODE) else '0000'

    # Identify: any NSID of 1, 0, all; the status of the first
    for cns in range(0x40):
        for csi in (0, 2):
            first = None
            for nsid in (1, 0, NSID_ALL):
                s, _, _ = c.admin(0x06, nsid, cdw10=cns, cdw11=csi << 24, length=4096)
                first = s if first is None or s == 0 else first
                if s == 0:
                    break
            out['id %02xh csi %d' % (cns, csi)] = st(first)

    # logs
    def log(lid, nsid, csi=0):
        s = None
        for length in (512, 4096):
            numd = length // 4 - 1
            s, _, _ = c.admin(0x02, nsid, cdw10=lid | (numd & 0xffff) << 16,
                              cdw11=numd >> 16, cdw14=csi << 24, length=length)
            if s == 0 or sc(s) in (None, SC_INVALID_FIELD, SC_INVALID_NS, SC_INVALID_LOG_PAGE):
                break
        return s
    for lid in range(256):
        for nsid in (NSID_ALL, 0, 1):
            s = log(lid, nsid)
            if lid < 0x10 or s == 0:
                out['log %02xh ns %s' % (lid, NS_NAMES[nsid])] = st(s)
    out['log 05h csi 2 ns all'] = st(log(0x05, NSID_ALL, csi=2))

    # features
    def feat(opc, fid, value, tries):
        for nsid in (0, 1):
            for length, cdw11 in tries:
                s, res, _ = c.admin(opc, nsid, cdw10=fid, cdw11=cdw11 if cdw11 is not None
                                    else value, length=length)
                if sc(s) != SC_SGL_DATA_LEN:
                    break
            if s == 0:
                return s, res, (length, cdw11)
            if sc(s) != SC_INVALID_NS:
                break
        return s, res, None
    tries = [(0, None), (16, 1), (512, None), (4096, None)]
    for fid in range(256):
        s, res, how = feat(0x0a, fid, 0, tries)
        out['get %02xh' % fid] = st(s)
        value = res if s == 0 else 0
        s, _, _ = feat(0x09, fid, value, [how] if how else tries)
        out['set %02xh' % fid] = st(s)
    return out


def read_sweep(path):
    d = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                k, v = line.rsplit(': ', 1)
                d[k] = v
    return d


def read_table(path):
    """{key: (nvmet_answers, pollcore_answers, row)} from the table's rows."""
    text = open(path).read()
    m = re.search(r'<!-- nvmf-admin-table -->\n(.*?)<!-- /nvmf-admin-table -->', text, re.S)
    if not m:
        raise SystemExit('%s: no <!-- nvmf-admin-table --> ... <!-- /nvmf-admin-table -->' % path)
    rows = {}
    for line in m.group(1).splitlines():
        cells = [x.strip() for x in line.strip().strip('|').split('|')]
        if len(cells) < 4 or not cells[1].startswith('`'):
            continue
        verdict = []
        for cell in cells[2:4]:
            low = cell.lower()
            if low.startswith('not answered'):
                verdict.append(False)
            elif low.startswith('answered'):
                verdict.append(True)
            else:
                raise SystemExit('%s: row "%s": a verdict must start with "answered" or '
                                 '"not answered": %s' % (path, cells[0], cell))
        for key in re.findall(r'`([^`]+)`', cells[1]):
            if key in rows:
                raise SystemExit('%s: key `%s` is in two rows' % (path, key))
            rows[key] = (verdict[0], verdict[1], cells[0])
    return rows


def compare(kpath, ppath, tpath):
    k, p, rows = read_sweep(kpath), read_sweep(ppath), read_table(tpath)
    bad = []
    keys = sorted(set(k) | set(p) | set(rows))
    print('%-24s %-8s %-8s %s' % ('probe', 'nvmet', 'pollcore', 'table'))
    for key in keys:
        ka, pa = k.get(key) == '0000', p.get(key) == '0000'
        row = rows.get(key)
        print('%-24s %-8s %-8s %s' % (key, k.get(key, '-'), p.get(key, '-'),
                                      row[2] if row else ''))
        if row is None:
            if ka or pa:
                bad.append('`%s`: %s answers it, and the table has no row for it' %
                           (key, 'nvmet' if ka else 'pollcore-nvmf'))
            continue
        if key not in k or key not in p:
            bad.append('`%s` (row "%s"): not probed on %s' %
                       (key, row[2], 'nvmet' if key not in k else 'pollcore-nvmf'))
            continue
        if row[0] != ka:
            bad.append('`%s` (row "%s"): the table says nvmet %s; it %s (%s)' %
                       (key, row[2], 'answers' if row[0] else 'does not answer',
                        'does' if ka else 'does not', k[key]))
        if row[1] != pa:
            bad.append('`%s` (row "%s"): the table says pollcore-nvmf %s; it %s (%s)' %
                       (key, row[2], 'answers' if row[1] else 'does not answer',
                        'does' if pa else 'does not', p[key]))
    for b in bad:
        print('FAIL: ' + b, file=sys.stderr)
    return 1 if bad else 0


def main(argv):
    if len(argv) == 3 and argv[1] == 'sweep':
        for key, s in sorted(sweep(argv[2]).items()):
            print('%s: %s' % (key, s))
        return 0
    if len(argv) == 5 and argv[1] == 'compare':
        return compare(argv[2], argv[3], argv[4])
    print(__doc__.split('\n\n')[1], file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
