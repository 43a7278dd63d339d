"""Print the settings table, or write it into the README: ``python -m config [--write-readme]``."""

import re
import sys
from pathlib import Path

from config import configuration_table

README = Path(__file__).resolve().parent.parent / "README.md"
MARKERS = re.compile(r"(<!-- settings-table:start -->\n).*?(\n<!-- settings-table:end -->)", re.S)

if "--write-readme" in sys.argv:
    text = README.read_text(encoding="utf-8")
    README.write_text(MARKERS.sub(lambda m: m.group(1) + configuration_table() + m.group(2),
                                  text), encoding="utf-8")
else:
    print(configuration_table())
