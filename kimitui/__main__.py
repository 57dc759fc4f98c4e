import sys

from kimitui.cli import main

sys.exit(main())
