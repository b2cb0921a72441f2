"""``python -m service.cli``: the ``autograde`` command."""

import sys

from service.cli.parser import main

sys.exit(main())
