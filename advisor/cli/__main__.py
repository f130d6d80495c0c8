"""``python -m advisor.cli``: the ``advisor`` command (the import-time tests run it this way)."""

from advisor.cli import main

main()
