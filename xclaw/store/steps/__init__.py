"""[store/steps] Sessions and steps: values, columns, rows, the write values and their stream.

What both backends write for a session and its steps, one text each: the
values (`model.py`) and their columns (`columns.py`), rows (`rows.py`), a run's writes as
values and their durability (`writes.py`), the write stream (`stream.py`), the session
methods and step reads (`sql.py`), the change log (`changes.py`), rollback and fork
(`timetravel.py`).
"""
