import sys

from fairdesk.cli import main

sys.exit(main())
