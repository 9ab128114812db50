"""Names a request gives for what the service looks up, bounded so that a lookup's cost is: a device's
name is as long as the catalogue can hold at most (``DeviceSpec.name``), and so is any name a path or
body gives (a task, a kernel)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

#: The longest name a path or body may give, and the longest a device's name or alias may be.
MAX_NAME = 128
#: A device's name or alias, or a name given for one (what ``Catalogue.resolve`` reads).
DeviceName = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
