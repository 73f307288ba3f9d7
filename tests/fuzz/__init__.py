"""Coverage-guided fuzzing of every decoder (issue 24): atheris harnesses, their committed corpora and
dictionaries, the regression inputs of what they found. How to run them: docs/fuzzing.md."""
