"""[ops] Operating xclaw: checking a database (fsck), and replaying a session (replay); exporting
steps as OpenTelemetry spans is xclaw/telemetry. Each works through the Store protocol and the store
package's own seams; none holds SQL."""
