"""The built-in task types: importing this package registers them in the default registry."""

import workers.builtin.kubernetes
import workers.builtin.noop
import workers.builtin.python
import workers.builtin.shell
import workers.builtin.sleep  # noqa: F401 - imported to register the processors
