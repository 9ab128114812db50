from fastapi import APIRouter

from preflight.models import tracking
from preflight.models.task import all_tasks
from preflight.service.deps import StateDep
from preflight.service.schemas import TaskPublic

router = APIRouter(tags=["tasks"])


@router.get("/v1/tasks", response_model=list[TaskPublic])
def list_tasks(state: StateDep) -> list[TaskPublic]:
    """Each task with its input schema, targets and champion."""
    return [TaskPublic(name=t.name, targets=t.targets, sources=list(t.sources), families=list(t.families),
                       group_key=t.group_key, input_schema=t.item.model_json_schema(),
                       champion=tracking.champion_summary(state.settings, t.name)) for t in all_tasks()]
