"""``python -m campaignkit.cli``: the ``campaignkit`` command."""

from . import main

main()
