"""Producers: jobs and subscriptions made through the broker (``stellwerk.jobs``).

Producers with only Celery or kombu create and delete jobs and subscriptions, and get
each outcome as an event. ``handler`` applies one request exactly once with the
services the REST API uses, ``validation`` checks it as the API would, ``answers``
writes the outcome event (also to the request's ``reply_to`` queue), ``consumer``
drains the queue, ``main`` composes it.
"""
