"""``python -m nbprof.cli`` (what torchrun runs: ``torchrun ... -m nbprof.cli run train.py``)."""

import sys

from .main import main

sys.exit(main())
