"""Every relative link in README.md, BENCHMARKS.md and docs/*.md points at a file that exists and,
with a ``#fragment``, at a heading (or an ``<a id>``) of that file; and the docs (but the research
record) name no script that is not in the repository. No data needed."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
SCRIPT = re.compile(r"\b((?:benchmarks|scripts)/[\w./-]+\.(?:py|sh))\b")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading.

    >>> slug("Execution accuracy (`exec_accuracy.py`)")
    'execution-accuracy-exec_accuracypy'
    >>> slug("`rat-adapt`: adapt to your own questions, without labels")
    'rat-adapt-adapt-to-your-own-questions-without-labels'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose(path):
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        found.update(re.findall(r"<a\s+id=\"([^\"]+)\"", line))
    return found


def links(path: Path) -> list[str]:
    out = []
    for line in prose(path):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        out.extend(LINK.findall(line))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path):
    broken = []
    for target in links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


# docs/research.md records experiments that were removed, naming their scripts and the commit
# that holds them; every other document names only scripts a user can run.
USER_DOCS = [d for d in DOCS if d.name != "research.md"]


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_named_scripts_exist(doc: Path):
    missing = sorted({s for s in SCRIPT.findall(doc.read_text(encoding="utf-8"))
                      if not (REPO / s).is_file()})
    assert not missing, f"{doc.relative_to(REPO)} names scripts that are not in the repository: {missing}"


def test_a_broken_link_is_found(tmp_path: Path):
    (tmp_path / "a.md").write_text("# Title\n\n[ok](a.md#title) [bad](b.md) [bad anchor](a.md#nope)\n"
                                   "```\n[in code](c.md)\n```\n", encoding="utf-8")
    assert links(tmp_path / "a.md") == ["a.md#title", "b.md", "a.md#nope"]
    assert anchors(tmp_path / "a.md") == {"title"}
