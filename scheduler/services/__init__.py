"""What the REST API and the ``stellwerk.jobs`` consumer do to the database: create and read.

Beside that, what the components share: the limits of what they accept and the wording
of what they refuse, and the live event stream. The bottom layer of ``scheduler`` (the
layers contract in pyproject.toml): it imports none of the components.

A function that uses the database takes a ``Session`` and, where time matters, ``now``;
it never commits. The caller owns the transaction, so a request that fails half-way
changes nothing.
State changes after creation belong to the engine, not here.
"""
