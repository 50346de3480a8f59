"""Token-alignment baseline: Needleman–Wunsch global alignment of predicted to gold tokens."""

from collections.abc import Sequence

_MATCH, _MISMATCH, _GAP = 1, -1, -1
MAX_ALIGN_TOKENS = 2_000  # tokens on each side (Spider and BIRD queries have a few hundred at most)


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
