"""lakelog.operators (PyFlink side; arrives with the connector issue)."""
