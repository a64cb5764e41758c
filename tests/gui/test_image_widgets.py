"""Image widgets: the counterfactual diff viewer, the prediction scatter and the lazy thumbnail grid."""
from __future__ import annotations

import numpy as np
import pytest

from fairdesk.core.synthetic.morpho import make_morpho, write_folder


@pytest.fixture(scope="module")
def morpho():
    return make_morpho(12, seed=3, size=24)


def _examples(ds, with_reference=False):
    from fairdesk.gui.widgets.image_diff import DiffExample

    cf = ds.counterfactual()
    changes = np.linspace(-0.5, 0.4, len(ds.a))[::-1] * np.where(np.arange(len(ds.a)) % 2, 1, -1)
    out = []
    for i in range(len(ds.a)):
        target = f"a'={1 - ds.a[i]}"
        ref = np.clip(ds.images[i] + 0.01, 0, 1) if with_reference else None
        preds = {"disease": {"original": 0.5, "cf": {target: 0.5 + changes[i]}}}
        if with_reference:
            preds["disease"]["reference"] = 0.5
        out.append(DiffExample(ds.images[i], {target: cf[i]}, reference=ref, predictions=preds, title=f"unit {i}",
                               observed=f"a={ds.a[i]}"))
    return out, changes


def test_diff_viewer_difference_levels_order_and_readout(qtbot, morpho, tmp_path):
    from fairdesk.gui.widgets.image_diff import DiffViewer

    viewer = DiffViewer()
    qtbot.addWidget(viewer)
    viewer.resize(1000, 420)
    viewer.show()
    examples, changes = _examples(morpho)
    viewer.set_examples(examples)
    # browse order: largest |prediction change| first, and the first shown is the largest
    expected = [f"unit {i}" for i in np.argsort(-np.abs(changes), kind="stable")]
    assert viewer.ordered_titles() == expected
    first = int(np.argmax(np.abs(changes)))
    assert viewer.current == first
    ex = examples[first]
    cf = next(iter(ex.counterfactuals.values()))
    np.testing.assert_allclose(viewer.image("difference"), cf - ex.original, atol=1e-6)
    np.testing.assert_allclose(viewer.diff_item.image, cf - ex.original, atol=1e-6)
    lo, hi = viewer.diff_levels()
    m = float(np.abs(cf - ex.original).max())
    assert lo == pytest.approx(-m, rel=1e-5) and hi == pytest.approx(m, rel=1e-5) and m > 0.3  # the rim changed
    # the central disc (lesion region) is untouched by the attribute: zero difference there
    assert abs(viewer.image("difference")[12, 12]) < 1e-6
    # read-out at a pixel names the three values
    r, c = np.unravel_index(np.argmax(np.abs(cf - ex.original)), cf.shape)
    text = viewer.readout_at(int(r), int(c))
    assert f"row {r}, col {c}" in text
    assert f"original {ex.original[r, c]:.4f}" in text and f"counterfactual {cf[r, c]:.4f}" in text
    assert f"difference {cf[r, c] - ex.original[r, c]:+.4f}" in text
    assert viewer.readout_at(-1, 0) == "" and viewer.readout_at(0, 999) == ""
    # hover through the scene: the read-out label follows the pointer
    vb = viewer.views[2]
    scene_pos = vb.mapViewToScene(__import__("PySide6.QtCore", fromlist=["QPointF"]).QPointF(c + 0.5, r + 0.5))
    viewer._mouse_moved(scene_pos, vb)
    assert viewer.readout.text() == text
    # a real mouse move in the difference panel's own scene reaches the read-out the same way
    viewer.readout.setText("")
    viewer.panel_widgets[2].scene().sigMouseMoved.emit(scene_pos)
    assert viewer.readout.text() == text
    # predictions of the shown example
    assert "disease" in viewer.predictions_label.text() and f"{changes[first]:+.3f}" in viewer.predictions_label.text()
    # next / previous follow the sort order
    viewer.step(1)
    assert viewer.current == viewer.order[1]
    viewer.step(-5)
    assert viewer.current == viewer.order[0]
    viewer.grab().save(str(tmp_path / "diff.png"))


