from fastapi import APIRouter
from preflight.models.core.task import all_tasks
from preflight.service.deps import ModelsDep
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import TargetPublic, TaskPublic

router = APIRouter(tags=["tasks"], route_class=UnicodeRoute)


@router.get("/v1/tasks", response_model=list[TaskPublic])
def list_tasks(models: ModelsDep) -> list[TaskPublic]:
    """Each task with its input schema, targets and the champion this service has loaded."""

    def champion(task: str) -> dict | None:
        loaded = models.champions.get(task)
        return None if loaded is None else {k: v for k, v in vars(loaded.info).items() if k != "name"}

    return [
        TaskPublic(
            name=t.name,
            targets={name: TargetPublic(**target.state()) for name, target in t.targets.items()},
            sources=list(t.sources),
            families=list(t.families),
            group_key=t.group_key,
            input_schema=t.item.model_json_schema(),
            champion=champion(t.name),
            actions={a.name: a.path for a in t.actions},
        )
        for t in all_tasks()
    ]
