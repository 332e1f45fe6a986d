from __future__ import annotations

from kbtool.launch import main

main()
