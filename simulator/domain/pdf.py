"""A one-page PDF of text lines, written directly.

A page of text is a few PDF objects, so the sandbox writes them itself rather than adding a
PDF library to the dependencies for a paystub.
"""

from __future__ import annotations


def _text(value: str) -> str:
    return value.encode("latin-1", "replace").decode("latin-1").replace("\\", "\\\\") \
        .replace("(", "\\(").replace(")", "\\)")


def text_pdf(lines: list[tuple[int, str]]) -> bytes:
    """A PDF page (US letter, Helvetica) with one (font size, text) pair per line."""
    content = "BT /F1 12 Tf 72 740 Td 18 TL\n" + "".join(
        f"/F1 {size} Tf ({_text(line)}) Tj T*\n" for size, line in lines) + "ET"
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
               "/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
               f"<< /Length {len(content.encode('latin-1'))} >>\nstream\n{content}\nendstream",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out
