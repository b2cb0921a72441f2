"""The grading service: Flask app (``service.app.create_app``), models, API, workers, CLI."""
