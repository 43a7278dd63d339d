"""Print the configuration table for the README: ``python -m config``."""

from config import configuration_table

print(configuration_table())
