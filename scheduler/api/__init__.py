"""The REST API (docs/reference/api.md): ``create_app(settings)`` builds it, ``serve`` runs it."""
