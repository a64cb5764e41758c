"""The Slices page (audit kind ``slices``, issue 26): on the Audit tab after Group gaps, refuses a form without a
threshold in place, runs the job, lists the carried slices with their verdicts in words, and "Open in Group gaps"
audits a slice there as an intersection of its columns (a slice with a binned continuous part says why it cannot)."""
from __future__ import annotations

import json

from fairdesk.core.kinds import AUDIT_KINDS, resolve
from fairdesk.gui.tabs.base import AuditPage


def _set_up(page):
    page.attributes_list.set_checked(["sex", "ethnicity"])
    page.continuous_list.set_checked(["age"])
    page.min_size_spin.setValue(20)
    page.carry_spin.setValue(6)
    page.bins_spin.setValue(3)


def test_page_runs_lists_slices_in_words_and_opens_one_in_group_gaps(window, stored_predictions, run_and_wait):
    cls = resolve(AUDIT_KINDS["slices"].page)
    page = window.slices_page
    assert type(page) is cls and issubclass(cls, AuditPage) and cls.kind().name == "slices"
    tabs = window.pages["audit"]
    assert tabs.tabText(tabs.indexOf(page)) == "Slices"
    assert tabs.indexOf(page) == tabs.indexOf(window.audit_tab) + 1
    _set_up(page)
    assert page.run_audit() is None and "threshold" in page.status.text()  # no silent default
    page.fixed_radio.setChecked(True)
    page.threshold_spin.setValue(0.5)
    run_and_wait(window, page.run_audit)
    assert page.audit_id is not None and page.doc is not None, page.status.text()
    doc = window.project.audit_document(page.audit_id)
    assert doc["kind"] == "slices" and len(doc["slices"]) == page.slice_list.count() > 0
    texts = [page.slice_list.item(i).text() for i in range(page.slice_list.count())]
    assert all(t.startswith(("Task ", "Patients with")) and " vs " in t and "for the rest" in t for t in texts)
    assert any(w in t for t in texts for w in ("differs", "equivalent within", "inconclusive"))
    assert f"{doc['searched']:,} slices searched" in page.result_header.text()
    # a slice with a binned age cannot be opened; one of categorical columns only is audited in Group gaps
    rows = [page.slice_list.item(i).data(0x0100) for i in range(page.slice_list.count())]
    binned = [i for i, r in enumerate(rows) if "age" in r["definition"]]
    plain = [i for i, r in enumerate(rows) if "age" not in r["definition"]]
    if binned:
        page.slice_list.setCurrentRow(binned[0])
        assert not page.open_button.isEnabled() and "age" in page.open_button.toolTip()
    assert plain, texts
    page.slice_list.setCurrentRow(plain[0])
    assert page.open_button.isEnabled()
    chosen = rows[plain[0]]
    before = {a.id for a in window.project.audits()}
    run_and_wait(window, page.open_in_group_gaps)
    new = [a for a in window.project.audits() if a.id not in before]
    assert len(new) == 1 and new[0].kind == "groups"
    group_doc = window.project.audit_document(new[0].id)
    cols = list(chosen["definition"])
    assert group_doc["plan"]["gap_rule"] == "one-vs-rest" and group_doc["plan"]["tasks"] == [chosen["task"]]
    if len(cols) > 1:
        assert group_doc["plan"]["intersections"] == [cols]
    else:
        assert group_doc["plan"]["roles"]["attributes"] == cols
    assert window.current_page() is window.audit_tab
    assert json.dumps(doc)  # the stored document is plain JSON
