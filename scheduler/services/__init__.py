"""What the REST API (and later the jobs queue) does to the database: create and read.

Each function takes a ``Session`` and, where time matters, ``now``; it never commits.
The caller owns the transaction, so a request that fails half-way changes nothing.
State changes after creation belong to the engine, not here.
"""
