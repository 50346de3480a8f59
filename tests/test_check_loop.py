"""scripts/check_loop.py, the worked example of docs/scoring.md: the loop on the demo corpus's
first dev questions, a query sent back with its feedback and answered again."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_loop_sends_a_query_back_with_feedback_and_runs_the_sure_ones():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "check_loop.py"), "--show", "1"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    shown = out.split("\n\n")[0].splitlines()
    assert shown[0].startswith("Q: ") and shown[1].startswith("  try 1: SELECT")
    assert shown[2].startswith("    -> regenerate (0.") and shown[3].startswith("    feedback: The query is likely wrong")
    assert any(line.strip() == "Write the query again, fixing these." for line in shown)
    assert shown[-2].startswith("  try 2: SELECT") and shown[-2] != shown[1].replace("try 1", "try 2")
    first = re.search(r"(\d+) questions; first tries: (\d+) run, (\d+) review, (\d+) regenerate", out)
    assert first and int(first[1]) == sum(int(first[k]) for k in (2, 3, 4)) > 100 and int(first[4]) >= 1
    after = re.search(r"after the loop: (\d+) run \((\d+) of them right by execution\), (\d+) for review", out)
    assert after and int(after[2]) <= int(after[1]) >= int(first[2])
