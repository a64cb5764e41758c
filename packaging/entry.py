# The one program of the frozen bundle: `fairdesk-cli` (a symbolic link to `fairdesk`) or `fairdesk cli ...` runs
# the command line, anything else the window. One executable means one embedded Python archive instead of two.
import multiprocessing
import os
import sys


def _command_line(argv: list[str]) -> bool:
    if os.path.basename(argv[0]).lower().startswith("fairdesk-cli"):
        return True
    if len(argv) > 1 and argv[1] == "cli":
        del argv[1]
        return True
    return False


# A worker process (executor local:N, spawned) re-runs this program with multiprocessing's own arguments: it must
# become the worker before either program starts.
multiprocessing.freeze_support()
if _command_line(sys.argv):
    from fairdesk.cli import main
else:
    from fairdesk.gui.app import main
sys.exit(main())
