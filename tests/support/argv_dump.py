#!/usr/bin/env python3
"""A stand-in server for quoting tests: prints its argv and chosen env as one JSON line, then waits.

Used as a profile's ``launcher.python``: whatever kimitui passes arrives here
verbatim, or the test sees the difference.
"""

import json
import os
import sys
import time

print(json.dumps({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith("KT_")}}), flush=True)
time.sleep(float(os.environ.get("ARGV_DUMP_SLEEP", "60")))
