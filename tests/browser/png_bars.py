#!/usr/bin/env python3
"""Counts the pixels of a colour in a PNG screenshot, and the horizontal bands
(runs of rows) holding them: `png_bars.py FILE RRGGBB` prints "PIXELS BANDS".

Standard library only (zlib): 8-bit RGB or RGBA, not interlaced, as Chromium's
--screenshot writes them. A colour matches within 12 per channel (anti-aliased
edges are left out).
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                sys.exit(f"{path}: only 8-bit RGB/RGBA, not interlaced (depth {depth}, colour {colour})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    path, hex_colour = sys.argv[1], sys.argv[2]
    want = tuple(int(hex_colour[i:i + 2], 16) for i in (0, 2, 4))
    width, height, channels, rows = decode(path)
    pixels, bands, in_band = 0, 0, False
    for line in rows:
        hits = 0
        for x in range(0, width * channels, channels):
            if all(abs(line[x + k] - want[k]) <= 12 for k in range(3)):
                hits += 1
        pixels += hits
        if hits and not in_band:
            bands += 1
        in_band = hits > 0
    print(pixels, bands)


if __name__ == "__main__":
    main()
