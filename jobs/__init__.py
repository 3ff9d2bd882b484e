"""lakelog.jobs (PyFlink side; arrives with the connector issue)."""
