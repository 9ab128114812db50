"""``POST /v1/{task}/predict``, one route per registered task, generated from the registry."""

from fastapi import APIRouter, Response
from preflight.data.errors import UnknownTask
from preflight.models.inference import predict_items
from preflight.models.task import Task, all_tasks
from preflight.service.batching import Batcher
from preflight.service.deps import StateDep, served
from preflight.service.schemas import ModelInfoPublic, PredictRequest, PredictResponse, predict_request
from preflight.service.state import Champion, ServiceState


def _endpoint(task: Task):
    async def predict(body: PredictRequest, state: StateDep, response: Response) -> PredictResponse:
        champion = served(state, task.name, response)
        records = await _batcher(state, task).predict(champion, body.items, body.coverage)
        return PredictResponse(
            task=task.name, model=ModelInfoPublic(**vars(champion.info)), predictions=records
        )

    predict.__annotations__["body"] = predict_request(task)  # FastAPI validates with the task's item model
    predict.__doc__ = (
        f"Estimates of {', '.join(task.targets)} with intervals and an out-of-distribution flag."
    )
    return predict


def _batcher(state: ServiceState, task: Task) -> Batcher:
    """The task's merger of concurrent requests (``service.batching``), made on first use."""
    if task.name not in state.batchers:

        def records(champion: Champion, items: list, coverage: float) -> list[dict]:
            return predict_items(task, champion.predictor, state.catalogue, items, coverage).records()

        state.batchers[task.name] = Batcher(records)
    return state.batchers[task.name]


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
