"""Token alignment: the baseline's Needleman–Wunsch global alignment of predicted to gold tokens
(``align_tokens``), and a diff of two token lists at a bounded cost (``diff_tokens``)."""

from collections.abc import Sequence

try:  # difflib's algorithm compiled (a dependency of the model; rat alone runs on difflib)
    from cydifflib import SequenceMatcher
except ImportError:  # pragma: no cover
    from difflib import SequenceMatcher

_MATCH, _MISMATCH, _GAP = 1, -1, -1
MAX_ALIGN_TOKENS = 2_000  # tokens on each side (Spider and BIRD queries have a few hundred at most)
# tokens of both sides together that difflib diffs; its cost grows up to the cube of the length
# (0.5 s at 1,000 a side on repeated tokens, 15 s for one 9 KB query); Spider's and BIRD's
# longest queries have 132 and 389 words
MAX_DIFF_TOKENS = 1_200
_RESYNC = 8  # how far ahead (tokens on each side) the linear diff looks for the texts to agree again


def align_tokens(pred_tokens: Sequence, gold_tokens: Sequence) -> list[int]:
    """1 for each predicted token aligned to an identical gold token, else 0
    (match +1, mismatch -1, gap -1; ties prefer the diagonal). Time and memory grow with the
    product of the two lengths: more than ``MAX_ALIGN_TOKENS`` on a side is a ``ValueError``.

    >>> align_tokens("select a from t".split(), "select b from t".split())
    [1, 0, 1, 1]
    >>> align_tokens(["a", "x", "b"], ["a", "b"])
    [1, 0, 1]
    >>> align_tokens([], ["a"]), align_tokens(["a"], [])
    ([], [0])
    """
    for name, tokens in (("pred_tokens", pred_tokens), ("gold_tokens", gold_tokens)):
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
            raise TypeError(f"{name}: expected a list of tokens, found {type(tokens).__name__}")
    n, m = len(pred_tokens), len(gold_tokens)
    if max(n, m) > MAX_ALIGN_TOKENS:  # the table has n x m cells: 2,000 x 2,000 take about 150 MB
        raise ValueError(f"{max(n, m)} tokens to align; at most {MAX_ALIGN_TOKENS} on each side")
    # score[i][j]: best score aligning pred[:i] with gold[:j].
    score = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        score[i][0] = i * _GAP
    for j in range(1, m + 1):
        score[0][j] = j * _GAP
    for i in range(1, n + 1):
        p = pred_tokens[i - 1]
        row, above = score[i], score[i - 1]
        for j in range(1, m + 1):
            diagonal = above[j - 1] + (_MATCH if p == gold_tokens[j - 1] else _MISMATCH)
            row[j] = max(diagonal, above[j] + _GAP, row[j - 1] + _GAP)
    labels = [0] * n
    i, j = n, m
    while i > 0 and j > 0:
        same = pred_tokens[i - 1] == gold_tokens[j - 1]
        if score[i][j] == score[i - 1][j - 1] + (_MATCH if same else _MISMATCH):
            labels[i - 1] = int(same)
            i, j = i - 1, j - 1
        elif score[i][j] == score[i - 1][j] + _GAP:
            i -= 1
        else:
            j -= 1
    return labels


def diff_tokens(a: Sequence, b: Sequence) -> list[tuple[str, int, int, int, int]]:
    """How to turn ``a`` into ``b``: ``difflib.SequenceMatcher``'s opcodes (``equal``,
    ``replace``, ``delete``, ``insert`` with ``a[i1:i2]``, ``b[j1:j2]``), computed by difflib
    (``autojunk=False``) while the two have at most ``MAX_DIFF_TOKENS`` tokens together and
    beyond it by one pass in linear time: equal runs, and where the lists differ, the nearest
    place within ``_RESYNC`` tokens where two tokens in a row agree again (the few tokens
    before it diffed by difflib).

    >>> diff_tokens("select t1 . age from singer as t1".split(), "select singer . age from singer".split())
    [('equal', 0, 1, 0, 1), ('replace', 1, 2, 1, 2), ('equal', 2, 6, 2, 6), ('delete', 6, 8, 6, 6)]
    >>> a, b = "( t1 . a ) ,".split() * 300, "( s . a ) ,".split() * 300
    >>> ops = diff_tokens(a, b)  # past the bound: the same kind of answer, at once
    >>> ops[:2], sorted({op[0] for op in ops}), sum(op[0] == "replace" for op in ops)
    ([('equal', 0, 1, 0, 1), ('replace', 1, 2, 1, 2)], ['equal', 'replace'], 300)
    """
    if len(a) + len(b) <= MAX_DIFF_TOKENS:
        return [tuple(op) for op in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()]
    ops: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    n, m = len(a), len(b)
    while i < n and j < m:
        if a[i] == b[j]:
            k = 1
            while i + k < n and j + k < m and a[i + k] == b[j + k]:
                k += 1
            ops.append(("equal", i, i + k, j, j + k))
            i, j = i + k, j + k
            continue
        di, dj = _resync(a, b, i, j)
        ops += _block(a, b, i, i + di, j, j + dj)
        i, j = i + di, j + dj
    return ops + _block(a, b, i, n, j, m)


def _block(a: Sequence, b: Sequence, i1: int, i2: int, j1: int, j2: int) -> list[tuple[str, int, int, int, int]]:
    """The opcodes of ``a[i1:i2]`` against ``b[j1:j2]`` (a few tokens each), by difflib."""
    if i1 == i2 or j1 == j2:
        return [("delete", i1, i2, j1, j2)] if i1 < i2 else [("insert", i1, i2, j1, j2)] if j1 < j2 else []
    return [(op, x1 + i1, x2 + i1, y1 + j1, y2 + j1)
            for op, x1, x2, y1, y2 in SequenceMatcher(None, a[i1:i2], b[j1:j2], autojunk=False).get_opcodes()]


def _resync(a: Sequence, b: Sequence, i: int, j: int) -> tuple[int, int]:
    """The fewest tokens (di, dj) to skip from ``a[i:]`` and ``b[j:]`` (each at most ``_RESYNC``)
    to where two tokens in a row agree (one at the end of either list); else ``_RESYNC`` of each."""
    n, m = len(a), len(b)
    for total in range(1, 2 * _RESYNC + 1):
        for di in range(max(0, total - _RESYNC), min(total, _RESYNC) + 1):
            x, y = i + di, j + total - di
            if x < n and y < m and a[x] == b[y] and (x + 1 == n or y + 1 == m or a[x + 1] == b[y + 1]):
                return di, total - di
    return min(_RESYNC, n - i), min(_RESYNC, m - j)
