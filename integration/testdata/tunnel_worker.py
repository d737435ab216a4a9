"""A debuggee for the tunnel tests: debugpy.connect to the gateway's
listening address (not the proxy's), then a bounded loop with a marked
breakpoint line.

stdout: "CONNECTED <pid>" once attached, "RESULT <pid> <total>" at the end.
"""
import os
import sys
import time

host, port, token, iterations = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0

import debugpy

debugpy.connect((host, port), access_token=token)
print(f"CONNECTED {os.getpid()}", flush=True)


def step(i):
    value = i * 10
    return value  # TUNNEL-BREAKPOINT


total = 0
for i in range(iterations):
    total += step(i)
    time.sleep(pause)
print(f"RESULT {os.getpid()} {total}", flush=True)
