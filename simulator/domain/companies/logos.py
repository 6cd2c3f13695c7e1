"""Generated company logos: an SVG monogram on the company's brand colour.

The catalog's `branding.logo.url` points at hosts that do not exist (`*.sandbox.invalid`)
and the hosted flow fetches nothing from outside, so the sandbox draws a logo itself from
what it knows: the company's name and `branding.color` (spec: Task events, `company`
`branding` with `color` and `logo`). The drawing is a pure function of those two values;
the text is escaped and the colours checked, so a company record cannot put markup or
script into the picture.
"""

from __future__ import annotations

import hashlib
import re
from xml.sax.saxutils import escape

HEX_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}){1,2}")
# Words a monogram skips: "The Home Depot" is HD, "Bank of America" BA.
SMALL_WORDS = frozenset({"the", "of", "and", "&", "a", "an", "inc", "inc.", "llc", "ltd",
                         "co", "co.", "corp", "corp.", "corporation", "company", "-"})
INK_DARK = "#000000"  # black, not a softer near-black: only black keeps 4.5:1 on every colour
INK_LIGHT = "#ffffff"
SIZE = 96


def brand_colour(colour: object, fallback_key: str) -> str:
    """`#rrggbb` from a `#rgb`/`#rrggbb` colour; anything else gets a stable colour made
    from `fallback_key` (the company's id), never the given text."""
    if isinstance(colour, str) and HEX_COLOUR.fullmatch(colour):
        digits = colour[1:]
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return "#" + digits.lower()
    digest = hashlib.sha256(fallback_key.encode("utf-8", "replace")).hexdigest()
    return "#" + digest[:6]


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of `#rrggbb`."""
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = map(channel, bytes.fromhex(colour[1:]))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def ink_on(colour: str) -> str:
    """White or near-black, whichever reads better on `colour` (always 4.5:1 or more)."""
    return INK_LIGHT if contrast(colour, INK_LIGHT) >= contrast(colour, INK_DARK) else INK_DARK


def _shade(colour: str, factor: float) -> str:
    """`colour` darkened (factor < 1) or lightened toward white (factor > 1)."""
    channels = bytes.fromhex(colour[1:])
    if factor <= 1:
        return "#" + bytes(round(v * factor) for v in channels).hex()
    return "#" + bytes(round(v + (255 - v) * (factor - 1)) for v in channels).hex()


def monogram(name: str) -> str:
    """One to three letters for a name: "ADP", "W" (Walmart), "HD" (The Home Depot),
    "AT&T" stays whole, an empty name is "?"."""
    words = [w for w in re.split(r"[\s\-/,]+", name.strip()) if w]
    if len(words) == 1:
        word = words[0]
        if word.isupper() and 2 <= len(word) <= 4 and word.replace("&", "").isalpha():
            return word  # an acronym: ADP, UPS, AT&T
    significant = [w for w in words if w.casefold() not in SMALL_WORDS] or words
    letters = [next((c for c in w if c.isalnum()), "") for w in significant[:2]]
    letters = [c.upper() for c in letters if c]
    return "".join(letters) or "?"


def company_logo_svg(name: str, colour: object, company_id: str) -> str:
    """A 96 x 96 logo: a rounded square in the brand colour (a soft diagonal light),
    the name's monogram in the ink that reads on it. `role="img"` with the name as its
    title, so the picture is named wherever it is used alone."""
    base = brand_colour(colour, company_id)
    ink = ink_on(base)
    letters = monogram(name)
    font = {1: 52, 2: 42, 3: 32}.get(len(letters), 26)
    light, deep = _shade(base, 1.18), _shade(base, 0.86)
    title = escape(name or "Company")
    text = escape(letters)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" '
        f'viewBox="0 0 {SIZE} {SIZE}" role="img" aria-label="{escape(name or "Company", {chr(34): "&quot;"})}">'
        f"<title>{title}</title>"
        '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">'
        f'<stop offset="0" stop-color="{light}"/><stop offset="1" stop-color="{deep}"/>'
        "</linearGradient></defs>"
        f'<rect width="{SIZE}" height="{SIZE}" rx="22" fill="url(#g)"/>'
        f'<circle cx="84" cy="10" r="34" fill="{ink}" fill-opacity="0.08"/>'
        f'<text x="50%" y="50%" dy="0.35em" text-anchor="middle" fill="{ink}" '
        'font-family="system-ui, -apple-system, \'Segoe UI\', Roboto, Helvetica, Arial, sans-serif" '
        f'font-size="{font}" font-weight="700" letter-spacing="-1">{text}</text>'
        "</svg>")
