"""Rewrites an artifact's JSON manifest with a Python statement over `m` and
recomputes the section sizes and checksum, as an attacker can: the loader's
manifest checks must hold without the checksum's help.
usage: edit_manifest.py IN.tcx OUT.tcx 'STATEMENT'"""
import json
import struct
import sys

src, dst, edit = sys.argv[1:4]
d = open(src, "rb").read()
magic, version, header, m_len, c_len, d_len, _ = struct.unpack("<8sIIQQQQ", d[:48])
m = json.loads(d[48:48 + m_len])
rest = d[48 + m_len:]
exec(edit)
manifest = json.dumps(m).encode()
body = manifest + rest
h = 0xcbf29ce484222325
for byte in body:
    h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
open(dst, "wb").write(struct.pack("<8sIIQQQQ", magic, version, header, len(manifest), c_len, d_len, h) + body)
