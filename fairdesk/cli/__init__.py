"""``fairdesk-cli``: every GUI action without a display.

Exit codes: 0 success, 2 bad input (a one-line message on stderr says what and how to fix it), 130 cancelled with
Ctrl-C, 143 stopped by SIGTERM and 129 by SIGHUP (128 + the signal's number; each stops the run cleanly like Ctrl-C,
and the run's scratch folder is deleted, see :mod:`fairdesk.core.scratch`).

The commands live one family a module (:mod:`.groups`, :mod:`.images`, :mod:`.text`, :mod:`.notes`, :mod:`.bench`,
:mod:`.demo`); the progress bar in :mod:`.progress`, the shared argument helpers in :mod:`.args`. The CLI calls
``fairdesk.jobs`` and ``fairdesk.core``, never the GUI (``tests/test_layers.py`` checks).
"""
from __future__ import annotations

import os
import sys

# Signals first, before anything heavy is imported: the program (``fairdesk-cli``, ``python -m fairdesk.cli`` or
# ``python -m fairdesk``, whose package import runs with argv[0] == "-m") ends with 128 + signal from its first
# instruction. Imported as a library (tests, the Python API), the host program's handlers are left alone.
AS_PROGRAM = sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "").lower().startswith(
    "fairdesk-cli")
if AS_PROGRAM:
    from fairdesk.core import scratch as _scratch

    _scratch.install_early()

import fairdesk._bootstrap  # noqa: E402,F401  (offline environment next)

import argparse  # noqa: E402

from fairdesk.cli.progress import TerminalProgress  # noqa: E402
from fairdesk.console import prepare, say  # noqa: E402
from fairdesk.core.errors import FairDeskError  # noqa: E402
from fairdesk.core.progress import Cancelled  # noqa: E402

__all__ = ["TerminalProgress", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from fairdesk.cli.age import add_age_commands
    from fairdesk.cli.bench import add_bench_commands
    from fairdesk.cli.ctf import add_ctf_commands
    from fairdesk.cli.demo import add_demo_command
    from fairdesk.cli.groups import add_audit_groups, add_train_tabular, add_validate_and_report
    from fairdesk.cli.images import add_image_commands
    from fairdesk.cli.monitor import add_monitor_command
    from fairdesk.cli.notes import add_note_commands
    from fairdesk.cli.slices import add_audit_slices
    from fairdesk.cli.text import add_text_commands

    from fairdesk import version

    parser = argparse.ArgumentParser(prog="fairdesk-cli", description="FairDesk: offline fairness audits.")
    parser.add_argument("--version", action="version", version=f"fairdesk-cli {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    # the order of the calls is the order --help lists the commands in
    audit = sub.add_parser("audit", help="run an audit").add_subparsers(dest="audit", required=True)
    add_audit_groups(audit)  # audit groups (groups.py)
    add_audit_slices(audit)  # audit slices (slices.py)
    add_validate_and_report(sub)  # validate, report (groups.py)
    train = sub.add_parser("train", help="train models").add_subparsers(dest="train", required=True)
    add_train_tabular(train)  # train tabular (groups.py)
    add_image_commands(audit, train)  # audit cit, audit cit-predictions, train generator (images.py)
    add_text_commands(audit, train)  # audit mlm-bias, train mlm (text.py)
    add_note_commands(audit, train)  # audit encoders, train notes (notes.py)
    data = sub.add_parser("data", help="generate data sets").add_subparsers(dest="data", required=True)
    add_ctf_commands(sub, data, audit, train)  # data madlibs/ctf-demo, counterfactuals, train text-classifier,
    # audit ctf* (ctf.py)
    add_bench_commands(sub)  # bench cit-synthetic, bench validity (bench.py)
    add_demo_command(sub)  # demo (demo.py)
    add_age_commands(data, train)  # data age-demo, train age-independent (age.py)
    add_monitor_command(sub)  # monitor (monitor.py)
    return parser


def main(argv: list[str] | None = None) -> int:
    from fairdesk.core import scratch

    import warnings

    prepare()  # any console encoding: what cannot be shown becomes "?"
    scratch.exit_on_termination()  # Ctrl-C, SIGTERM and SIGHUP stop the run cleanly: finally blocks run
    shown = warnings.showwarning
    warnings.showwarning = _note_or(shown)
    try:
        code = _run(argv)
    except KeyboardInterrupt as err:  # a signal between the end of the run and the line below
        code = scratch.exit_code(err)
    finally:
        warnings.showwarning = shown
        scratch.end_of_run(restore=not AS_PROGRAM)  # a signal from here on is remembered, never raised
        scratch.cleanup()
    first = scratch.signal_during_run()
    if AS_PROGRAM:
        # the exit code is decided: the interpreter's shutdown (which resets Python's handlers while threads and
        # pools wind down) must not be ended by a late signal with -15 and no word
        scratch.ignore_signals()
    return code if first is None else 128 + first  # a signal at any moment ends the run as 128 + signal


def _note_or(show):
    """``warnings.showwarning`` that prints a note of FairDesk's own (keys of a newer version's file that were
    ignored: ``fairdesk.core.jsonable.NewerKeysNote``) as one line, and any other warning as ``show`` does."""
    def showwarning(message, category, filename, lineno, file=None, line=None):
        if category.__name__ == "NewerKeysNote":  # (by name: importing the class would import numpy at start)
            say(f"fairdesk-cli: note: {message}", file=sys.stderr)
            return
        show(message, category, filename, lineno, file, line)
    return showwarning


def _run(argv: list[str] | None) -> int:
    from fairdesk.core import scratch

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        scratch.remove_leftovers()  # scratch folders of FairDesk runs that were killed (SIGKILL, power loss)
        from fairdesk.cli.limits import check_limits

        check_limits(parser, args)  # every number within its stated limits, before any work
        return args.func(args)
    except FairDeskError as err:
        message = " ".join(str(err).split())
        say(f"fairdesk-cli: error: {message}", file=sys.stderr)
        return 2
    except (Cancelled, KeyboardInterrupt) as err:
        scratch.end_of_run(restore=False)  # a second signal from here on is remembered, not raised
        say("\nfairdesk-cli: cancelled; files written earlier are intact.", file=sys.stderr)
        return scratch.exit_code(err)
    except OSError as err:  # a failed write (disk full, size limit, read-only folder): one sentence, exit 2
        from fairdesk.core.export import os_error_sentence

        say(f"fairdesk-cli: error: {' '.join(os_error_sentence(err).split())}", file=sys.stderr)
        return 2
    except ValueError as err:  # e.g. a threshold that is not a number
        message = " ".join(str(err).split())
        say(f"fairdesk-cli: error: {message}", file=sys.stderr)
        return 2
