"""The walk of one step through the project's code, traced with sys.setprofile: every
call into a function of the project's packages (accounts, billing, config, outreach,
plans, webhooks; not tests, not libraries) and every return. bench/walk_one_step.py
prints it for one step from the beat to its webhook POST;
tests/outreach/test_route.py holds the route to going down the floors.

- files: the project's files the walk entered; functions: its distinct functions;
  calls: how many times they were called;
- comebacks: how often the walk came back into a file it had been in before, after
  being in another (a call or a return into it; a straight route down the floors comes
  back only by returning, once per floor);
- climbs: calls into a file that is already lower on the stack, under a frame of
  another file (a lower floor calling back up: the route climbing back);
- route: each call into another file, indented by the changes of file under it.

    walk = Walk()
    with walk.tracing():
        ...
"""

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = ("accounts", "billing", "config", "outreach", "plans", "webhooks")
PREFIXES = tuple(str(ROOT / package) + os.sep for package in PACKAGES)


# List, set and dict comprehensions run as functions of their own on Python 3.11 and
# inline from 3.12 (PEP 709): not counted, so the counts are the same on every Python.
_INLINED = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>"})


def _ours(filename: str) -> str | None:
    """The file's path from the project's root, if it is one of the project's modules."""
    if filename.startswith(PREFIXES):
        return str(Path(filename).relative_to(ROOT))
    return None


class Walk:
    @contextlib.contextmanager
    def tracing(self) -> Iterator["Walk"]:
        """Trace this thread's calls while the block runs."""
        sys.setprofile(self.profile)
        try:
            yield self
        finally:
            sys.setprofile(None)

    def __init__(self) -> None:
        self.calls = 0
        self.functions: set[tuple[str, str]] = set()
        self.visited: dict[str, None] = {}  # in order of first entry
        self.comebacks: Counter[str] = Counter()
        self.climbs: Counter[tuple[str, str]] = Counter()
        self.current: str | None = None
        self.route: list[str] = []  # each call into another file: "depth file:function"

    def _into(self, name: str) -> None:
        if name != self.current:
            if name in self.visited:
                self.comebacks[name] += 1
            self.visited.setdefault(name)
            self.current = name

    def profile(self, frame, event: str, _arg) -> None:
        if frame.f_code.co_name in _INLINED:
            return  # a comprehension: a function of its own only before Python 3.12
        if event == "call":
            name = _ours(frame.f_code.co_filename)
            if name is None:
                return
            self.calls += 1
            self.functions.add((name, frame.f_code.co_qualname))
            caller = self._caller(frame.f_back)
            if caller != name:
                depth = self._depth(frame.f_back)
                self.route.append(f"{'  ' * depth}{name}:{frame.f_code.co_qualname}")
            if caller is not None and caller != name and self._on_stack(frame.f_back, name):
                self.climbs[(f"{caller}", f"{name}:{frame.f_code.co_qualname}")] += 1
            self._into(name)
        elif event == "return":
            if _ours(frame.f_code.co_filename) is None:
                return
            back = self._caller(frame.f_back)
            if back is not None:
                self._into(back)

    @staticmethod
    def _caller(frame) -> str | None:
        """The nearest project frame at or above `frame`."""
        while frame is not None:
            name = _ours(frame.f_code.co_filename)
            if name is not None:
                return name
            frame = frame.f_back
        return None

    @staticmethod
    def _depth(frame) -> int:
        """How many changes of project file the stack under `frame` holds."""
        depth, last = 0, None
        while frame is not None:
            here = _ours(frame.f_code.co_filename)
            if here is not None and here != last:
                depth, last = depth + 1, here
            frame = frame.f_back
        return depth

    @staticmethod
    def _on_stack(frame, name: str) -> bool:
        """Whether a frame of `name` is on the stack under a frame of another file."""
        left = False
        while frame is not None:
            here = _ours(frame.f_code.co_filename)
            if here is not None and here != name:
                left = True
            elif here == name and left:
                return True
            frame = frame.f_back
        return False
