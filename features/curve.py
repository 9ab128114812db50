"""Learning-curve features: a partial curve of validation accuracy, its parametric extrapolations,
what was trained (an architecture in ``features/arch.py``'s flat encoding, NaN without one; a
learner's name from a fixed vocabulary) and the training hyperparameters.

A row holds ``curve`` (accuracy after each measured epoch), ``epochs`` (which epochs; 1, 2, ... when
absent) and ``budget`` (the epochs the run will train for). The extrapolations are the classic
parametric curve models of Domhan et al. (2015), each fitted by least squares over a fixed grid of
its shape parameters with the linear ones solved exactly (no optimiser to diverge):

- ``pow3``: ``c - a x^-alpha``; ``exp3``: ``c - a exp(-rate x)``;
- ``logpower``: ``a / (1 + (x / s)^-k)``,

and their mean (``ensemble``). A model with more parameters than the curve has points is not
fitted; the ensemble of none is the last value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.features import Features, numbers
from preflight.features.arch import DATASETS, FLAT_COLUMNS, codes, flat, text

#: Curve models fitted when the curve has at least this many points (their parameter count).
MIN_POINTS = 3
POW_ALPHAS = np.geomspace(0.05, 4.0, 24)
EXP_RATES = np.geomspace(0.01, 3.0, 24)
LOGPOWER_SCALES, LOGPOWER_SHAPES = np.meshgrid(np.geomspace(0.3, 100.0, 16), np.geomspace(0.3, 6.0, 12))
MODELS = ("pow3", "exp3", "logpower")
#: Learners of LCDB (the last part of the name; a learner outside this list is NaN and flagged unseen).
LEARNERS = (
    "SVC_linear",
    "SVC_poly",
    "SVC_rbf",
    "SVC_sigmoid",
    "LinearDiscriminantAnalysis",
    "QuadraticDiscriminantAnalysis",
    "ExtraTreesClassifier",
    "GradientBoostingClassifier",
    "RandomForestClassifier",
    "LogisticRegression",
    "PassiveAggressiveClassifier",
    "Perceptron",
    "RidgeClassifier",
    "SGDClassifier",
    "BernoulliNB",
    "MultinomialNB",
    "KNeighborsClassifier",
    "MLPClassifier",
    "DecisionTreeClassifier",
    "ExtraTreeClassifier",
)
#: Calibration strata: the share of the budget already trained (the error shrinks as it grows) and the
#: level the curve has reached (a curve still at chance may go anywhere; one near 1 has little room).
FRACTION_EDGES = (0.1, 0.25, 0.5, 0.75)
LEVEL_EDGES = (0.3, 0.8, 0.95)
CURVE_COLUMNS = (
    "curve_points",
    "curve_last_epoch",
    "curve_budget",
    "curve_fraction",
    "curve_remaining_log2",
    "curve_first",
    "curve_last",
    "curve_best",
    "curve_mean3",
    "curve_std3",
    "curve_slope",
    "curve_slope3",
    *(f"curve_fit_{m}" for m in MODELS),
    "curve_fit_ensemble",
    "curve_fit_spread",
)


def points(row_curve, row_epochs) -> tuple[np.ndarray, np.ndarray]:
    """(epochs, values) of one row; epochs default to 1, 2, ..."""
    y = np.asarray(row_curve, dtype=float)
    given = row_epochs is not None and not (np.isscalar(row_epochs) and pd.isna(row_epochs))
    x = np.asarray(row_epochs, dtype=float) if given else np.arange(1, len(y) + 1, dtype=float)
    return x, y


def _two_parameter(y: np.ndarray, basis: np.ndarray, basis_at: np.ndarray) -> float:
    """``y ≈ c + a·basis`` for each candidate basis (rows), the least-squares best one, evaluated at the
    budget."""
    b_mean = basis.mean(axis=1, keepdims=True)
    centred = basis - b_mean
    var = (centred**2).sum(axis=1)
    ok = var > 1e-12
    slope = np.where(ok, (centred * (y - y.mean())).sum(axis=1) / np.where(ok, var, 1.0), 0.0)
    intercept = y.mean() - slope * b_mean[:, 0]
    sse = ((intercept[:, None] + slope[:, None] * basis - y) ** 2).sum(axis=1)
    best = np.argmin(np.where(ok, sse, np.inf))
    return float(intercept[best] + slope[best] * basis_at[best])


def _logpower(x: np.ndarray, y: np.ndarray, budget: float) -> float:
    scales, shapes = LOGPOWER_SCALES.ravel()[:, None], LOGPOWER_SHAPES.ravel()[:, None]
    g = 1.0 / (1.0 + (x[None, :] / scales) ** -shapes)
    a = (g * y).sum(axis=1) / (g**2).sum(axis=1)
    best = np.argmin(((a[:, None] * g - y) ** 2).sum(axis=1))
    return float(a[best] / (1.0 + (budget / scales[best, 0]) ** -shapes[best, 0]))


def extrapolate(x: np.ndarray, y: np.ndarray, budget: float) -> dict[str, float]:
    """Each curve model's value at ``budget`` (clipped to [0, 1]; NaN when the curve is too short for it)."""
    if len(y) < MIN_POINTS:
        return dict.fromkeys(MODELS, np.nan)
    fits = {
        "pow3": _two_parameter(y, x[None, :] ** -POW_ALPHAS[:, None], budget**-POW_ALPHAS),
        "exp3": _two_parameter(y, np.exp(-EXP_RATES[:, None] * x[None, :]), np.exp(-EXP_RATES * budget)),
        "logpower": _logpower(x, y, budget),
    }
    return {name: float(np.clip(value, 0.0, 1.0)) for name, value in fits.items()}