def test_diff_viewer_linked_zoom_and_flicker(qtbot, morpho):
    from fairdesk.gui.widgets.image_diff import DiffViewer

    viewer = DiffViewer()
    qtbot.addWidget(viewer)
    viewer.resize(900, 400)
    viewer.show()
    examples, _ = _examples(morpho)
    viewer.set_examples(examples)
    qtbot.wait(30)   # the fit-to-panel after show/resize has run
    # the image fills the panels: the whole 24 px fits and not much more is shown
    r = viewer.views[0].viewRange()
    assert r[0][0] <= 0 and r[0][1] >= 24 and r[1][0] <= 0 and r[1][1] >= 24
    assert min(r[0][1] - r[0][0], r[1][1] - r[1][0]) < 24 * 1.2
    viewer._user_zoomed()   # what a mouse zoom does (sigRangeChangedManually): stop fitting on resize
    viewer.views[2].setRange(xRange=(4, 10), yRange=(5, 11), padding=0)
    qtbot.wait(20)
    # linked: every panel shows the same centre at the same scale (panels of unequal width show more or less
    # around it, since each keeps square pixels)
    r2 = viewer.views[2].viewRange()
    w2 = viewer.views[2].sceneBoundingRect().width()
    assert r2[0] == pytest.approx([4, 10], abs=1e-6) or r2[1] == pytest.approx([5, 11], abs=1e-6)
    for vb in viewer.views[:2]:
        r = vb.viewRange()
        assert r[1] == pytest.approx(r2[1], abs=1e-6)
        assert (r[0][0] + r[0][1]) / 2 == pytest.approx((r2[0][0] + r2[0][1]) / 2, abs=1e-6)
        scale = (r[0][1] - r[0][0]) / vb.sceneBoundingRect().width()
        assert scale == pytest.approx((r2[0][1] - r2[0][0]) / w2, rel=1e-2)
        assert r[0][1] - r[0][0] < 12  # zoomed in (the image is 24 px wide)
    # panning one panel pans the others
    viewer.views[0].translateBy(x=3.0)
    qtbot.wait(20)
    for vb in viewer.views[1:]:
        assert (vb.viewRange()[0][0] + vb.viewRange()[0][1]) / 2 == pytest.approx((r2[0][0] + r2[0][1]) / 2 + 3,
                                                                                   abs=1e-6)
    viewer.reset_zoom()
    assert viewer.views[1].viewRange()[0][1] - viewer.views[1].viewRange()[0][0] >= 24

    # flicker: the first panel alternates between the original and the counterfactual
    ex = examples[viewer.current]
    cf = next(iter(ex.counterfactuals.values()))
    viewer.flicker_ms.setValue(100)
    viewer.start_flicker()
    assert viewer.flickering
    seen = set()
    for _ in range(6):
        qtbot.wait(60)
        shown = viewer.shown_first_panel()
        seen.add("cf" if np.allclose(shown, cf) else "orig" if np.allclose(shown, ex.original) else "?")
    assert seen == {"cf", "orig"}
    viewer.stop_flicker()
    assert not viewer.flickering and np.allclose(viewer.shown_first_panel(), ex.original)


def test_diff_viewer_against_null_reconstruction(qtbot, morpho):
    from fairdesk.gui.widgets.image_diff import REFERENCE, DiffViewer

    viewer = DiffViewer()
    qtbot.addWidget(viewer)
    examples, _ = _examples(morpho, with_reference=True)
    viewer.set_examples(examples)
    assert viewer.reference_combo.currentData() == REFERENCE
    ex = examples[viewer.current]
    cf = next(iter(ex.counterfactuals.values()))
    np.testing.assert_allclose(viewer.image("difference"), cf - ex.reference, atol=1e-6)
    viewer.reference_combo.setCurrentIndex(viewer.reference_combo.findData("original"))
    np.testing.assert_allclose(viewer.image("difference"), cf - ex.original, atol=1e-6)
    viewer.set_examples([])
    assert viewer.image("difference") is None and not viewer.next_button.isEnabled()


