"""The typed target: parsing, what each scheme can do, and no backend-name check elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuner.core.target import CPU_QUEUE
from tuner.core.target import SCHEMES
from tuner.core.target import BadTarget
from tuner.core.target import Target
from tuner.core.target import parse_worker_device

ROOT = Path(__file__).resolve().parents[2]
SCHEME_NAMES = tuple(SCHEMES.names())
PREFIX_CONSTANTS = ("REPLAY_PREFIX", "MODEL_PREFIX")


@pytest.mark.parametrize("text", ["interpret", "cuda", "cuda:3", "standin:h200", "model:a100-80gb",
                                  "replay:some/file.json"])
def test_str_gives_back_the_text_it_was_parsed_from(text: str) -> None:
    assert str(Target.parse(text)) == text


@pytest.mark.parametrize("text", ["", "gpu", "cuda:x", "cuda:", "interpret:1", "replay:",
                                  "model:", "model:cpu", "standin:nosuchgpu", "compile:h200"])
def test_text_that_names_no_target_is_refused_with_a_message(text: str) -> None:
    with pytest.raises(BadTarget, match=r"\w"):
        Target.parse(text)


def test_static_checks_are_no_target() -> None:  # a builder for the GPU kind compiles them
    with pytest.raises(BadTarget, match="unknown backend 'compile:h200'"):
        Target.parse("compile:h200")


def test_what_each_scheme_may_do() -> None:
    rows = {text: Target.parse(text) for text in
            ("interpret", "cuda:1", "standin:h200", "model:h200", "replay:x.json")}
    assert [t for t, v in rows.items() if v.offers_best] == ["interpret", "cuda:1",
                                                               "replay:x.json"]
    assert [t for t, v in rows.items() if v.has_noise] == ["interpret", "cuda:1",
                                                             "standin:h200"]
    assert [t for t, v in rows.items() if v.on_gpu] == ["cuda:1", "standin:h200"]
    assert rows["cuda:1"].gpu_index == 1 and Target.parse("cuda").gpu_index is None
    assert rows["replay:x.json"].recording == "x.json"
    assert rows["model:h200"].mark == " (predicted)" and rows["standin:h200"].mark == \
        " (simulated)" and rows["cuda:1"].mark == ""
    assert rows["standin:h200"].queue("h200") == "bench.h200"
    assert rows["model:h200"].queue("h200") == rows["interpret"].queue("cpu") == CPU_QUEUE


@pytest.mark.parametrize("device,backend", [("cpu", "interpret"), ("cuda:0", "cuda:0"),
                                            ("standin:h200", "standin:h200")])
def test_worker_devices(device: str, backend: str) -> None:
    assert str(parse_worker_device(device)) == backend


@pytest.mark.parametrize("device", ["cuda", "gpu0", "interpret", "model:h200", "standin:zzz"])
def test_bad_worker_devices_are_refused(device: str) -> None:
    with pytest.raises(BadTarget, match=r"device|datasheet"):
        parse_worker_device(device)


def _is_scheme_text(value: object) -> bool:
    return isinstance(value, str) and value.partition(":")[0] in SCHEME_NAMES


def _literals(node: ast.AST) -> list[object]:
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return []


def backend_name_checks(source: str) -> list[int]:
    """Lines of ``source`` that check a backend name by its text: a ``startswith`` (or
    ``removeprefix``, or a regular expression) with a ``scheme:`` literal, a comparison of a
    scheme literal with anything called backend or target, a prefix constant."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            prefixes = [v for v in _literals(node.args[0])
                        if _is_scheme_text(v) and ":" in str(v)]
            if node.func.attr in ("startswith", "removeprefix", "fullmatch", "match",
                                  "compile") and prefixes:
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(w in ast.unparse(s) for s in sides for w in ("backend", "target"))
            if named and any(_is_scheme_text(v) for s in sides for v in _literals(s)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in PREFIX_CONSTANTS:
            lines.append(node.lineno)
    return lines


def test_no_backend_name_check_outside_the_target_module() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}"
             for folder in ("tuner", "workers", "db", "search_spaces")
             for path in sorted((ROOT / folder).rglob("*.py"))
             if path != ROOT / "tuner" / "core" / "target.py"
             for line in backend_name_checks(path.read_text())]
    assert found == [], "ask tuner.core.target instead of checking the name: " + ", ".join(found)


@pytest.mark.parametrize("planted", [
    'if backend.startswith("cuda:"): pass',
    'ok = spec.backend == "interpret"',
    'gpu = request.backend.startswith(("cuda", "standin:"))',
    'if target_name in ("model", "replay"): pass',
    'import re\nre.fullmatch(r"cuda:\\d+", device)',
    'path = name[len(REPLAY_PREFIX):]',
])
def test_the_check_finds_a_planted_backend_name_check(planted: str) -> None:
    assert backend_name_checks(planted) == [planted.count("\n") + 1]


def test_the_check_leaves_other_names_alone() -> None:
    assert backend_name_checks('if phase == "compile": pass\nk.startswith("replay")\n'
                               'on_gpu = device == "cuda"') == []
