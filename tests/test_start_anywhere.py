"""Start anywhere, stop at any moment: ``fairdesk-cli`` writes nothing at import, runs every command with a home
folder it cannot write (caches fall back to a temporary folder, said once), and a signal at any moment after its
first instruction ends it with 128 + signal and no traceback.

Tests run as root, for whom a chmod'ed folder is still writable: the locked-down home here is one whose ``.cache`` and
``.local`` are files, so nothing can be made under them.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRDESK_HOME", "FAIRDESK_CACHE", "HF_HOME",
                                                            "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT)}


def _table(path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 400
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        path, index=False)
    return path


def _cli(*args, env, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "fairdesk.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_nothing_is_written_at_start(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _cli("--version", env=_env(home), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list(home.iterdir()) == []  # no cache or settings folder made by starting


def test_every_command_runs_with_a_home_that_cannot_be_written(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("a file where the cache folder would go")
    (home / ".local").write_text("and one where the data folder would go")
    env = _env(home)
    proc = _cli("--version", env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "fairdesk-cli" in proc.stdout, proc.stderr
    table = _table(tmp_path / "t.csv")
    proc = _cli("audit", "groups", table, "--label", "y", "--score", "p", "--attribute", "sex", "--threshold", "0.5",
                "--n-boot", "100", "--quiet", "--json", tmp_path / "o.json", "--pdf", tmp_path / "o.pdf", env=env,
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and (tmp_path / "o.pdf").is_file()
    assert proc.stderr.count("cannot be written") <= 2  # said once (caches; settings if asked for)


def _handlers_installed(pid: int) -> bool:
    """Whether the process catches SIGTERM yet (Linux: the SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt")), 16)
    return bool(mask & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the signal mask from /proc")
@settings(max_examples=8, deadline=None)
@given(delay=st.floats(0.0, 1.5), signals=st.lists(st.sampled_from(["SIGTERM", "SIGINT", "SIGHUP"]), min_size=1,
                                                     max_size=4),
       gap=st.floats(0.0, 0.05))
def test_a_signal_at_any_moment_ends_with_128_plus_signal(tmp_path_factory, delay, signals, gap):
    tmp = tmp_path_factory.mktemp("sig")
    table = _table(tmp / "t.csv")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "fairdesk.cli", "audit", "groups", str(table), "--label", "y",
                             "--score", "p", "--attribute", "sex", "--threshold", "0.5", "--n-boot", "5000",
                             "--quiet", "--json", str(tmp / "o.json")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    start = time.monotonic()
    while not _handlers_installed(proc.pid) and time.monotonic() - start < 30:
        time.sleep(0.002)  # from the CLI's first instruction on (the interpreter's own start-up comes before)
    time.sleep(delay)
    for name in signals:
        proc.send_signal(getattr(signal, name))
        time.sleep(gap)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    if proc.returncode == 0:  # the run had finished before the first signal
        return
    # 128 + the first signal handled: signals that arrive together (before Python runs its handlers) are handled in
    # the order of their numbers, so any of those sent may be the one
    assert proc.returncode in {128 + getattr(signal, name) for name in signals}, (proc.returncode, err)
