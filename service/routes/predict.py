"""``POST /v1/{task}/predict``, one route per registered task, generated from the registry."""

from fastapi import APIRouter
from preflight.data.errors import UnknownTask
from preflight.models.inference import predict_items
from preflight.models.task import Task, all_tasks
from preflight.service.deps import StateDep
from preflight.service.schemas import ModelInfoPublic, PredictRequest, PredictResponse, predict_request


def _endpoint(task: Task):
    def predict(body: PredictRequest, state: StateDep) -> PredictResponse:
        champion = state.champion(task.name)
        prediction = predict_items(task, champion.predictor, state.catalogue, body.items, body.coverage)
        return PredictResponse(
            task=task.name, model=ModelInfoPublic(**vars(champion.info)), predictions=prediction.records()
        )

    predict.__annotations__["body"] = predict_request(task)  # FastAPI validates with the task's item model
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
