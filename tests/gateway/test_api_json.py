"""JSON shapes of the HTTP API that need no server."""

from __future__ import annotations

import sys

from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import Step, StepStatus, StepTreeNode, StepType
from xclaw.wire.protocol import tree_json


def test_a_tree_deeper_than_the_recursion_limit() -> None:
    depth = sys.getrecursionlimit() + 500
    node: StepTreeNode | None = None
    for seq in range(depth, 0, -1):
        step = Step(
            step_id=f"S:s{seq:04d}",
            session_id="S",
            seq=seq,
            parent_step_id=f"S:s{seq - 1:04d}" if seq > 1 else None,
            step_type=StepType.LLM_CALL,
            name="m",
            status=StepStatus.COMPLETED,
        )
        node = StepTreeNode(step, (node,) if node else ())
    assert node is not None
    out = tree_json(node, PriceTable.with_overrides(None))
    seen = 0
    while out["children"]:
        assert out["children"][0]["parent"] == out["id"]
        out = out["children"][0]
        seen += 1
    assert seen == depth - 1 and out["id"] == f"s{depth:04d}"
