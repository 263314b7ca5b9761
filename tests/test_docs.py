"""The prose: every relative link of the README and docs/ leads somewhere, and machines are named
for what they are (a 2-core AMD EPYC CPU, one H200, a GPU node whose commands were limited to 10
minutes), never by how they were lent or held."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").rglob("*.md"))
LINKED = [ROOT / "README.md", *DOCS]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (links, code marks and emphasis dropped) lower-cased,
    every character but letters, digits, '_', '-' and spaces dropped, spaces turned into '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file offers: its headings' slugs (a repeated one gets -1, -2, ...) and
    explicit <a id/name> anchors."""
    found, seen = set(), {}
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        if m:
            base = slug(m[2])
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path):
    """(line number, target) of every inline Markdown link or image outside code."""
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            yield number, target


def broken_links(path: Path) -> list[str]:
    wrong, cache = [], {}
    for number, target in links(path):
        if SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: ({target})"
        if not dest.exists():
            wrong.append(f"{where}: no file {file_part}")
        elif anchor:
            if dest.suffix != ".md" or dest.is_dir():
                wrong.append(f"{where}: an anchor into {file_part}, which is no Markdown file")
                continue
            if dest not in cache:
                cache[dest] = anchors(dest)
            if anchor not in cache[dest]:
                wrong.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return wrong


@pytest.mark.parametrize("path", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    wrong = broken_links(path)
    assert not wrong, f"{len(wrong)} broken links:\n" + "\n".join(wrong)


@pytest.mark.parametrize("heading,expected", [
    ("GPU cost, measured", "gpu-cost-measured"),
    ("Checks: length grouping and precision", "checks-length-grouping-and-precision"),
    ("The other attention systems (notebook 06)", "the-other-attention-systems-notebook-06"),
    ("The paper's printed gate vectors and head", "the-papers-printed-gate-vectors-and-head"),
    ("25 epochs with the official code's changes (seeds 42–44)",
     "25-epochs-with-the-official-codes-changes-seeds-4244"),
    ("The whole `cpu_profile` in bf16", "the-whole-cpu_profile-in-bf16"),
    ("λ_A = 0, [linked](x.md)", "λ_a--0-linked"),
])
def test_slug_follows_github(heading, expected):
    assert slug(heading) == expected


def test_a_broken_link_is_named_with_its_file_and_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "b.md").write_text("# Title\n\n## A section\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#a-section) [gone](c.md) [bad](b.md#nowhere) `[code](x.md)`\n"
                    "```\n[fenced](y.md)\n```\n[web](https://example.org/#x) [self](#nothing)\n",
                    encoding="utf-8")
    wrong = broken_links(page)
    assert len(wrong) == 3, wrong
    assert "a.md:1: (c.md): no file c.md" in wrong[0]
    assert "no heading #nowhere in b.md" in wrong[1]
    assert "a.md:5: (#nothing): no heading #nothing in a.md" in wrong[2]


# Machines are named for what they are; these phrases name them by how they were lent or held, or
# by where the writer sat ("this CPU"). "session" is such a word where it means a stretch of work
# on a machine; ALLOWED lists its other meanings (a notebook's session object, a Jupyter or Colab
# session, a Python process), which are removed from a line before it is checked.
VOCABULARY = {
    "this CPU": re.compile(r"\bthis (?:\d+-core )?CPU\b", re.IGNORECASE),
    "this machine": re.compile(r"\bthis machine\b", re.IGNORECASE),
    "lent": re.compile(r"\blent\b", re.IGNORECASE),
    "borrowed": re.compile(r"\bborrow(?:ed|ing|s)?\b", re.IGNORECASE),
    "device time": re.compile(r"\bdevice time\b", re.IGNORECASE),
    "session": re.compile(r"\bsessions?\b", re.IGNORECASE),
}
ALLOWED = re.compile(
    r"harness[./]session\b"                          # absa_lib.harness.session, the notebooks' module
    r"|`session`"                                    # the code map's name for that module
    r"|\bsession\.[A-Za-z_]\w*"                      # its attributes (session.Folders)
    r"|\bnotebook's (?:`)?session\b"                 # a notebook's session object
    r"|\b(?:jupyter|colab|binder|python|kernel|interactive|notebook) sessions?\b"
    r"|\bends idle sessions\b"                       # a notebook service (Colab) ending sessions
    r"|\bprocess sessions?\b"                        # a POSIX process session (setsid)
    r"|\bscope=\"session\"",                         # pytest's fixture scope
    re.IGNORECASE)
VOCABULARY_FILES = sorted({ROOT / "README.md", *DOCS, *(ROOT / "notebooks").glob("*.py"),
                           *(ROOT / "results").rglob("*.md")})


def vocabulary_offenders(path: Path) -> list[str]:
    wrong = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        checked = ALLOWED.sub("", line)
        for name, pattern in VOCABULARY.items():
            if pattern.search(checked):
                wrong.append(f"{path.relative_to(ROOT)}:{number}: {name!r}: {line.strip()[:160]}")
    return wrong


@pytest.mark.parametrize("path", VOCABULARY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_machines_are_named_for_what_they_are(path):
    wrong = vocabulary_offenders(path)
    assert not wrong, f"{len(wrong)} lines name a machine by how it was lent or held:\n" + "\n".join(wrong)


@pytest.mark.parametrize("line,offends", [
    ("trained on this CPU, as a check", True),
    ("on this 2-core CPU", True),
    ("a device lent for 30 minutes", True),
    ("more than a session's device time", True),
    ("over two or three sessions each", True),
    ("from absa_lib.harness.session import setup", False),
    ("a notebook's `session`, the `profiles`", False),
    ("a notebook service that ends idle sessions", False),
    ("in a Jupyter session or on Colab", False),
    ("one H200, a GPU node whose commands were limited to 10 minutes", False),
    ("a lentil", False),
])
def test_vocabulary_rule(tmp_path, monkeypatch, line, offends):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(line + "\n", encoding="utf-8")
    assert bool(vocabulary_offenders(page)) is offends
