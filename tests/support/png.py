"""A PNG read for the screenshot tests without an imaging library: its size and its
pixels' colours (8-bit RGB or RGBA, not interlaced: what Chromium writes)."""

import struct
import zlib
from collections import Counter

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunks(data: bytes):
    at = len(SIGNATURE)
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        yield kind, data[at + 8 : at + 8 + length]
        at += 12 + length


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(SIGNATURE), "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(kind: int, line: bytearray, prior: bytearray, bpp: int) -> None:
    """Undo one scanline's filter in place (PNG spec, section 9)."""
    if kind == 0:
        return
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = prior[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            corner = prior[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF


def png_colours(data: bytes) -> Counter[bytes]:
    """How many pixels have each colour (RGB bytes)."""
    width, height = png_size(data)
    header = dict(_chunks(data))[b"IHDR"]
    depth, colour_type, _, _, interlace = header[8:13]
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(body for kind, body in _chunks(data) if kind == b"IDAT"))
    stride = width * bpp
    prior = bytearray(stride)
    colours: Counter[bytes] = Counter()
    for row in range(height):
        start = row * (stride + 1)
        line = bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(raw[start], line, prior, bpp)
        colours.update(bytes(line[i : i + 3]) for i in range(0, stride, bpp))
        prior = line
    return colours
