"""[security] What is kept from others: credentials and owner-only files.

`credentials.py`: which values are credentials and how the process sheds them;
`private_files.py`: files only the owner may read (docs/security.md).
"""
