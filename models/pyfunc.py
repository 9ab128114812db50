"""MLflow's ``python_function`` flavour of a predictor: ``mlflow.pyfunc.load_model`` and ``mlflow models
serve`` answer with preflight's estimates.

The logged model folder is the predictor's own (``artifacts.save``), with an ``MLmodel`` beside its files
whose loader module is this one: nothing is pickled, and ``artifacts.load`` reads the folder as before.
The input is a frame of the task's items, one a row, with the HTTP API's fields (nested ones as
objects); the output one row an item: ``{target}``, ``{target}_low`` and ``{target}_high`` per target,
then ``ood``. The parameter ``coverage`` sets the intervals' coverage. Devices resolve against the
shipped catalogue and the devices registered under ``PREFLIGHT_HOME``; few-shot adaptations are not
replayed.
"""

from __future__ import annotations

import os
import warnings
from functools import cache
from importlib.metadata import version
from pathlib import Path
from types import ModuleType, UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.features import distinct_rows
from preflight.models.core import artifacts
from preflight.models.core.inference import predict_rows
from preflight.models.core.predictor import Estimates, Predictor
from preflight.models.core.task import Task
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

if TYPE_CHECKING:
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec

COVERAGE = 0.9  # as the HTTP API's
#: Column types where MLflow's schema enforcement takes every valid value of the field.
_COLUMN_TYPES = {frozenset({bool}): "boolean", frozenset({str}): "string"}


def save(predictor: Predictor, directory: Path, rows: pd.DataFrame | None = None) -> None:
    """The predictor as an MLflow model in ``directory`` (a new folder); its input example is the first
    of the training ``rows`` that reads as an item."""
    from mlflow.utils.file_utils import get_total_file_size

    os.environ.setdefault("MLFLOW_UV_AUTO_DETECT", "false")  # no uv files from the working directory
    example = None if rows is None else input_example(predictor.task, rows)
    with warnings.catch_warnings():  # a task whose training rows are no items has no example
        warnings.filterwarnings("ignore", ".*An input example was not provided", UserWarning)
        model = mlflow_pyfunc().save_model(
            str(directory),
            loader_module=__name__,
            signature=signature(predictor),
            input_example=example,
            pip_requirements=[f"preflight=={version('preflight')}"],  # explicit: nothing inferred
        )
    artifacts.save(predictor, directory)
    model.model_size_bytes = get_total_file_size(directory)
    model.save(str(directory / "MLmodel"))


def mlflow_pyfunc() -> ModuleType:
    """``mlflow.pyfunc``, imported without the warning it gives about its own agents' type hints."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*Any type hint is inferred as AnyType", UserWarning)
        import mlflow.pyfunc
    return mlflow.pyfunc


def signature(predictor: Predictor) -> ModelSignature:
    """Columns of the task's item fields in, estimates out, ``coverage`` as a parameter."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, ParamSchema, ParamSpec, Schema

    fields = predictor.task.item.model_fields
    outputs = [ColSpec("double", f"{t}{side}") for t in targets(predictor) for side in ("", "_low", "_high")]
    return ModelSignature(
        Schema([_column(name, field) for name, field in fields.items()]),
        Schema([*outputs, ColSpec("boolean", "ood")]),
        ParamSchema([ParamSpec("coverage", "double", COVERAGE)]),
    )


def _column(name: str, field: FieldInfo) -> ColSpec:
    """A field's input column: a boolean, string or required integer one, else of any type (left to the
    item's validation), since MLflow refuses integers in a double column and a column with gaps holds
    floats."""
    from mlflow.types.schema import AnyType, ColSpec

    kinds = frozenset(_kinds(field.annotation))
    kind = _COLUMN_TYPES.get(kinds) or ("long" if kinds == {int} and field.is_required() else None)
    return ColSpec(kind or AnyType(), name, required=field.is_required())


def _kinds(annotation: Any) -> set[type]:
    """The Python types a field takes, None aside (an enum or a literal as its values' type, a nested
    model as dict)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _kinds(args[0])
    if origin in (Union, UnionType):
        return set().union(*map(_kinds, args))
    if origin is Literal:
        return {type(arg) for arg in args}
    if origin is not None:
        return {origin}
    if annotation is type(None):
        return set()
    if _subclass(annotation, BaseModel):
        return {dict}
    return {next((k for k in (bool, int, float, str) if _subclass(annotation, k)), object)}


def _subclass(annotation: Any, kind: type) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, kind)


def targets(predictor: Predictor) -> list[str]:
    """The targets a predictor estimates (learned, or derived from those), in the task's order."""
    task = predictor.task
    return [t for t in task.targets if t in predictor.targets or t in task.derived]


