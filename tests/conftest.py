import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# `labkit grade` would leave warm grading daemons behind; tests that want one say so
# (tests/test_daemon.py), in a runtime folder of their own.
os.environ["LABKIT_DAEMON"] = "0"
