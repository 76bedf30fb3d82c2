"""``python -m slim``: the command-line interface (see `slim.cli`)."""

import sys

from slim.cli import main

if __name__ == "__main__":
    sys.exit(main())
