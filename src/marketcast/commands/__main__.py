"""``python -m marketcast.commands ...``: the ``marketcast`` console script without its launcher (the tests and
the crash harness run commands this way in a subprocess)."""

import sys

from marketcast.commands import main

if __name__ == "__main__":
    sys.exit(main())
