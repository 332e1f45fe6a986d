from __future__ import annotations

from kbtool.cli import main

main()
