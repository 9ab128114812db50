"""A larger schemathesis run over the service's ``/openapi.json`` than the CI test
(tests/service/test_openapi_fuzz.py): every operation, positive and negative data, the examples,
coverage, fuzzing and stateful phases, each operation's tests going on after a failure; derandomized,
without an example database or schemathesis' cache of earlier runs.

The service runs in-process (ASGI) on a copy of ``--home``, or on a temporary home where a champion
of every task is trained on the tests' small sample data first (about a minute on 2 cores), with
reads behind the API key (``--open-reads``: the default, reads open). Prints the scenarios each phase
ran, then the failures counted by operation and kind with one request (as curl) and answer of each;
exits non-zero only on a script error.

    .venv/bin/python bench/fuzz.py [--home DIR] [--max-examples N] [--seed N] [--all-checks]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEY = "fuzz-bench-key-0123456789"
#: By design, schema-valid items can be refused (notation, shapes, known devices and kernels): left
#: out unless --all-checks, since its first failure would end an operation's fuzzing early otherwise.
BY_DESIGN = ["positive_data_acceptance"]
#: Schemathesis' answers that refuse invalid data, and 413: a body over the limit is refused too.
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]


def trained_home(folder: Path) -> Path:
    """A home with a champion of every task, trained on the tests' sample data (as the tests' fixture)."""
    sys.path.insert(0, str(ROOT))
    from preflight.data.catalogue import Catalogue
    from preflight.data.settings import Settings
    from preflight.models.core.task import all_tasks
    from preflight.models.core.training import train

    from tests.samples import sample_paths

    home = folder / "home"
    settings = Settings(home=home, datasets=None, api_keys=[])
    catalogue = Catalogue.load(settings.devices_file)
    for task in all_tasks():
        train(task, settings, catalogue, paths=sample_paths(task.name, folder / "samples" / task.name))
    return home


def run(home: Path, args: argparse.Namespace) -> None:
    import schemathesis
    from preflight.data.settings import Settings
    from preflight.service.app import create_app
    from schemathesis.engine import events, from_schema
    from schemathesis.generation import GenerationMode
    from schemathesis.python import asgi

    settings = Settings(home=home, api_keys=[KEY], reload_interval_s=0, protect_reads=not args.open_reads)
    checks = {"negative_data_rejection": {"expected-statuses": REFUSALS}}
    config = schemathesis.Config.from_dict({"checks": checks, "cache": {"enabled": False}})
    config.update(seed=args.seed, max_failures=None)
    project = config.projects.override
    project.update(headers={"X-API-Key": KEY}, continue_on_failure=True)
    project.generation.update(
        modes=list(GenerationMode), max_examples=args.max_examples, deterministic=True, database="none"
    )
    project.checks.update(excluded_check_names=[] if args.all_checks else BY_DESIGN)
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(settings), config=config)

    scenarios: Counter = Counter()
    failures: Counter = Counter()
    sample: dict[tuple[str, str, str], str] = {}
    errors: list[str] = []
    start = time.perf_counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            scenarios[event.phase.value] += 1
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    key = (failure.operation or event.recorder.label, check.name, failure.title)
                    failures[key] += 1
                    interaction = event.recorder.interactions.get(case_id)
                    answer = interaction.response if interaction is not None else None
                    got = "no answer" if answer is None else f"{answer.status_code} {answer.content[:300]!r}"
                    sample.setdefault(key, f"{check.failure_info.code_sample[:800]}\n    -> {got}")
        elif isinstance(event, events.NonFatalError):
            errors.append(f"{event.label}: {event.info.title}: {event.info.message[:300]}")
        elif isinstance(event, events.FatalError):
            errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            for failure in event.failures:
                key = (failure.operation or "run", "after-run", failure.title)
                failures[key] += 1
                sample.setdefault(key, failure.message[:800])

    asgi.shutdown_lifespans()  # the app's reload thread stops before its home goes
    reads = "open" if args.open_reads else "behind the key"
    left_out = "none" if args.all_checks else ", ".join(BY_DESIGN)
    print(f"schemathesis {schemathesis.__version__}: {len(list(schema.get_all_operations()))} operations")
    print(f"max_examples={args.max_examples} seed={args.seed} reads {reads}; checks left out: {left_out}")
    print(f"{time.perf_counter() - start:.0f} s; scenarios by phase: {dict(scenarios)}")
    print(f"\n{sum(failures.values())} failures, {len(failures)} distinct (operation, check, kind)")
    for (operation, check, title), count in sorted(failures.items()):
        print(f"  {count:5d}  {operation}  [{check}] {title}")
    for error in errors:
        print(f"  error: {error}")
    for (operation, check, title), text in sorted(sample.items()):
        print(f"\n## {operation} [{check}] {title}\n{text}")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--home", type=Path, help="a trained PREFLIGHT_HOME (copied; default: train one)")
    parser.add_argument("--max-examples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--open-reads", action="store_true", help="reads without the key (the default)")
    parser.add_argument("--all-checks", action="store_true", help="positive_data_acceptance too")
    args = parser.parse_args()
    for name in [n for n in os.environ if n.startswith("PREFLIGHT_")]:
        del os.environ[name]  # the run's own settings only
    with tempfile.TemporaryDirectory(prefix="preflight-fuzz-") as tmp:
        folder = Path(tmp)
        if args.home is not None:
            shutil.copytree(args.home, folder / "home")
            home = folder / "home"
        else:
            home = trained_home(folder)
        run(home, args)


if __name__ == "__main__":
    main()
