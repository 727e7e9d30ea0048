"""The PostgreSQL store: the store contract (dal/receipts/contract.py) on a database server, for workers on
many machines draining one queue (docs/scale.md). Imported only for a `postgresql://` location; the driver
is psycopg 3 (`pip install 'dal-lang[postgres]'`)."""
