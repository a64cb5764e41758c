"""``python -m fairdesk``: the command-line tool (the same as ``fairdesk-cli``), for machines where the scripts
folder is not on PATH."""
import sys

from fairdesk.cli import main

if __name__ == "__main__":
    sys.exit(main())
