"""Fuzzing (issue 7): generated and mutated frames through decoding, parsing and a live node.

`make test` runs a quick pass; BACCARAT_FUZZ_EXAMPLES sets the examples per test for a long
run (`make fuzz`, see docs/protocol.md).
"""

from __future__ import annotations

import os

EXAMPLES = int(os.environ.get("BACCARAT_FUZZ_EXAMPLES", "0")) or None