def rows(task: Task, frame: pd.DataFrame) -> pd.DataFrame:
    """A frame's items (one a row) as the task's canonical rows, as ``Task.items_to_rows`` makes them of
    :func:`items`. An invalid row raises ``ValidationError``, its errors located by row first.

    Where the item's fields validate independently of each other (no model validators, serializers or
    computed fields of its own; a field validator reads at most the fields declared before it, so those
    validate together with it) and every column holds plain values, each column's distinct values (each
    distinct combination of the columns that validate together) are validated once, together, and spread
    back over the rows: a batch costs its distinct values, not its rows. Field validators are taken to
    answer alike for alike values, as any validator of a value should."""
    distinct = _distinct_values(task, frame)
    if distinct is not None:
        try:
            return _spread(task, len(frame), distinct)
        except ValidationError:
            pass  # the row-by-row validation below locates each error by its row
    return task.items_to_rows(items(task, frame))


#: A missing value: the record leaves its field out, so the item's default applies.
_MISSING = object()
#: The types of a value that a column may be validated by distinct value.
_PLAIN = frozenset({bool, int, float, str})
#: What lets one field of an item depend on any other, or a row's value be shared between rows.
_CROSS_FIELD = (
    "model_validators", "root_validators", "validators", "model_serializers", "field_serializers",
    "computed_fields",
)  # fmt: skip


def _distinct_values(task: Task, frame: pd.DataFrame) -> dict[str, tuple[np.ndarray, list]] | None:
    """Per column, each row's code and the distinct values (``_MISSING`` where a value is missing); the
    columns that validate together share their codes, one per distinct combination. None unless the
    task's item and the frame's columns allow validating column by column."""
    if not _fields_apart(task.item):
        return None
    kinds, distinct = _field_kinds(task), {}
    for column in frame.columns:
        if column not in kinds or not _plain_values(frame[column]):
            return None
        codes, uniques = pd.factorize(frame[column], use_na_sentinel=True)
        values = [_native(value, kinds[column]) for value in uniques.tolist()]
        if (codes < 0).any():
            codes, values = np.where(codes < 0, len(values), codes), [*values, _MISSING]
        distinct[column] = (codes, values)
    together = [c for c in _validated_together(task.item) if c in distinct]
    if len(together) > 1:
        combination, first = distinct_rows(*(distinct[c][0] for c in together))
        for c in together:
            codes, values = distinct[c]
            distinct[c] = (combination, [values[code] for code in codes[first]])
    return distinct


def _fields_apart(item: type[BaseModel]) -> bool:
    """Whether each of the item's fields validates and dumps on its own (or, with a field validator, with
    the fields before it), with no mutable default."""
    decorators = item.__pydantic_decorators__
    own_post_init = item.model_post_init is not BaseModel.model_post_init
    factories = any(field.default_factory is not None for field in item.model_fields.values())
    return not (any(getattr(decorators, kind) for kind in _CROSS_FIELD) or own_post_init or factories)


def _validated_together(item: type[BaseModel]) -> list[str]:
    """The item's fields up to the last with a field validator, which may read any field declared before
    it (pydantic's ``ValidationInfo.data``); none where no field has one."""
    names = list(item.model_fields)
    validated = {f for d in item.__pydantic_decorators__.field_validators.values() for f in d.info.fields}
    if "*" in validated:
        return names
    return names[: max((names.index(f) + 1 for f in validated if f in names), default=0)]


def _plain_values(column: pd.Series) -> bool:
    """Whether a column's values are of one plain type, whatever else its field takes (an object column
    may mix ``True`` and ``1``, which hash alike but validate apart, or hold lists)."""
    if column.dtype == object:
        return len(types := set(map(type, column.dropna()))) <= 1 and types <= _PLAIN
    return column.dtype.kind in "biuf" or isinstance(column.dtype, pd.StringDtype)


def _spread(task: Task, count: int, distinct: dict[str, tuple[np.ndarray, list]]) -> pd.DataFrame:
    """Canonical rows from each column's distinct values: record ``i`` holds every column's ``i``-th
    value (cycling), so that one validation covers them all; each row then takes its values' rows."""
    width = max((len(values) for _, values in distinct.values()), default=1)
    records = [
        {c: v for c, (_, values) in distinct.items() if (v := values[i % len(values)]) is not _MISSING}
        for i in range(width)
    ]
    canonical = task.items_to_rows(_item_list(task.item).validate_python(records))
    constant = np.zeros(count, dtype=np.intp)
    return pd.DataFrame(
        {c: canonical[c].to_numpy()[distinct[c][0] if c in distinct else constant] for c in canonical.columns}
    )


