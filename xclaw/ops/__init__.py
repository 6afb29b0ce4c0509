"""Operating xclaw: checking a database (fsck), replaying a session (replay) and exporting
steps as OpenTelemetry spans (otel). Each works through the Store protocol and the store
package's own seams; none holds SQL."""
