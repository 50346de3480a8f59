"""Sub-clause frequencies on hand-made query sets with known answers (tests/fixtures/scf)."""

from pathlib import Path

import numpy as np
import pytest

from model.wholequery.scf import (
    FEATURE_NAMES,
    SUB_CLAUSES,
    decompose,
    match_vector,
    subclause_frequencies,
)

FIXTURE = Path(__file__).parent / "fixtures" / "scf" / "frequencies.txt"


def _cases():
    cases, case = [], None
    for line in FIXTURE.read_text().splitlines():
        if line.startswith("# title:"):
            case = {"title": line.split(":", 1)[1].strip(), "others": []}
            cases.append(case)
        elif line.startswith("query:"):
            case["query"] = line.split(":", 1)[1].strip()
        elif line.startswith("other:"):
            case["others"].append(line.split(":", 1)[1].strip())
        elif line.startswith("expect:"):
            values = dict(kv.split("=") for kv in line.split(":", 1)[1].split())
            expected = dict.fromkeys(FEATURE_NAMES, float(values.pop("default", "nan")))
            expected.update({k: float(v) for k, v in values.items()})
            assert set(expected) == set(FEATURE_NAMES), f"unknown signal in {case['title']}"
            case["expected"] = expected
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_frequencies_match_hand_computed(case):
    freqs = subclause_frequencies(case["query"], case["others"])
    assert freqs.shape == (20,)
    found = dict(zip(FEATURE_NAMES, freqs.tolist()))
    for name, value in case["expected"].items():
        assert found[name] == pytest.approx(value, rel=1e-3, abs=1e-6), (name, found)


def test_twenty_signals_named_as_in_the_paper():
    assert len(FEATURE_NAMES) == 20 and len(SUB_CLAUSES) == 9
    assert FEATURE_NAMES[0] == "set_op" and FEATURE_NAMES[-1] == "product"


def test_decomposition_is_reused_and_matches_strings():
    query = "SELECT name FROM singer WHERE age > 20"
    others = ["SELECT name FROM singer", "SELECT name FROM singer WHERE age > 20"]
    from_strings = subclause_frequencies(query, others)
    from_parts = subclause_frequencies(decompose(query), [decompose(o) for o in others])
    np.testing.assert_array_equal(from_strings, from_parts)


def test_no_additional_outputs_gives_zeros_and_none_never_crashes():
    assert subclause_frequencies("SELECT 1", []).tolist() == [0.0] * 20
    assert match_vector(None, None).tolist() == [0.0] * 19
    assert decompose("DROP TABLE singer; (((") is None


def test_the_schema_may_be_a_tables_json_entry():
    """subclause_frequencies takes what rat.Schema.of takes (a tables.json entry was unhashable)."""
    import rat
    from model.wholequery.scf import subclause_frequencies

    entry = {"db_id": "d", "table_names_original": ["singer"], "column_names_original": [[-1, "*"], [0, "name"], [0, "age"]],
             "column_types": ["text", "text", "number"], "primary_keys": [], "foreign_keys": []}
    args = ("SELECT name FROM singer", ["SELECT name FROM singer WHERE age > 1", "SELECT age FROM singer"])
    assert (subclause_frequencies(*args, entry) == subclause_frequencies(*args, rat.Schema.from_spider(entry))).all()
