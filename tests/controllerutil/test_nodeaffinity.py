"""corev1 MatchNodeSelectorTerms (nodeaffinity_test.go's TestNodeSelectorMatch cases, the DaemonSet controller's
node affinity cases) and GetRequiredNodeAffinity over a pod spec."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllerutil.nodeaffinity import (
    NodeSelector,
    match_node_selector_terms,
    pod_spec_matches_node,
)


@pytest.mark.parametrize(("terms", "name", "labels", "matches"), [
    pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "n1", {}, True,
                 id="name in"),
    pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "n2", {}, False,
                 id="name not in"),
    pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}], "n2", {},
                 True, id="name NotIn"),
    pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}], "n1", {},
                 False, id="field selectors take exactly one value"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]},
                  {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "n1", {}, True,
                 id="terms are ORed"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}],
                   "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "n1", {}, False,
                 id="expressions and fields of a term are ANDed"),
    pytest.param([], "n1", {}, False, id="no terms"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "Bogus", "values": ["x"]}]}], "n1", {"a": "x"},
                 False, id="unknown operator"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}, {}], "n1", {"a": "x"}, True,
                 id="an empty term beside a matching one"),
    pytest.param([{"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
                  {"matchExpressions": [{"key": "c", "operator": "Exists"}]}], "n1", {"a b": "1", "c": "1"}, True,
                 id="a term that does not parse (bad key) is skipped, the next still counts"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["not valid!"]}]}], "n1",
                 {"a": "not valid!"}, False, id="values are validated as label values"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}], "n1", {"a": "x"},
                 False, id="Exists takes no values"),
    pytest.param([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["four"]}]}], "n1",
                 {"cores": "8"}, False, id="Gt needs an integer"),
    pytest.param([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}], "n1",
                 {"cores": "eight"}, False, id="Gt against a label that is no integer"),
    pytest.param([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["16"]}]}], "n1",
                 {"cores": "8"}, True, id="Lt"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}], "n1", {}, True,
                 id="NotIn matches a node without the label"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}], "n1", {"a": ""}, False,
                 id="DoesNotExist"),
    pytest.param([{"matchFields": [{"key": "metadata.uid", "operator": "NotIn", "values": ["u"]}]}], "n1", {}, True,
                 id="a field other than the name reads as empty"),
    pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}], "n1", {}, False,
                 id="fields take In and NotIn only"),
    pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "", {}, True,
                 id="a nameless node has no fields: matchFields are not checked"),
    pytest.param([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}],
                   "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "", {"a": "x"},
                 True, id="a nameless node is judged by its labels"),
    pytest.param(None, "n1", {}, False, id="nil terms"),
])
def test_match_node_selector_terms(terms: list[dict[str, Any]], name: str, labels: dict[str, str],
                                   matches: bool) -> None:
    assert match_node_selector_terms(terms, name, labels) is matches


def test_a_parsed_selector_answers_for_many_nodes() -> None:
    selector = NodeSelector([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}])
    assert [selector.matches(f"n{i}", {"zone": zone}) for i, zone in enumerate("abc")] == [True, True, False]


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(("pod_spec", "labels", "matches"), [
    pytest.param({}, {}, True, id="no selector, no affinity: every node"),
    pytest.param({"nodeSelector": {"disk": "ssd"}}, {"disk": "ssd"}, True, id="nodeSelector matches"),
    pytest.param({"nodeSelector": {"disk": "ssd"}}, {}, False, id="nodeSelector label missing"),
    pytest.param({"nodeSelector": {"disk": ""}}, {}, False, id="an empty value still needs the label"),
    pytest.param({"nodeSelector": {"disk": "ssd"},
                  "affinity": _affinity({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})},
                 {"disk": "ssd"}, False, id="nodeSelector and affinity are ANDed"),
    pytest.param({"affinity": _affinity()}, {"disk": "ssd"}, False, id="required affinity without terms: nothing"),
    pytest.param({"affinity": {"nodeAffinity": {}}}, {}, True, id="no required affinity"),
])
def test_pod_spec_matches_node(pod_spec: dict[str, Any], labels: dict[str, str], matches: bool) -> None:
    assert pod_spec_matches_node(pod_spec, "n1", labels) is matches
