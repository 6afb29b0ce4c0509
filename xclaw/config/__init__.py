"""[config] Settings: the one Settings object, its sections, and a refusal in one sentence.

Settings (docs/configuration.md): `settings.py` holds `Settings` and
`load_settings`; `section.py` what a section is made of; `errors.py` a refused setting in
one sentence.
"""
