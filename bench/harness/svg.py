"""What the benchmark's hand-written SVG plots share (report.freshness_svg, soak.svg): the
document's first elements, a linear axis's round step, and the ticks of the time or rate
axis under a plot."""
import math


def svg_start(width, height, title):
    """The svg element, a white background and the title, as the first lines of a plot."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']


def round_step(vmax, most):
    """The step of an axis from 0 to vmax: 1, 2 or 5 times a power of ten, the smallest of
    those that divides the axis into at most `most` intervals."""
    step = 10 ** math.floor(math.log10(max(vmax, 1e-9) / (most - 1)))
    return step * next(m for m in (1, 2, 5, 10) if vmax / (step * m) <= most)


def x_ticks(out, px, bottom, xmax, step, label):
    """Appends to `out` a tick and its label (label(v)) every `step` from 0 to xmax, under
    the line y = bottom; px maps a value to its x."""
    v = 0
    while v <= xmax + 1e-9:
        x = px(v)
        out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{label(v)}</text>')
        v += step
