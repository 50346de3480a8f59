"""Reasons are said only of the nodes they are about: a literal's reasons of a literal the question
could say (not of TRUE, NULL, current_timestamp, a date part or a struct field's name), a question
cue's of the operators the cue is about (not of a Field, a Selection, a column)."""

import numpy as np
import pytest

from model.scoring.reasons import CUE_OPERATORS, VALUE_REASONS, ReasonContext, explain_nodes

FEATURES = ("cue_each", "cue_compare", "cue_superlative", "value_fuzzy", "value_in_question", "agreement")


class EveryFeatureLowers:
    """A model in which every feature above lowers each node's confidence (its typical value 1,
    the node's 0), the earlier ones the more: each is a reason unless it is not said of the node."""

    def __init__(self):
        self.features_ = list(FEATURES)
        self.typical_ = {"g": dict.fromkeys(FEATURES, 1.0)}
        self.weights = np.linspace(0.5, 0.1, len(FEATURES))

    def node_confidence(self, rows, database=True):
        return np.asarray(rows) @ self.weights


def reasons_of(*contexts: ReasonContext) -> list[set[str]]:
    x = np.zeros((len(contexts), len(FEATURES)))
    found = explain_nodes(EveryFeatureLowers(), x, list(range(len(contexts))), list(contexts),
                          ["g"] * len(contexts), np.zeros(len(contexts)))
    return [{r.feature for r in found[i]} for i in range(len(contexts))]


@pytest.mark.parametrize("label", ["true", "false", "null", "current_timestamp", "current_date", "day",
                                   "month", "source", "?"])
def test_a_value_leaf_that_is_no_literal_of_the_question_gets_no_literal_reasons(label):
    (said,) = reasons_of(ReasonContext(label, "value"))
    assert not said & VALUE_REASONS and "agreement" in said


@pytest.mark.parametrize("label", ["'Alameda'", "30", "-30", "2.5"])
def test_a_literal_keeps_its_literal_reasons(label):
    (said,) = reasons_of(ReasonContext(label, "value"))
    assert {"value_fuzzy", "value_in_question"} <= said


@pytest.mark.parametrize("kind", ["Field", "Struct", "Interval", "Selection", "Dateadd", "Is_null", "column",
                                  "table", "value"])
def test_cue_reasons_are_not_said_of_nodes_the_cue_is_not_about(kind):
    (said,) = reasons_of(ReasonContext("x" if kind == "value" else kind, kind))
    assert not said & set(CUE_OPERATORS)


@pytest.mark.parametrize("kind, cue", [("Groupby", "cue_each"), ("Count", "cue_each"), ("Project", "cue_each"),
                                       ("Gt", "cue_compare"), ("Having", "cue_compare"), ("Max", "cue_superlative"),
                                       ("Orderby_desc_nulls_last", "cue_superlative")])
def test_a_cue_reason_is_said_of_the_operator_it_is_about(kind, cue):
    (said,) = reasons_of(ReasonContext(kind, kind))
    assert cue in said


def test_a_boolean_of_a_scored_query_gets_no_literal_reason():
    """`iff(age > 20, true, false)`: the look-here-first node `true` was "literal true matches the
    question's words only loosely" and "the question says 'more than'", though the question's
    comparison is the Gt's."""
    from model import Scorer

    scored = Scorer.pretrained().score("SELECT iff(age > 20, true, false) FROM singer",
                                       question="Which singers are older than 20?",
                                       schema={"singer": ["singer_id", "name", "age"]}, dialect="snowflake")
    kinds = {n.kind for n in scored.nodes}
    assert {"true", "false"} <= {n.label for n in scored.nodes} and "Gt" in kinds
    for node in scored.nodes:
        for reason in node.reasons:
            assert reason.feature not in CUE_OPERATORS or node.kind in CUE_OPERATORS[reason.feature], (node.label,
                                                                                                       reason.text)
            assert not (node.kind == "value" and reason.feature in VALUE_REASONS
                        and node.label in ("true", "false")), reason.text