def test_scatter_columns_points_band_and_tooltip(qtbot, tmp_path):
    from fairdesk.gui.widgets.scatter import CounterfactualScatter

    rng = np.random.default_rng(0)
    x0, x1 = rng.uniform(0, 1, 30), rng.uniform(0, 1, 20)
    data = {"disease": {"0->1": {"x": x0.tolist(), "y": (x0 * 0.5).tolist(), "index": list(range(30))},
                        "1->0": {"x": x1.tolist(), "y": x1.tolist(), "index": list(range(30, 50))},
                        "flip": {"0->1": {"x": x0.tolist(), "y": x0.tolist(), "index": list(range(30))},
                                 "1->0": {"x": x1.tolist(), "y": x1.tolist(), "index": list(range(30, 50))}}},
            "other": {"0->1": {"x": [0.2], "y": [0.3], "index": [7]}}}
    w = CounterfactualScatter()
    qtbot.addWidget(w)
    w.resize(900, 360)
    w.show()
    w.set_data(data, band=0.05, attribute="sex")
    assert w.columns() == ["0->1", "1->0", "flip"]
    assert [w.point_count(c) for c in w.columns()] == [30, 20, 50]
    assert "sex = 0 → 1" in w.plots["0->1"].titleLabel.text
    tip = w.tooltip_at("0->1", float(x0[3]), float(x0[3] * 0.5))
    assert "unit 3" in tip and f"Δ {x0[3] * 0.5 - x0[3]:+.3f}" in tip
    assert "±0.05" in w.note.text()
    # hover in the 0->1 column's scene: its read-out names the unit under the pointer
    plot = w.plots["0->1"]
    pos = plot.getViewBox().mapViewToScene(__import__("PySide6.QtCore", fromlist=["QPointF"]).QPointF(
        float(x0[3]), float(x0[3] * 0.5)))
    w._widgets[0].scene().sigMouseMoved.emit(pos)
    assert w.readout.text().startswith("unit ") and w.readout.text() in tip.split("\n")
    w.grab().save(str(tmp_path / "scatter.png"))
    w.output_combo.setCurrentIndex(w.output_combo.findData("other"))
    assert w.columns() == ["0->1"] and w.point_count("0->1") == 1
    w.set_data({})
    assert w.columns() == [] and not w.graphics.isVisible()


def test_thumbnails_load_off_thread_and_list_unreadable(qtbot, tmp_path):
    from fairdesk.gui.widgets.thumbnails import ThumbnailGrid

    ds = make_morpho(10, seed=1, size=20)
    write_folder(ds, tmp_path)
    files = sorted((tmp_path / "images").glob("*.png"))
    (tmp_path / "images" / "img_00003.png").write_bytes(b"not a png")
    grid = ThumbnailGrid(thumb_size=32, max_items=8)
    qtbot.addWidget(grid)
    grid.show()
    with qtbot.waitSignal(grid.loaded, timeout=10000):
        grid.set_files(files, unreadable=[{"path": "missing.png", "reason": "file not found"}])
        assert grid.count() == 8  # capped; items appear at once, pixels arrive later
    assert grid.thumbnails_ready() == 7  # 8 shown, one corrupt
    assert [f["path"] for f in grid.failed] == [str(files[3])]
    items = grid.unreadable_items()
    assert items[0] == "missing.png — file not found" and str(files[3]) in items[1]
    assert "first 8 of 10" in grid.status.text()
    icon = grid.grid.item(0).icon().pixmap(32, 32).toImage()
    assert icon.width() > 0
    from fairdesk.core.data.images import read_image
    from fairdesk.gui.widgets.thumbnails import thumbnail_array

    big = thumbnail_array(files[0], 96)   # 20 px → enlarged ×4 with sharp pixels
    assert big.shape == (80, 80) and big.dtype == np.uint8
    np.testing.assert_array_equal(big[::4, ::4], np.round(read_image(files[0]) * 255).astype(np.uint8))
    # a new load cancels the old one
    grid.set_files(files[:2])
    qtbot.waitUntil(lambda: not grid.loading, timeout=10000)
    assert grid.count() == 2 and grid.thumbnails_ready() == 2 and grid.unreadable_items() == []
