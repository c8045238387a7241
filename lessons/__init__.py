"""simsync's lessons: one folder per lesson (see docs/authoring.md). Installed as
``simsync.lessons`` so they ship inside the wheel."""