def curve_row(x: np.ndarray, y: np.ndarray, budget: float) -> dict[str, float]:
    """The curve columns of one partial curve."""
    tail_x, tail_y = x[-3:], y[-3:]
    fits = extrapolate(x, y, budget)
    fitted = [v for v in fits.values() if np.isfinite(v)]
    return {
        "curve_points": len(y),
        "curve_last_epoch": x[-1],
        "curve_budget": budget,
        "curve_fraction": x[-1] / budget,
        "curve_remaining_log2": np.log2(1 + budget - x[-1]),
        "curve_first": y[0],
        "curve_last": y[-1],
        "curve_best": y.max(),
        "curve_mean3": tail_y.mean(),
        "curve_std3": tail_y.std(),
        "curve_slope": (y[-1] - y[-2]) / (x[-1] - x[-2]) if len(y) > 1 else 0.0,
        "curve_slope3": np.polyfit(tail_x, tail_y, 1)[0] if len(y) > 1 else 0.0,
        **{f"curve_fit_{name}": value for name, value in fits.items()},
        "curve_fit_ensemble": float(np.mean(fitted)) if fitted else y[-1],
        "curve_fit_spread": float(np.ptp(fitted)) if fitted else 0.0,
    }


#: A partial curve as a key: its epochs' and values' bytes, and its budget.
CurveKey = tuple[bytes, bytes, float]


def _curve_row_once(
    computed: dict[CurveKey, dict[str, float]], x: np.ndarray, y: np.ndarray, budget: float
) -> dict[str, float]:
    """``curve_row``, from ``computed`` where the same points and budget were seen before."""
    key = (x.tobytes(), y.tobytes(), budget)
    if key not in computed:
        computed[key] = curve_row(x, y, budget)
    return computed[key]


def stratum(dataset: np.ndarray, fraction: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Calibration stratum of each row: dataset, bin of the budget's share trained, bin of the last value
    (``digits|<=25%|<0.8``)."""
    shares = np.array([f"<={int(e * 100)}%" for e in FRACTION_EDGES] + ["<100%"])
    levels = np.array([f"<{e}" for e in LEVEL_EDGES] + [f">={LEVEL_EDGES[-1]}"])
    share = shares[np.searchsorted(np.asarray(FRACTION_EDGES), fraction, side="left")]
    reached = levels[np.searchsorted(np.asarray(LEVEL_EDGES), level, side="right")]
    return np.array([f"{d}|{s}|{r}" for d, s, r in zip(dataset, share, reached)], dtype=object)


def partial_curve(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features of partial curves (API items or the prefixes of ``nas-curve``'s training table)."""
    del catalogue  # curves are trained, not run, on a device: no spec sheet enters
    epochs = rows["epochs"] if "epochs" in rows else pd.Series([None] * len(rows), index=rows.index)
    budget = rows["budget"].to_numpy(dtype=float)
    computed: dict[CurveKey, dict[str, float]] = {}  # a curve asked about again is fitted once
    curves = pd.DataFrame(
        [_curve_row_once(computed, *points(c, e), b) for c, e, b in zip(rows["curve"], epochs, budget)],
        columns=list(CURVE_COLUMNS),
    ).astype(float)
    dataset = rows["dataset"].astype(str).str.lower()
    context = pd.DataFrame(
        {
            "ctx_dataset": codes(dataset, DATASETS),
            "ctx_learning_rate_log10": np.log10(numbers(rows, "learning_rate")),
            "ctx_batch_log2": np.log2(numbers(rows, "batch_size")),
        }
    )
    spaces, notations, learners = (text(rows, c).to_numpy() for c in ("space", "arch", "learner"))
    context["ctx_learner"] = codes(pd.Series(learners).str.rsplit(".", n=1).str[-1], LEARNERS)
    X = pd.concat([curves, _architectures(spaces, notations), context], axis=1)
    given = text(rows, "arch_group").to_numpy()
    groups = np.where(
        given != "", given, np.where(notations != "", notations, learners)
    )  # API items: what was trained
    meta = pd.DataFrame(
        {
            "device_id": "",
            "dataset": dataset.to_numpy(),
            "space": spaces,
            "arch": notations,
            "arch_group": groups,
            "run": rows["run"].astype(str).to_numpy() if "run" in rows else np.arange(len(rows)).astype(str),
            "stratum": stratum(
                dataset.to_numpy(), curves["curve_fraction"].to_numpy(), curves["curve_last"].to_numpy()
            ),
        }
    )
    reference = pd.DataFrame(
        {"accuracy": curves["curve_last"]}
    )  # the final accuracy is learned as a change from it
    return Features(X=X, reference=reference, meta=meta)


def _architectures(spaces: np.ndarray, notations: np.ndarray) -> pd.DataFrame:
    """The flat encoding of rows that have an architecture; NaN for the others (an LCDB learner)."""
    out = pd.DataFrame(np.nan, index=range(len(spaces)), columns=list(FLAT_COLUMNS))
    has = notations != ""
    if has.any():
        out.loc[has] = flat(spaces[has], notations[has]).to_numpy()
    return out
