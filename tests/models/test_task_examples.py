"""A task owns its example items (its route's OpenAPI example): every task has some, each valid as the
task's item, and a task without any is refused when it is made."""

import dataclasses

import pytest
from preflight.models.core.task import all_tasks, get_task


@pytest.mark.parametrize("task", all_tasks(), ids=lambda task: task.name)
def test_every_example_item_is_valid_as_the_task_item(task, settings):
    assert task.examples, f"{task.name} has no example items"
    for example in task.examples:
        task.item.model_validate(example, context=settings.validation_context())


def test_a_task_without_examples_is_refused():
    with pytest.raises(ValueError, match="no example items"):
        dataclasses.replace(get_task("gemm"), name="toy-bare", examples=())
