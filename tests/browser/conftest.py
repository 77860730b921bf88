import os

import pytest

from jupyter_lab import CHROMIUM, running_lab


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """One JupyterLab for every browser test of the run; each test module puts its notebooks
    (copies: autosave writes outputs into the file it opens) in the served folder."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` installs Debian's Chromium")
    with running_lab(tmp_path_factory.mktemp("lab")) as served:
        yield served
