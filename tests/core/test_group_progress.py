"""The group audit's progress moves per task × attribute and per bootstrap block (issue 14), never backwards."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
from fairdesk.core.data.schema import ColumnRoles


def test_progress_moves_per_attribute_task_and_block():
    rng = np.random.default_rng(0)
    n = 240
    parts = []
    for task in ("a", "b"):
        y = rng.integers(0, 2, n)
        score = np.clip(0.3 + 0.4 * y + rng.normal(0, .2, n), 0, 1)
        parts.append(pd.DataFrame({"task": task, "label": y, "score": score,
                                   "sex": rng.choice(["F", "M"], n), "site": rng.choice(["x", "y", "z"], n),
                                   "age": rng.uniform(20, 90, n)}))
    roles = ColumnRoles(label="label", score="score", task="task", attributes=("sex", "site"),
                        continuous_attributes=("age",))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=100, bins=(2, 5))
    seen: list[tuple[float, str]] = []
    run_group_audit(pd.concat(parts, ignore_index=True), plan, progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0
    # 2 tasks × (2 categorical attributes + 1 continuous with 2 bin counts) = 8 blocks: 8 distinct steps below 95%
    steps = sorted({round(f, 6) for f in fractions if f < 0.95})
    assert len(steps) == 8, steps
    assert max(b - a for a, b in zip(steps, steps[1:] + [0.95])) <= 0.95 / 8 + 1e-9
    messages = [m for _, m in seen]
    assert any("Task 1 of 2 (a): sex: bootstrap of 100 replicates" in m for m in messages)
    assert any("Task 2 of 2 (b): age: error spread over 5 bins" in m for m in messages)
    assert messages[-1] == "Correcting for multiple testing"
