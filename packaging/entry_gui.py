import sys

from fairdesk.gui.app import main

sys.exit(main())
