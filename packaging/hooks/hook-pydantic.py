"""Overrides pyinstaller-hooks-contrib's pydantic hook (hooks in hookspath take precedence).

That hook collects every pydantic submodule: pydantic resolves some names at run time through
its lazy `__getattr__`, so the import scan alone misses them. The same, minus the mypy plugin and
the legacy v1 API, which the guard never uses and which pull mypy, hypothesis and friends from
the build environment into the bundle.
"""

from __future__ import annotations

from PyInstaller.utils.hooks import collect_submodules

_UNUSED = ("pydantic.mypy", "pydantic.v1", "pydantic._hypothesis_plugin")


def _wanted(name: str) -> bool:
    return not any(name == unused or name.startswith(unused + ".") for unused in _UNUSED)


hiddenimports = collect_submodules("pydantic", filter=_wanted)
