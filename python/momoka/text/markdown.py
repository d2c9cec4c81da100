"""A small block-level Markdown parser producing readable text with exact offsets.

Supported blocks (CommonMark-like, line based): ATX headings (``# T``, closing
``#``s removed), Setext headings (``T`` over ``===`` / ``---``), fenced code
(```` ``` ```` / ``~~~``, content kept verbatim, one paragraph even with blank
lines), indented code, lists (a whole list, nested items included, is one
paragraph; item lines keep their markers), pipe tables (one paragraph, a row
per line, cells joined by `` | ``, the delimiter row dropped), block quotes
(``>`` removed), thematic breaks, link reference definitions, YAML front
matter and HTML comments (``<!-- ... -->``, also over several lines: dropped). Inline markup is reduced to its text: emphasis, strike,
code spans, links and images (their text / alt), autolinks, HTML tags,
backslash escapes and entities.
"""

from __future__ import annotations

import html
import re

from ..errors import InputError
from ._build import Builder, ParsedDocument

__all__ = ["parse_markdown"]

_ATX = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT1 = re.compile(r"^ {0,3}=+[ \t]*$")
_SETEXT2 = re.compile(r"^ {0,3}-+[ \t]*$")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_HR = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_QUOTE = re.compile(r"^ {0,3}> ?")
_REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*\S+.*$")
_TABLE_DELIM = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_INDENTED = re.compile(r"^(?: {4}|\t)")
_COMMENT_OPEN = re.compile(r"^ {0,3}<!--")

# inline
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_IMAGE = re.compile(r"!\[([^\]]*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")
_REFLINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^>\s]+|[^@>\s]+@[^>\s]+\.[^>\s]+)>")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.S)
_EM_STAR = re.compile(r"\*(?=[^\s*])(.+?)(?<=[^\s*])\*", re.S)
_EM_UNDER = re.compile(r"(?<![\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w])", re.S)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S)
_HARD_BREAK = re.compile(r"(?:\\| {2,})$", re.M)
_PROTECT_BASE = 0xF0000  # supplementary private use area: escaped characters live here meanwhile


def _protect(m: re.Match[str]) -> str:
    return chr(_PROTECT_BASE + ord(m.group(1)))


def _restore(s: str) -> str:
    return re.sub("[\U000f0000-\U000f00ff]", lambda m: chr(ord(m.group(0)) - _PROTECT_BASE), s)


def _inline_plain(s: str) -> str:
    s = _COMMENT.sub("", s)
    s = _IMAGE.sub(r"\1", s)
    s = _LINK.sub(r"\1", s)
    s = _REFLINK.sub(r"\1", s)
    s = _AUTOLINK.sub(r"\1", s)
    s = _TAG.sub("", s)
    for _ in range(3):  # nested emphasis
        s2 = _STRIKE.sub(r"\1", _EM_UNDER.sub(r"\1", _EM_STAR.sub(r"\1", _STRONG.sub(r"\2", s))))
        if s2 == s:
            break
        s = s2
    return html.unescape(s)


def inline_text(s: str) -> str:
    """Readable text of a run of inline Markdown (markup removed)."""
    s = _ESCAPE.sub(_protect, s)
    out = []
    pos = 0
    for m in _CODE_SPAN.finditer(s):
        out.append(_inline_plain(s[pos : m.start()]))
        code = m.group(2)
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(code)
        pos = m.end()
    out.append(_inline_plain(s[pos:]))
    return _restore("".join(out))


