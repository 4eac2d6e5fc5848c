"""The web UI's files (``static/``): HTML, CSS and ES modules, served by ``stellwerk api``.

See ``scheduler.api.web_ui`` for how they are served, and ``static/main.js`` for where
the page starts.
"""
