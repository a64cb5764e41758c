"""Documents from other versions: a stored group audit whose plan holds keys a newer FairDesk would write is reported
and carded with a note (never a TypeError); any stored document nested deeper than FairDesk reads gives one sentence
(never a RecursionError).

The property draws document shapes: unknown keys in the plan, in its roles and at the top level, and a value nested
deep somewhere — and checks that the report and the model card either are written or refuse with one sentence.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from fairdesk.core.errors import FairDeskError
from fairdesk.core.jsonable import loads_checked, read_json_file


@pytest.fixture(scope="module")
def stored_audit(tmp_path_factory):
    from fairdesk.cli import main

    tmp = tmp_path_factory.mktemp("docs")
    rng = np.random.default_rng(0)
    n = 300
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        tmp / "t.csv", index=False)
    code = main(["audit", "groups", str(tmp / "t.csv"), "--label", "y", "--score", "p", "--attribute", "sex",
                 "--threshold", "0.5", "--n-boot", "100", "--quiet", "--project", str(tmp / "p.fairdesk"), "--json",
                 str(tmp / "a.json")])
    assert code == 0
    return tmp / "p.fairdesk"


def _rewrite(project: Path, change, deep: int) -> None:
    with sqlite3.connect(project) as con:
        doc = json.loads(con.execute("SELECT result FROM audits WHERE id=1").fetchone()[0])
        change(doc)
        text = json.dumps(doc).replace('"__DEEP__"', "[" * deep + "1" + "]" * deep)  # deeper than json.dumps goes
        con.execute("UPDATE audits SET result=? WHERE id=1", (text,))


KEYS = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=3, max_size=8).map(lambda k: "x_" + k)


@settings(max_examples=10, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(plan_keys=st.dictionaries(KEYS, st.integers() | st.text(max_size=5) | st.none(), max_size=3),
       role_keys=st.dictionaries(KEYS, st.text(max_size=5), max_size=2),
       top_keys=st.dictionaries(KEYS, st.integers(), max_size=2),
       deep=st.sampled_from([0, 0, 150, 5000]), where=st.sampled_from(["plan", "top", "roles"]))
def test_report_and_card_of_a_document_from_another_version(stored_audit, plan_keys, role_keys, top_keys, deep,
                                                            where):
    from fairdesk.jobs.reports import export_model_card, export_report

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "p.fairdesk"
        shutil.copyfile(stored_audit, project)

        def change(doc):
            doc["plan"].update(plan_keys)
            doc["plan"]["roles"].update(role_keys)
            doc.update(top_keys)
            if deep:
                {"plan": doc["plan"], "top": doc, "roles": doc["plan"]["roles"]}[where]["x_deep"] = "__DEEP__"

        _rewrite(project, change, deep)
        for run in (lambda: export_report(project, 1, Path(tmp) / "r.pdf"),
                    lambda: export_model_card(project, 1, Path(tmp) / "c.json", intended_use=None,
                                              out_markdown=Path(tmp) / "c.md")):
            try:
                run()
            except FairDeskError as err:
                assert deep and len(str(err).splitlines()) == 1 and "nested" in str(err), err
                continue
            assert not deep or deep < 100  # a deep document is never read
        if not deep and (plan_keys or role_keys):
            assert "newer FairDesk" in (Path(tmp) / "c.md").read_text(encoding="utf-8")


def test_json_reads_have_depth_and_size_limits(tmp_path):
    with pytest.raises(ValueError, match="nested more than"):
        loads_checked("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested more than"):
        loads_checked("[" * 500 + "]" * 500)
    (tmp_path / "big.json").write_bytes(b" " * 2048 + b"{}")
    with pytest.raises(ValueError, match="larger than"):
        read_json_file(tmp_path / "big.json", limit=1024)
    assert read_json_file(tmp_path / "big.json") == {}