def _split_cells(row: str) -> list[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    cells = re.split(r"(?<!\\)\|", row)
    return [inline_text(c.strip().replace("\\|", "|")) for c in cells]


def _is_blank(line: str) -> bool:
    return not line.strip()


def _starts_block(line: str) -> bool:
    """True when ``line`` opens a block that interrupts a paragraph."""
    return bool(
        _ATX.match(line)
        or _FENCE.match(line)
        or _HR.match(line)
        or _QUOTE.match(line)
        or (_LIST.match(line) and line[_LIST.match(line).end() :].strip())  # type: ignore[union-attr]
    )


def parse_markdown(text: str) -> ParsedDocument:
    """Parse Markdown into readable text, paragraph spans and sections."""
    if not isinstance(text, str):
        raise InputError(f"Markdown input must be str, got {type(text).__name__}")
    lines = text.splitlines()
    b = Builder()
    i = 0
    n = len(lines)

    # YAML front matter
    if n and lines[0].strip() == "---":
        for j in range(1, n):
            if lines[j].strip() in ("---", "..."):
                i = j + 1
                break

    while i < n:
        line = lines[i]
        if _is_blank(line):
            i += 1
            continue

        if _COMMENT_OPEN.match(line):
            # an HTML comment block (CommonMark's HTML block type 2): to the line holding "-->"; text after
            # it on that line is kept
            j = i
            while j < n and "-->" not in (lines[j] if j > i else line[line.index("<!--") + 4 :]):
                j += 1
            if j == n:  # never closed: the comment runs to the end
                break
            rest = lines[j].split("-->", 1)[1]
            if rest.strip():
                lines[j] = rest
                i = j
            else:
                i = j + 1
            continue

        m = _ATX.match(line)
        if m:
            b.heading(inline_text(_ATX_CLOSE.sub("", m.group(2)).strip()), len(m.group(1)))
            i += 1
            continue

        m = _FENCE.match(line)
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            indent, fence = len(m.group(1)), m.group(2)
            close = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
            body = []
            i += 1
            while i < n and not close.match(lines[i]):
                ln = lines[i]
                k = 0
                while k < indent and k < len(ln) and ln[k] == " ":
                    k += 1
                body.append(ln[k:])
                i += 1
            i += 1  # the closing fence (or the end)
            b.block("\n".join(body))
            continue

        if _HR.match(line):
            i += 1
            continue

        if _REFDEF.match(line):
            i += 1
            continue

        if _INDENTED.match(line):
            body = []
            while i < n and (_INDENTED.match(lines[i]) or _is_blank(lines[i])):
                ln = lines[i]
                body.append(ln[1:] if ln.startswith("\t") else ln[4:])
                i += 1
            b.block("\n".join(body))
            continue

        if _QUOTE.match(line):
            body = []
            while i < n and not _is_blank(lines[i]):
                ln = lines[i]
                q = _QUOTE.match(ln)
                while q:  # nested quotes
                    ln = ln[q.end() :]
                    q = _QUOTE.match(ln)
                body.append(ln.strip())
                i += 1
            b.block(inline_text("\n".join(x for x in body if x)))
            continue

        lm = _LIST.match(line)
        if lm:
            base = len(lm.group(1).expandtabs(4))
            items = []
            while i < n:
                ln = lines[i]
                if _is_blank(ln):
                    # a blank line continues the list only if an item or an indented line follows
                    j = i + 1
                    while j < n and _is_blank(lines[j]):
                        j += 1
                    if j < n and (_LIST.match(lines[j]) or len(lines[j]) - len(lines[j].lstrip()) > base):
                        i = j
                        continue
                    break
                if items and not _LIST.match(ln) and (
                    _ATX.match(ln) or _FENCE.match(ln) or _HR.match(ln) or _QUOTE.match(ln)
                ):
                    break
                expanded = ln.expandtabs(4)
                cut = min(base, len(expanded) - len(expanded.lstrip()))
                body_line = expanded[cut:].rstrip()
                li = _LIST.match(body_line)
                if li:
                    marker_end = li.end()
                    items.append(body_line[:marker_end] + inline_text(body_line[marker_end:]))
                else:
                    indent = len(body_line) - len(body_line.lstrip())
                    items.append(" " * indent + inline_text(body_line.lstrip()))
                i += 1
            b.block("\n".join(items))
            continue

        # a table: a row with a pipe followed by a delimiter row
        if "|" in line and i + 1 < n and _TABLE_DELIM.match(lines[i + 1]) and "-" in lines[i + 1]:
            rows = [" | ".join(_split_cells(line))]
            i += 2
            while i < n and not _is_blank(lines[i]) and "|" in lines[i]:
                rows.append(" | ".join(_split_cells(lines[i])))
                i += 1
            b.block("\n".join(rows))
            continue

        # a paragraph, possibly a Setext heading
        para = [line]
        i += 1
        setext = 0
        while i < n:
            ln = lines[i]
            if _is_blank(ln):
                break
            if _SETEXT1.match(ln):
                setext = 1
                i += 1
                break
            if _SETEXT2.match(ln):
                setext = 2
                i += 1
                break
            if _starts_block(ln):
                break
            para.append(ln)
            i += 1
        if setext:
            b.heading(inline_text(" ".join(x.strip() for x in para)), setext)
        else:
            joined = "\n".join(x.strip() for x in para)
            b.block(inline_text(_HARD_BREAK.sub("", joined)))
    return b.finish()
