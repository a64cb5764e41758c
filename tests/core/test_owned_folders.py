"""Folders FairDesk owns by manifest, not by marker: a FairDesk folder records the files FairDesk wrote there
(names and SHA-256); writing into or replacing it is refused, in one sentence and with nothing touched, whenever it
holds anything else or a recorded file was changed — and a path ending in a separator always names a folder.

* the reported loss: a user's ``notes.txt`` inside a generator folder (marker included) removed by the next save;
* the property over folder contents: whatever FairDesk wrote, whatever the user then added, changed or copied (an
  old marker-only folder), a replacement either removes exactly FairDesk's files or refuses with no byte changed;
* the property over paths with separators: ``--pdf x/`` never writes or replaces a file named ``x``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairdesk.core.errors import DataError
from fairdesk.core.guard import MARKER, guard_outputs, owned_folder, record


def _snapshot(root: Path) -> dict[str, bytes | None]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[str((Path(dirpath) / d).relative_to(root))] = None
        for f in filenames:
            out[str((Path(dirpath) / f).relative_to(root))] = (Path(dirpath) / f).read_bytes()
    return out


def test_a_users_notes_in_a_generator_folder_survive_the_next_save(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from fairdesk.core.generation import images as gi
    from fairdesk.core.synthetic import morpho

    data = morpho.make_morpho(8, seed=0)
    res = gi.train_generator(data.images, data.a, gi.GeneratorConfig(image_size=32, vae_channels=(8, 8),
                                                                     unet_channels=(8, 8), norm_groups=4),
                             gi.TrainSchedule(vae_steps=1, unet_steps=1, batch_size=4, checkpoint_every=0))
    folder = res.generator.save(tmp_path / "gen")
    res.generator.save(folder)  # its own folder: replaced
    (folder / "notes.txt").write_text("protocol notes")
    before = _snapshot(tmp_path)
    with pytest.raises(DataError, match="FairDesk did not write .*'notes.txt'"):
        res.generator.save(folder)
    assert _snapshot(tmp_path) == before
    with pytest.raises(DataError, match="'notes.txt'"):
        guard_outputs(folders=[("--out", folder)])


NAMES = st.sampled_from(["a.bin", "config.json", "sub/w.safetensors", "sub/deep/x.json", "checkpoints/e-1/s.json"])
USER = st.sampled_from(["notes.txt", "sub/protocol.docx", "checkpoints/mine.csv", ".hidden"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=st.dictionaries(NAMES, st.binary(max_size=8), min_size=1, max_size=4),
       action=st.sampled_from(["nothing", "add", "change", "old-marker", "copy-with-marker"]),
       user=USER, new=st.dictionaries(NAMES, st.binary(max_size=8), max_size=3), replace=st.booleans())
def test_only_what_fairdesk_wrote_is_ever_replaced(written, action, user, new, replace):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "out"
        with owned_folder(folder, "test output"):
            for name, data in written.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(data)
        changed = sorted(written)[0]
        if action == "add":
            (folder / user).parent.mkdir(parents=True, exist_ok=True)
            (folder / user).write_bytes(b"the user's")
        elif action == "change":
            (folder / changed).write_bytes(written[changed] + b"!")
        elif action == "old-marker":  # what an older FairDesk wrote: a marker and no list of files
            (folder / MARKER).write_text('{"written_by": "FairDesk", "what": "x"}')
        elif action == "copy-with-marker":  # a user's folder with FairDesk's manifest copied into it
            other = root / "mine"
            other.mkdir()
            (other / user.replace("/", "-")).write_bytes(b"the user's")
            os.replace(folder / MARKER, other / MARKER)
            folder = other
        before = _snapshot(root)
        owned = action == "nothing"
        try:
            guard_outputs(folders=[("--out", folder)])
            with owned_folder(folder, "test output", replace=replace) as target:
                for name, data in new.items():
                    (target / name).parent.mkdir(parents=True, exist_ok=True)
                    (target / name).write_bytes(data)
        except DataError as err:
            assert not owned, err
            assert len(str(err).splitlines()) == 1
            assert _snapshot(root) == before  # nothing touched
            return
        assert owned, f"{action}: the folder was written into"
        after = _snapshot(folder)
        files = {k: v for k, v in after.items() if v is not None and k != MARKER}
        if replace:
            assert files == new
        else:
            assert files == {**written, **new}
        record(folder)
        guard_outputs(folders=[("--out", folder)])  # still FairDesk's, every file recorded


SEPARATORS = st.sampled_from(["/", "//"] + ([os.sep] if os.sep != "/" else []))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["old.pdf", "out", "report", "a b.json"]), sep=SEPARATORS,
       exists=st.sampled_from(["file", "missing", "folder"]))
def test_a_path_ending_in_a_separator_is_a_folder(name, sep, exists):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if exists == "file":
            (root / name).write_bytes(b"the user's file")
        elif exists == "folder":
            (root / name).mkdir()
        before = _snapshot(root)
        with pytest.raises(DataError) as err:
            guard_outputs([("--pdf", str(root / name) + sep)])
        assert "folder" in str(err.value) and len(str(err.value).splitlines()) == 1
        assert _snapshot(root) == before
        guard_outputs(folders=[("--out", str(root / "new") + sep)])  # as a folder output it is fine


def test_a_failed_run_leaves_no_new_folder_and_keeps_checkpoints(tmp_path):
    with pytest.raises(RuntimeError):
        with owned_folder(tmp_path / "x" / "out"):
            raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError):
        with owned_folder(tmp_path / "x" / "gen", replace=True) as new:  # a save that fails half-way
            (new / "half.safetensors").write_bytes(b"half")
            raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError):
        with owned_folder(tmp_path / "out") as out:
            (out / "checkpoints").mkdir()
            (out / "checkpoints" / "epoch-1").write_text("w")
            raise RuntimeError("stopped")
    assert (tmp_path / "out" / "checkpoints" / "epoch-1").is_file()
    guard_outputs(folders=[("--out", tmp_path / "out")])  # recorded: the run can be resumed
