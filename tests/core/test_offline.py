"""FairDesk never opens a network socket: the guard of tests/conftest.py catches real attempts, and an audit makes none."""
from __future__ import annotations

import socket
import urllib.request

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
from fairdesk.core.data.schema import ColumnRoles


def test_guard_catches_real_attempts(network_attempts):
    before = len(network_attempts)
    with pytest.raises(RuntimeError, match="network access attempted"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(RuntimeError, match="network access attempted"):
            sock.connect(("127.0.0.1", 9))
        with pytest.raises(RuntimeError, match="network access attempted"):
            sock.connect_ex(("127.0.0.1", 9))
    finally:
        sock.close()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with pytest.raises(RuntimeError, match="network access attempted"):
            udp.sendto(b"x", ("127.0.0.1", 9))
    finally:
        udp.close()
    with pytest.raises(RuntimeError, match="network access attempted"):
        socket.getaddrinfo("example.org", 443)
    # A library call going through the standard stack is caught too (urllib would otherwise wrap an OSError).
    with pytest.raises(RuntimeError, match="network access attempted"):
        urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
    assert len(network_attempts) - before == 6
    assert "127.0.0.1" in network_attempts[before]


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no AF_UNIX on this platform")
def test_guard_allows_local_unix_sockets():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        a.sendall(b"ok")
        assert b.recv(2) == b"ok"


def test_full_group_audit_opens_no_socket(network_attempts):
    rng = np.random.default_rng(3)
    n = 600
    table = pd.DataFrame({
        "task": np.repeat(["mort", "los"], n // 2), "y": rng.integers(0, 2, n), "s": rng.random(n),
        "sex": rng.choice(["F", "M"], n), "race": rng.choice(["A", "B", "C"], n), "age": rng.uniform(18, 90, n),
        "pid": rng.integers(0, 200, n), "split": rng.choice(["val", "test"], n, p=[0.3, 0.7]),
    })
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("sex", "race"), continuous_attributes=("age",),
                        patient_id="pid", split="split")
    before = len(network_attempts)
    result = run_group_audit(table, GroupAuditPlan(roles=roles, threshold="best_f1", n_boot=200, n_permutations=200,
                                                   intersections=(("sex", "race"),), min_group_size=10))
    result.to_json()
    assert len(result.records) > 0
    assert network_attempts[before:] == []
