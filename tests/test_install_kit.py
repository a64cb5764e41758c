"""The air-gapped install kit (issue 23): one version string, ``python -m fairdesk``, locks that agree with
``pyproject.toml``, and the wheelhouse's checksums. The full offline install (build the wheelhouse, then install it in
a network namespace with no network) is ``packaging/check_offline_install.sh``; it runs here only with
FAIRDESK_SLOW=1 because it downloads and installs ~1 GB."""
from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))
from wheelhouse import lock_pins, sha256_sums  # noqa: E402

try:  # pyproject.toml's parser (Python 3.11+)
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402
from packaging.version import Version  # noqa: E402


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _pins(name: str) -> dict[str, Version]:
    return {canonicalize_name(k): Version(v) for k, v in lock_pins(ROOT / "requirements" / f"{name}.txt").items()}


def test_one_version_string_everywhere(capsys):
    import fairdesk
    from fairdesk.cli import main as cli_main
    from fairdesk.core.provenance import package_versions
    from fairdesk.gui.app import main as gui_main

    assert fairdesk.version() == metadata.version("fairdesk") == fairdesk.__version__
    for main, prog in ((cli_main, "fairdesk-cli"), (gui_main, "fairdesk")):
        with pytest.raises(SystemExit) as exit_:
            main(["--version"])
        assert exit_.value.code == 0
        assert capsys.readouterr().out.strip() == f"{prog} {fairdesk.__version__}"
    assert package_versions()["fairdesk"] == fairdesk.__version__  # so every report's provenance shows it


def test_python_m_fairdesk_is_the_cli():
    run = subprocess.run([sys.executable, "-m", "fairdesk", "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: fairdesk-cli") and "audit" in run.stdout


@pytest.mark.parametrize("lock, extras", [("cpu", ()), ("test", ("test",)), ("gpu", ()),
                                          ("cpu-distributed", ("distributed",))])
def test_lock_pins_every_dependency_of_pyproject_within_its_range(lock, extras):
    project = _pyproject()["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
    pins = _pins(lock)
    unpinned = [str(r) for r in wanted if canonicalize_name(r.name) not in pins]
    assert not unpinned, f"requirements/{lock}.txt lacks {unpinned}: run `make lock`"
    outside = [f"{r} (locked {pins[canonicalize_name(r.name)]})" for r in wanted
               if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)]
    assert not outside, f"requirements/{lock}.txt is older than pyproject.toml: {outside}; run `make lock`"


def test_cpu_locks_hold_the_cpu_torch_and_no_cuda():
    for lock in ("cpu", "test", "cpu-distributed"):
        pins = _pins(lock)
        assert pins["torch"] == Version("2.13.0+cpu")
        cuda = sorted(n for n in pins if n.startswith("nvidia-") or n == "triton")
        assert not cuda, f"requirements/{lock}.txt would install CUDA packages: {cuda}"
    gpu = _pins("gpu")
    assert gpu["torch"] == Version("2.13.0") and any(n.startswith("nvidia-") for n in gpu)


def test_locks_agree_with_each_other():
    """The test environment is the runtime lock plus test tools; the GPU kit differs only in torch's CUDA family."""
    cpu, test, gpu = _pins("cpu"), _pins("test"), _pins("gpu")
    assert {n: v for n, v in test.items() if n in cpu} == cpu
    dist = _pins("cpu-distributed")  # the kit with Dask.distributed: the runtime lock plus it, as the tests run it
    assert {n: v for n, v in dist.items() if n in cpu} == cpu and {"dask", "distributed"} <= set(dist)
    assert {n: v for n, v in dist.items() if n in test} == {n: v for n, v in test.items() if n in dist}
    cuda_family = {n for n in gpu if n.startswith(("nvidia-", "cuda-")) or n in {"triton", "torch"}}
    differ = sorted(n for n in cpu if n not in cuda_family and gpu.get(n) != cpu[n])
    assert not differ, f"requirements/gpu.txt pins differ from cpu.txt for {differ}: run `make lock`"


def test_this_environment_is_the_locked_one():
    """`make test` installs with requirements/test.txt as constraints, so what runs the suite is what was locked."""
    drift = []
    for name, version in _pins("test").items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue  # a platform-conditional dependency not needed here
        if installed != version and name != "fairdesk":
            drift.append(f"{name} {installed} (lock {version})")
    assert not drift, f"installed versions differ from requirements/test.txt: {drift}"


def test_sha256sums_verify_with_sha256sum(tmp_path):
    for name, data in (("a.whl", b"wheel"), ("constraints.txt", b"x==1\n"), ("sbom.cdx.json", b"{}")):
        (tmp_path / name).write_bytes(data)
    (tmp_path / "SHA256SUMS").write_text(sha256_sums(tmp_path))
    ok = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.count(": OK") == 3
    (tmp_path / "a.whl").write_bytes(b"tampered")
    bad = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0 and "a.whl: FAILED" in bad.stdout


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FAIRDESK_SLOW") != "1", reason="downloads and installs ~1 GB: FAIRDESK_SLOW=1")
def test_wheelhouse_installs_with_no_network(tmp_path):
    run = subprocess.run(["bash", str(ROOT / "packaging" / "check_offline_install.sh"), str(tmp_path)],
                         capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "offline install: OK" in run.stdout
