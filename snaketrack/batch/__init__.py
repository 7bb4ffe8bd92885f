"""Many videos on Ray: a campaign's stages as tasks (``snaketrack batch``), long videos in chunks.

- :func:`load_campaign` / :class:`Campaign`: the campaign file, checked before anything runs.
- :func:`run_campaign`: every video's label → fit-labels → train → track → estimate chain on Ray.
- :func:`run_stage`: one stage, skipped when recorded finished.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Campaign": "campaign", "Video": "campaign", "load_campaign": "campaign",
    "run_campaign": "runner", "Resources": "runner", "connect": "runner",
    "run_stage": "stages", "StageResult": "stages",
})
