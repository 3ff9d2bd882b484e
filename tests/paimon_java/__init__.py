"""Apache Paimon's Java API as a test oracle (see oracle.py)."""
