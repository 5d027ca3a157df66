"""``python -m bench [OPTIONS]`` from the repository root: the same as ``footnote bench``."""

from __future__ import annotations

import sys

from bot.cli import main

if __name__ == "__main__":
    main(["bench", *sys.argv[1:]], prog_name="python -m")  # usage reads "python -m bench [OPTIONS]"
