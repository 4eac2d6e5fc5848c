"""Stellwerk from your own Python code.

Define jobs as code (:mod:`stellwerk.sdk`) and call the REST API (:mod:`stellwerk.client`);
neither imports any part of the server.
"""
