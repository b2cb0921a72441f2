"""What the service's flows and surfaces stand on, importing nothing else of the service: the
app's shared objects (``extensions``), the database handle (``db``), sending tasks (``queue``),
errors as problem+json (``errors``), input checks and request helpers (``edge``, ``http``) and
pages of a list (``pagination``). The wiring above (``service.app``, ``service.tasks``) builds
them; nothing here imports it."""
