"""The verdict, computed outside the sandbox: pipeline, comparison, diagnosis, feedback."""
