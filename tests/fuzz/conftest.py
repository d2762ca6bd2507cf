"""The fuzz suite's helpers live beside the tests (schema_fuzz.py); make them importable."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
