"""[store/transfer] The export format, import and retention, both backends.

`format.py`: the JSON Lines export format read back; `sql.py`: import and
what retention would free, both backends.
"""
