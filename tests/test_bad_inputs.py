"""Every bad input of the corpus (``bad_inputs.py``): one line and exit 2 from the CLI, a
``gnnperf.errors`` exception from the API, and nothing half-written."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from bad_inputs import BadInput, corpus, files_under

from gnnperf.cli import main
from gnnperf.errors import GnnperfError


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory, cnn_onnx: Path,
          small_root: Path) -> tuple[Path, list[BadInput]]:
    folder = tmp_path_factory.mktemp("bad-inputs")
    return folder, corpus(folder / "corpus", cnn_onnx, small_root)


def test_the_corpus_covers_what_users_get_wrong(cases: tuple[Path, list[BadInput]]) -> None:
    names = {c.name for c in cases[1]}
    for kind in ("missing", "empty", "random-bytes", "text", "truncated", "lstm", "dynamic",
                 "external-data-missing", "huge", "nan-weights"):
        assert {f"predict-{kind}", f"graph-{kind}"} <= names
    assert {"wrong-input-shape-name", "unknown-hw-id", "malformed-hw-json", "unknown-build",
            "not-a-checkpoint", "corrupt-shard-line-train"} <= names


def test_each_bad_input_gives_one_line_exit_2_and_a_gnnperf_error(
        cases: tuple[Path, list[BadInput]], capsys: pytest.CaptureFixture[str]) -> None:
    folder, bad = cases
    problems = []
    for case in bad:
        before = files_under(folder)
        code = main(case.cli)
        err = capsys.readouterr().err.strip().splitlines()
        if code != 2 or len(err) != 1 or not err[0].startswith("gnnperf: error: ") \
                or case.says.lower() not in err[0].lower():
            problems.append(f"CLI {case.name}: exit {code}, stderr {err}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                case.api()
            problems.append(f"API {case.name}: no error")
        except GnnperfError as exc:
            if case.says.lower() not in str(exc).lower():
                problems.append(f"API {case.name}: message '{exc}' lacks '{case.says}'")
        left = files_under(folder) - before
        if left or any(p.exists() for p in case.outputs):
            problems.append(f"{case.name} left files behind: {sorted(left)}")
    assert not problems, "\n".join(problems)
