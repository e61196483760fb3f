"""The operator commands' argument parser: help on the stdout it is given (exit 0), and a usage
error raised as `UsageError` instead of argparse's print-and-exit, so that the one caller that
chooses exit codes (cli.py, or a module's own `main` in tests) does.

It imports nothing from the package: every floor that has a command line may use it.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import IO, Any, NoReturn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _typeshed import SupportsWrite


class UsageError(Exception):
    """Bad arguments: the caller prints the usage and this message, and exits 2."""


class Parser(argparse.ArgumentParser):
    def __init__(
        self, *args: Any, out: IO[str] | None = None, err: IO[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("parser_class", functools.partial(Parser, out=self.out, err=self.err))
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        # argparse writes help and --version to sys.stdout, and messages to sys.stderr, by name:
        # send them to the streams this parser was given.
        if not message:
            return
        if file is None or file is sys.stdout:
            file = self.out
        elif file is sys.stderr:
            file = self.err
        file.write(message)
