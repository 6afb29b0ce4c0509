"""[agui] AG-UI on the gateway (docs/ag-ui.md): `POST /agui` runs a turn of an xclaw session and
streams it as AG-UI events, for the front ends built on that protocol."""
