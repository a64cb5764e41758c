"""``fairdesk-cli demo``: the bundled demo audit, headless (``--gui`` then opens it in the desktop app, started as
its own program: the CLI never imports the GUI)."""
from __future__ import annotations

import argparse

from fairdesk.console import say
from fairdesk.cli.progress import TerminalProgress
from fairdesk.core.guard import guard_outputs


def cmd_demo(args: argparse.Namespace) -> int:
    from fairdesk.jobs.demo import run_demo

    guard_outputs(folders=[("--out", args.out)])
    progress = TerminalProgress(args.quiet)
    out = run_demo(args.out, n_boot=args.n_boot, seed=args.seed, progress=progress)
    progress.done()
    say(f"demo report: {out['pdf']}\nimaging report: {out['cit_pdf']}\naudit JSON: {out['json']}\n"
        f"project: {out['project']}\npredictions table: {out.get('predictions')}")
    if args.gui:  # the desktop app as its own program: the CLI never imports the GUI
        from fairdesk.paths import run_program

        return run_program("fairdesk", [str(out["project"])])
    return 0


def add_demo_command(sub) -> None:
    """The top-level ``demo`` command."""
    demo = sub.add_parser("demo", help="run the bundled demo audit headless")
    demo.add_argument("--out", required=True, help="folder for the demo project, PDF and JSON")
    demo.add_argument("--n-boot", type=int, default=1000)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--gui", action="store_true", help="then open the demo project in the main window")
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(func=cmd_demo)
