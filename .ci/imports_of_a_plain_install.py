"""Import every Stellwerk module and the transports it loads lazily, in a plain install.

The README's run command installs ``.`` without the dev extras, and the tests run in a
venv with them, which pull in more packages (pytest needs ``packaging``, which kombu's
Redis transport imports but does not require without its ``redis`` extra: a worker from
a plain install crashed while every test passed). CI runs this in such a venv.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

PACKAGES = ("common", "scheduler", "workers", "connectors", "stellwerk")
# Imported by Celery and kombu only when a worker connects, never by our modules.
LAZY = ("kombu.transport.redis", "celery.backends.redis")


def main() -> int:
    """Import them all; exit 1 naming each module that cannot be imported."""
    names = list(LAZY)
    for package in PACKAGES:
        module = importlib.import_module(package)
        names += [info.name for info in pkgutil.walk_packages(module.__path__, f"{package}.")
                  if ".migrations." not in info.name]
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            failed.append(f"{name}: {error}")
    print(f"imported {len(names) - len(failed)} of {len(names)} modules in a plain install")
    for line in failed:
        print(f"  cannot import {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
