"""The soak's memory curve as an SVG: the app's resident memory against time, its phases shaded,
and the band within 5 % of the value after warm-up. Plain SVG, so the soak needs no plotting
package.

    svg = memory_svg(curve, phases, reference_mb)
"""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 760, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 44
PHASE_FILLS = ("#eef2f7", "#fdf1e6", "#e9f5ec", "#f3eef8")


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round values between lo and hi, about `count` of them."""
    span = max(hi - lo, 1e-9)
    raw = span / count
    step = next(m * 10**e for e in range(-3, 7) for m in (1, 2, 5) if m * 10**e >= raw)
    first = -(-lo // step) * step
    return [first + i * step for i in range(int((hi - first) // step) + 1)]


def _phase_bands(phases: list[tuple[str, float]], t_end: float, x, h: float) -> list[str]:
    out = []
    for i, (name, start) in enumerate(phases):
        end = phases[i + 1][1] if i + 1 < len(phases) else t_end
        fill = PHASE_FILLS[i % len(PHASE_FILLS)]
        width = max(0.0, x(end) - x(start))
        out.append(f'<rect x="{x(start):.1f}" y="{TOP}" width="{width:.1f}" height="{h}" fill="{fill}"/>')
        out.append(f'<text x="{x(start) + 4:.1f}" y="{TOP + 12}" fill="#555">{escape(name)}</text>')
    return out


def memory_svg(
    curve: list[tuple[float, float]],
    phases: list[tuple[str, float]],
    reference_mb: float | None = None,
    *,
    band: float = 0.05,
    title: str = "App resident memory during the soak",
) -> str:
    """`curve`: (seconds, MB) samples; `phases`: (name, start seconds) in order; the band is
    drawn around `reference_mb` (the value after warm-up) where given."""
    if not curve:
        raise ValueError("no samples to plot")
    t_end = max(max(t for t, _ in curve), 1.0)
    values = [mb for _, mb in curve] + ([reference_mb * (1 - band), reference_mb * (1 + band)] if reference_mb else [])
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.08, 1.0)
    lo, hi = lo - pad, hi + pad
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + w * t / t_end

    def y(mb: float) -> float:
        return TOP + h * (1 - (mb - lo) / (hi - lo))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="16" font-size="13">{escape(title)}</text>',
    ]
    out += _phase_bands(phases, t_end, x, h)
    if reference_mb:
        top, bottom = y(reference_mb * (1 + band)), y(reference_mb * (1 - band))
        out.append(
            f'<rect x="{LEFT}" y="{top:.1f}" width="{w}" height="{bottom - top:.1f}" fill="#2a7" fill-opacity="0.08" '
            'stroke="#2a7" stroke-dasharray="4 3" stroke-opacity="0.6"/>'
        )
        out.append(
            f'<text x="{LEFT + w - 4}" y="{top - 3:.1f}" text-anchor="end" fill="#2a7">'
            f"after warm-up {reference_mb:.0f} MB, \u00b1{band:.0%}</text>"
        )
    for v in _ticks(lo, hi):
        out.append(f'<line x1="{LEFT}" x2="{LEFT + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for m in _ticks(0.0, t_end / 60):
        out.append(f'<text x="{x(m * 60):.1f}" y="{TOP + h + 16}" text-anchor="middle">{m:g}</text>')
    points = " ".join(f"{x(t):.1f},{y(mb):.1f}" for t, mb in curve)
    out += [
        f'<polyline points="{points}" fill="none" stroke="#1f5fa8" stroke-width="1.5"/>',
        f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
        f'<text x="{LEFT + w / 2}" y="{HEIGHT - 8}" text-anchor="middle">minutes</text>',
        f'<text x="14" y="{TOP + h / 2}" text-anchor="middle" transform="rotate(-90 14 {TOP + h / 2})">RSS (MB)</text>',
        "</svg>",
    ]
    return "\n".join(out) + "\n"
