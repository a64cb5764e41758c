"""How heavy work runs on this machine: torch's CPU threads (``--threads`` in the CLI, the thread box in the GUI)."""
from __future__ import annotations


def set_torch_threads(n: int | None) -> None:
    """Use ``n`` CPU threads in torch (nothing when ``n`` is 0 or None; torch is imported only when asked)."""
    if n:
        import torch

        torch.set_num_threads(int(n))
