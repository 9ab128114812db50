"""Registry and serving: MLflow runs, versions and the champion gate (``tracking``), moving a home's
artifacts (``relocation``), and the devices and measurements a home holds (``devices``, checked by
``plausibility``), which served models adapt to. The MLflow pyfunc loader stays at
``preflight.models.pyfunc``: every registered model records that path."""
