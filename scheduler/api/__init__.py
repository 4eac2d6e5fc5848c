"""The REST API (SPEC §6): ``create_app(settings)`` builds it, ``serve`` runs it."""
