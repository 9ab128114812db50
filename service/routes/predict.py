"""``POST /v1/{task}/predict``, one route per registered task, generated from the registry."""

from fastapi import APIRouter
from preflight.data.errors import UnknownTask
from preflight.models.task import Task, all_tasks
from preflight.service.deps import StateDep
from preflight.service.schemas import ModelInfoPublic, PredictResponse, predict_request


def _endpoint(task: Task):
    Request = predict_request(task)

    def predict(body: Request, state: StateDep) -> PredictResponse:  # type: ignore[valid-type]
        champion = state.champion(task.name)
        rows = task.items_to_rows(body.items)
        estimates = champion.predictor.predict(task.featurize(rows, state.catalogue), body.coverage)
        return PredictResponse(
            task=task.name, model=ModelInfoPublic(**vars(champion.info)), predictions=estimates.records()
        )

    predict.__doc__ = (
        f"Estimates of {', '.join(task.targets)} with intervals and an out-of-distribution flag."
    )
    return predict


def router() -> APIRouter:
    api = APIRouter(tags=["predict"])
    for task in all_tasks():
        api.add_api_route(
            f"/v1/{task.name}/predict",
            _endpoint(task),
            methods=["POST"],
            response_model=PredictResponse,
            operation_id=f"predict_{task.name.replace('-', '_')}",
        )

    @api.post("/v1/{task}/predict", include_in_schema=False)
    def unknown_task(task: str) -> None:
        raise UnknownTask(task, sorted(t.name for t in all_tasks()))

    return api
