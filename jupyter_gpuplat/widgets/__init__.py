"""`jupyter_gpuplat.widgets` and `jupyter_gpuplat.widgets.<module>`: the public names of `notebook/widgets/`.

Notebooks import these paths, so they stay. Each name is the same module object as its new home
(one class per widget, so `isinstance` and monkeypatching still hold): this package is replaced
by `jupyter_gpuplat.notebook.widgets` in `sys.modules`, and a finder maps each submodule.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

OLD = __name__
NEW = "jupyter_gpuplat.notebook.widgets"


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `jupyter_gpuplat.widgets.X` and loads it as `jupyter_gpuplat.notebook.widgets.X`."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a blank module, replaced in exec_module

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns what sys.modules holds under the name after this call.
        sys.modules[module.__name__] = importlib.import_module(NEW + module.__name__[len(OLD) :])


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.insert(0, _Moved())
sys.modules[OLD] = importlib.import_module(NEW)