def items(task: Task, frame: pd.DataFrame) -> list[BaseModel]:
    """A frame's rows as the task's items: missing values left out (the item's defaults apply), whole
    floats as integers where the field takes integers. An invalid row raises ``ValidationError``, its
    errors located by row first.
    Column by column where a column allows it (no value missing), value by value elsewhere."""
    kinds = _field_kinds(task)
    whole = {c: _as_native(frame[c], kinds.get(c, set())) for c in frame.columns if frame[c].notna().all()}
    gappy = [c for c in frame.columns if c not in whole]
    records = pd.DataFrame(whole, index=frame.index).to_dict("records")
    for record, row in zip(records, frame[gappy].to_dict("records")):
        record.update(_record(row, kinds))
    return _item_list(task.item).validate_python(records)


@cache
def _item_list(item: type[BaseModel]) -> TypeAdapter[list[BaseModel]]:
    """A validator of a list of items: one call for a whole frame, each error's ``loc`` led by its row."""
    return TypeAdapter(list[item])  # type: ignore[valid-type]


def _as_native(column: pd.Series, kinds: set[type]) -> pd.Series:
    """A column with no value missing as ``_native`` makes each of its values, whole at a time where it
    can: a file's column with one bad cell is read as floats or text, and only that cell is invalid."""
    numbers = bool(kinds & {int, float}) and str not in kinds
    if not numbers or column.dtype.kind in "biu" or (column.dtype.kind == "f" and float in kinds):
        return column
    if column.dtype.kind == "f" and (column % 1 == 0).all():
        return column.astype("int64")
    return pd.Series([_native(value, kinds) for value in column.tolist()], index=column.index, dtype=object)


def _field_kinds(task: Task) -> dict[str, set[type]]:
    return {name: _kinds(field.annotation) for name, field in task.item.model_fields.items()}


def _record(row: dict, kinds: dict[str, set[type]]) -> dict:
    return {k: _native(v, kinds.get(k, set())) for k, v in row.items() if not _missing(v)}


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _native(value: object, kinds: set[type]) -> object:
    """A number for a numeric text where the field takes numbers but no text, and an integer for a
    whole float where it takes integers but no floats."""
    if isinstance(value, str) and kinds & {int, float} and str not in kinds:
        value = _number(value)
    if isinstance(value, float) and int in kinds and float not in kinds and value.is_integer():
        return int(value)
    return value


def _number(text: str) -> object:
    """The integer or float a text spells, else the text (for the item's validation to name)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def input_example(task: Task, rows: pd.DataFrame, tries: int = 100) -> pd.DataFrame | None:
    """The item fields of the first training row (of ``tries``) that reads as an item, or None."""
    kinds = _field_kinds(task)
    for row in rows[[f for f in kinds if f in rows]].head(tries).to_dict("records"):
        record = _record(row, kinds)
        try:
            task.item.model_validate(record)
        except ValidationError:
            continue
        return pd.DataFrame([record])
    return None


def table(predictor: Predictor, estimates: Estimates) -> pd.DataFrame:
    """Estimates as one row an item: per target its value, ``_low`` and ``_high``, then ``ood``."""
    columns: dict[str, pd.Series] = {}
    for t in targets(predictor):
        columns |= {t: estimates.value[t], f"{t}_low": estimates.low[t], f"{t}_high": estimates.high[t]}
    frame = pd.DataFrame({name: column.to_numpy(dtype=float) for name, column in columns.items()})
    return frame.assign(ood=[bool(reasons) for reasons in estimates.reasons])


class PreflightModel:
    """A predictor with the catalogue its items' devices resolve against."""

    def __init__(self, predictor: Predictor, catalogue: Catalogue) -> None:
        self.predictor, self.catalogue = predictor, catalogue

    def predict(self, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        coverage = float((params or {}).get("coverage", COVERAGE))
        task = self.predictor.task
        prediction = predict_rows(task, self.predictor, self.catalogue, rows(task, model_input), coverage)
        return table(self.predictor, prediction.estimates)


def _load_pyfunc(data_path: str) -> PreflightModel:
    """MLflow's entry point: the model folder's predictor."""
    return PreflightModel(artifacts.load(Path(data_path)), Catalogue.load(Settings().devices_file))
