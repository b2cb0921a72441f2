"""The grading pipeline, comparison, diagnosis and feedback: the verdict, computed outside the sandbox."""
